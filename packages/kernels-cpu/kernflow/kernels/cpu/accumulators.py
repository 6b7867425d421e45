"""Conditional accumulator kernels (TF1's ConditionalAccumulator and SparseConditionalAccumulator).

An accumulator lives in its device's resource manager under (container, shared_name or a private
name), like a queue; the value of its handle passed between kernels is the `Accumulator` itself.
It is a `BlockingResource` (kernflow.kernels.cpu.blocking) with one line: the take_grad attempts,
served in arrival order; every apply flushes the line, so a take waiting for `n` gradients
completes on the thread of the apply that brought the n-th one, after the lock is released.

Invariants (under the accumulator's lock):

* `count` is the number of gradients added since the last take; the aggregate (`_sum`, or the
  sparse `_pieces`) holds exactly those gradients, and is empty when `count` is 0.
* A gradient whose local step is below `global_step` changes nothing but `dropped` (+1) and is
  not validated (TF: silently dropped; kernflow counts it). A take that completes increments
  `global_step` and empties the aggregate.
* Gradients are copied or reduced before they enter the aggregate, so no aggregate aliases a
  buffer some other kernel still owns, and a take hands its result over without a copy.

Applies run concurrently from many steps: a dense apply converts its gradient outside the lock
and adds it in place under it; a sparse apply checks its indices and sums its repeated rows outside
the lock and only appends under it, and the take merges all pieces with one sort.
"""

from __future__ import annotations

import itertools
import logging

import numpy as np

from kernflow.core import telemetry
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_shape as _ts
from kernflow.kernels.cpu.blocking import COMPLETE, NO_PROGRESS, Attempt, BlockingResource

__all__ = ["Accumulator", "DenseAccumulator", "SparseAccumulator", "register"]

DEVICE = "CPU"
_log = logging.getLogger(__name__)
_ids = itertools.count()


def _fmt(dims) -> str:
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _fmt_shape(shape: _ts.TensorShape) -> str:
    return "<unknown>" if shape.rank is None else _fmt(shape.as_list())


def _invalid(node: str, msg: str):
    return errors.InvalidArgumentError(None, None, f"{node}: {msg}")


def _divide(total, counts, dtype):
    """`total` / `counts` in `dtype` (integer types truncate, as TF's division does)."""
    if np.dtype(dtype).kind in "iu":
        return np.trunc(total / counts).astype(dtype)
    return (total / counts).astype(dtype, copy=False)


class _Take(Attempt):
    """A take_grad waiting until the accumulator holds `n` gradients."""

    __slots__ = ("n",)

    def __init__(self, done, n):
        super().__init__(done)
        self.n = n

    def step(self, acc) -> int:
        if acc.count < self.n:
            return NO_PROGRESS
        self.result = acc.take_locked()
        return COMPLETE


class Accumulator(BlockingResource):
    """What dense and sparse accumulators share: the global step, the count, the take line.

    Args:
        kind: "ConditionalAccumulator" or "SparseConditionalAccumulator".
        name: the shared name, or the node name of a private accumulator (for messages).
        dtype: the DType of the gradients.
        shape: their declared TensorShape (possibly partial or unknown).
        reduction_type: "MEAN" or "SUM".
    """

    def __init__(self, kind, name, dtype, shape, reduction_type):
        super().__init__(kind, name, 1)
        self.dtype = dtype
        self.np_dtype = np.dtype(dtype.as_numpy_dtype)
        self.shape = shape
        self.reduction_type = reduction_type
        self.global_step = 0
        self.count = 0
        self.dropped = 0  # stale gradients dropped since creation

    def __repr__(self):
        return f"<{self.kind} '{self.name}' count={self.count} global_step={self.global_step}>"

    def check_dtype(self, dtype, node: str) -> None:
        if dtype.base_dtype != self.dtype:
            raise _invalid(node, f"gradients of type {dtype.base_dtype.name} do not match "
                           f"{self.kind} '{self.name}', which accumulates {self.dtype.name}")

    def apply(self, local_step: int, prepare, node: str) -> bool:
        """Adds the gradient ``prepare()`` returns unless it is stale; False when dropped.

        `prepare` converts and checks what needs no state, outside the lock, and runs only for a
        gradient that is not stale (TF drops stale gradients without looking at them).
        """
        if local_step < self.global_step:  # unlocked read: an int; decided again under the lock
            return self._drop()
        grad = prepare()
        with self._lock:
            stale = local_step < self.global_step
            if stale:
                self.dropped += 1
            else:
                self._add_locked(grad, node)
                self.count += 1
                finished = self._flush_locked()
        if stale:
            telemetry.gradient_dropped(self.name)   # outside the lock (the SDK's work, if any)
            return False
        self._complete(finished)
        return True

    def _drop(self) -> bool:
        with self._lock:
            self.dropped += 1
        telemetry.gradient_dropped(self.name)   # kernflow.accumulator.dropped_gradients
        return False

    def take(self, n: int, step_ctx, done) -> None:
        """Completes `done` with the aggregate once `n` gradients were added."""
        self.start(_Take(done, n), 0, step_ctx)

    def take_locked(self):
        """The aggregate of the gradients held; empties it and increments the global step."""
        self.global_step += 1
        out = self._result_locked()
        self.count = 0
        return out

    def set_global_step(self, step: int) -> None:
        with self._lock:
            if step < self.global_step:
                _log.warning("%s '%s': setting the global step to %d, below its current %d",
                             self.kind, self.name, step, self.global_step)
            self.global_step = step

    def num_accumulated(self) -> int:
        with self._lock:
            return self.count

    def num_dropped(self) -> int:
        with self._lock:
            return self.dropped

    def same_as(self, other) -> str:
        """'' if `other` was created with the same attrs, else what differs (shared accumulators)."""
        mine = {"type": self.kind, "dtype": self.dtype.name, "shape": _fmt_shape(self.shape),
                "reduction_type": self.reduction_type}
        theirs = {"type": other.kind, "dtype": other.dtype.name, "shape": _fmt_shape(other.shape),
                  "reduction_type": other.reduction_type}
        for what, have in mine.items():
            if have != theirs[what]:
                return f"{what} {have} but requested {what} was {theirs[what]}"
        return ""


class DenseAccumulator(Accumulator):
    """A ConditionalAccumulator: the running sum of dense gradients of one shape."""

    def __init__(self, name, dtype, shape, reduction_type):
        super().__init__("ConditionalAccumulator", name, dtype, shape, reduction_type)
        self._sum = None

    def prepare(self, grad):
        return np.asarray(grad, dtype=self.np_dtype)

    def _add_locked(self, grad, node: str) -> None:
        if self._sum is not None and grad.shape != self._sum.shape:
            raise self._mismatch(node, _fmt(self._sum.shape), grad.shape)
        if not self.shape.is_compatible_with(grad.shape):
            raise self._mismatch(node, _fmt_shape(self.shape), grad.shape)
        if self._sum is None:
            self._sum = np.array(grad, copy=True)
        else:
            np.add(self._sum, grad, out=self._sum)

    def _mismatch(self, node, expected: str, got):
        return _invalid(node, f"Shape mismatch: {self.kind} '{self.name}' expects gradients of "
                        f"shape {expected}, got {_fmt(got)}")

    def _result_locked(self):
        total, self._sum = self._sum, None
        if self.reduction_type == "MEAN":
            return _divide(total, self.count, self.np_dtype)
        return total


def _sum_rows(indices, values):
    """Sorted unique `indices`, their rows of `values` summed, and how many rows each had."""
    if len(indices) == 0:
        return indices, values, np.zeros([0], np.int64)
    order = np.argsort(indices, kind="stable")
    idx = indices[order]
    starts = np.flatnonzero(np.concatenate([[True], idx[1:] != idx[:-1]]))
    if len(starts) == len(idx):  # no repeats
        return idx, values[order], np.ones(len(idx), np.int64)
    sums = np.add.reduceat(values[order], starts, axis=0, dtype=values.dtype)  # no int upcast
    return idx[starts], sums, np.diff(np.append(starts, len(idx)))


class SparseAccumulator(Accumulator):
    """A SparseConditionalAccumulator: the gradients held, each with its rows made unique."""

    def __init__(self, name, dtype, shape, reduction_type):
        super().__init__("SparseConditionalAccumulator", name, dtype, shape, reduction_type)
        self._pieces = []       # (unique sorted indices, summed rows) per gradient
        self._row_shape = None  # values.shape[1:] of the gradients held

    def prepare(self, indices, values, dense_shape, has_known_shape: bool, node: str):
        """Checks what needs no state and sums repeated rows (outside the lock)."""
        indices = np.asarray(indices, np.int64)
        values = np.asarray(values, self.np_dtype)
        if indices.ndim != 1:
            raise _invalid(node, f"gradient indices must be a vector, got shape {_fmt(indices.shape)}")
        if values.ndim == 0:
            raise _invalid(node, "gradient values cannot be a scalar")
        if values.shape[0] != indices.shape[0]:
            raise _invalid(node, f"{indices.shape[0]} gradient indices but {values.shape[0]} rows "
                           f"of values")
        limit = self.shape.as_list()[0] if self.shape.rank else None
        if has_known_shape:
            dims = [int(d) for d in np.asarray(dense_shape).reshape(-1)]
            if not self.shape.is_compatible_with(dims):
                raise _invalid(node, f"Shape mismatch: {self.kind} '{self.name}' has dense shape "
                               f"{_fmt_shape(self.shape)}, the gradient's is {_fmt(dims)}")
            limit = dims[0] if dims else limit
        self._check_indices(indices, limit, node)
        idx, rows, _ = _sum_rows(indices, values)
        return idx, rows

    def _check_indices(self, indices, limit, node) -> None:
        bad = indices < 0 if limit is None else (indices < 0) | (indices >= limit)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise _invalid(node, f"index {int(indices[i])} of gradient row {i} is out of range "
                           f"[0, {'?' if limit is None else limit}) of {self.kind} '{self.name}'")

    def _add_locked(self, grad, node: str) -> None:
        idx, rows = grad
        self._check_rows_locked(rows.shape, node)
        self._row_shape = rows.shape[1:]
        self._pieces.append((idx, rows))  # `_sum_rows` made both fresh arrays (or empty ones)

    def _check_rows_locked(self, shape, node) -> None:
        if self._row_shape is not None:
            ok, want = shape[1:] == self._row_shape, _fmt(self._row_shape)
        elif self.shape.rank is not None:
            ok, want = self.shape[1:].is_compatible_with(shape[1:]), _fmt_shape(self.shape[1:])
        else:
            return
        if not ok:
            raise _invalid(node, f"Shape mismatch: {self.kind} '{self.name}' expects rows of shape "
                           f"{want}, got values of shape {_fmt(shape)}")

    def _result_locked(self):
        pieces, self._pieces = self._pieces, []
        row_shape, self._row_shape = self._row_shape, None
        # count >= 1, so there is at least one piece.
        idx, total, counts = _sum_rows(np.concatenate([p[0] for p in pieces]),
                                       np.concatenate([p[1] for p in pieces]))
        if self.reduction_type == "MEAN":
            total = _divide(total, counts.reshape((-1,) + (1,) * len(row_shape)), self.np_dtype)
        dim0 = self.shape.as_list()[0] if self.shape.rank else None
        shape = np.array([-1 if dim0 is None else dim0] + list(row_shape), np.int64)
        return [idx, total, shape]


# ---------------------------------------------------------------------------- kernels
_KINDS = {"ConditionalAccumulator": DenseAccumulator, "SparseConditionalAccumulator": SparseAccumulator}


def _accumulator_op(ctx):
    cls = _KINDS[ctx.op_type]
    container, shared = ctx.get_attr("container"), ctx.get_attr("shared_name")
    key = shared or f"_{next(_ids)}_{ctx.name}"  # a private accumulator: one per kernel
    args = (shared or ctx.name, ctx.get_attr("dtype").base_dtype, _ts.as_shape(ctx.get_attr("shape")),
            ctx.get_attr("reduction_type"))
    want = cls(*args)

    def check(acc):
        diff = acc.same_as(want) if isinstance(acc, Accumulator) else \
            f"type {type(acc).__name__}, not an accumulator"
        if diff:
            raise _invalid(ctx.name, f"Shared accumulator '{key}' has {diff}")
    return ctx.resource_mgr.cached_getter(container, key, lambda: cls(*args), check)


def _accumulator_of(handle, node: str, cls=Accumulator) -> Accumulator:
    if not isinstance(handle, cls):
        what = "an accumulator" if cls is Accumulator else f"a {cls.__name__}"
        raise _invalid(node, f"input 0 is not {what} handle (got {type(handle).__name__})")
    return handle


def _apply_dense(ctx):
    node, dtype = ctx.name, ctx.get_attr("dtype")

    def compute(handle, local_step, grad):
        acc = _accumulator_of(handle, node, DenseAccumulator)
        acc.check_dtype(dtype, node)
        acc.apply(int(local_step), lambda: acc.prepare(grad), node)
    return compute


def _apply_sparse(ctx):
    node, dtype = ctx.name, ctx.get_attr("dtype")
    known = ctx.get_attr("has_known_shape")

    def compute(handle, local_step, indices, values, dense_shape):
        acc = _accumulator_of(handle, node, SparseAccumulator)
        acc.check_dtype(dtype, node)
        acc.apply(int(local_step), lambda: acc.prepare(indices, values, dense_shape, known, node),
                  node)
    return compute


def _take(cls):
    def factory(ctx):
        node, dtype = ctx.name, ctx.get_attr("dtype")

        def compute(step, inputs, done):
            acc = _accumulator_of(inputs[0], node, cls)
            acc.check_dtype(dtype, node)
            n = int(inputs[1])
            if n < 1:
                raise _invalid(node, f"Argument num_required must be positive, but was {n}")
            acc.take(n, step, done)
        return compute
    return factory


def _num_accumulated(ctx):
    node = ctx.name
    return lambda handle: np.int32(_accumulator_of(handle, node).num_accumulated())


def _num_dropped(ctx):
    node = ctx.name
    return lambda handle: np.int64(_accumulator_of(handle, node).num_dropped())


def _set_global_step(ctx):
    node = ctx.name

    def compute(handle, new_global_step):
        _accumulator_of(handle, node).set_global_step(int(new_global_step))
    return compute


def register(registry) -> None:
    """Registers the CPU conditional accumulator kernels."""
    for op in _KINDS:
        registry.register(op, DEVICE, _accumulator_op)
    registry.register("AccumulatorApplyGradient", DEVICE, _apply_dense)
    registry.register("SparseAccumulatorApplyGradient", DEVICE, _apply_sparse)
    registry.register("AccumulatorTakeGradient", DEVICE, _take(DenseAccumulator), is_async=True)
    registry.register("SparseAccumulatorTakeGradient", DEVICE, _take(SparseAccumulator),
                      is_async=True)
    registry.register("AccumulatorNumAccumulated", DEVICE, _num_accumulated)
    registry.register("AccumulatorNumDropped", DEVICE, _num_dropped)
    registry.register("AccumulatorSetGlobalStep", DEVICE, _set_global_step)

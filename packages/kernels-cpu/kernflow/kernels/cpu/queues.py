"""Queue kernels: FIFO, padding FIFO, random shuffle and priority queues, with TF1 semantics.

A queue lives in its device's resource manager under (container, shared_name or a private name);
the value of a queue handle passed between kernels is the `Queue` object itself.

A queue keeps its elements in a storage and two lines of waiting attempts (the machinery of
`kernflow.kernels.cpu.blocking`): enqueuers (enqueue, enqueue_many and close, which waits behind the
enqueues blocked before it) and dequeuers. An enqueue_many inserts the rows that fit, a dequeue_many
takes the elements there are; the blocking module's invariants hold (an attempt finishes exactly
once, `done` runs outside the lock). Besides:

* Elements a dequeue_many has taken but not yet delivered belong to its attempt; if the attempt
  fails they go back to the front of the queue.
* Once `closed` is set and the close attempt completed, no element can enter the queue: enqueue
  attempts still in line fail with CancelledError when they reach the head.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import sys

import numpy as np

from kernflow.core import telemetry
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_shape as _ts
from kernflow.kernels.cpu.blocking import COMPLETE as _COMPLETE
from kernflow.kernels.cpu.blocking import NO_PROGRESS as _NO_PROGRESS
from kernflow.kernels.cpu.blocking import PROGRESS as _PROGRESS
from kernflow.kernels.cpu.blocking import Attempt as _Attempt
from kernflow.kernels.cpu.blocking import BlockingResource

__all__ = ["Queue", "register"]

DEVICE = "CPU"
_ids = itertools.count()
_ENQUEUERS, _DEQUEUERS = 0, 1  # the queue's lines


def _fmt(shape) -> str:
    dims = shape.as_list() if isinstance(shape, _ts.TensorShape) else list(shape)
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"


def _type_names(dtypes) -> str:
    return ", ".join(d.name for d in dtypes)


# ---------------------------------------------------------------------------- storages
# A *piece* is ``(components, k)``: one array per component, each with a leading dimension k.
class _FifoStorage:
    """Elements in arrival order, kept as the batches they arrived in (no per-row copies)."""

    def __init__(self):
        self._chunks = collections.deque()  # [components, start, end]
        self.size = 0

    def put(self, comps, k: int) -> None:
        self._chunks.append([comps, 0, k])
        self.size += k

    def put_back(self, pieces) -> None:
        for comps, k in reversed(pieces):
            self._chunks.appendleft([comps, 0, k])
            self.size += k

    def take(self, n: int) -> list:
        out = []
        self.size -= n
        while n:
            chunk = self._chunks[0]
            comps, start, end = chunk
            k = min(n, end - start)
            if start == 0 and k == end:
                out.append((comps, k))
            else:
                out.append((tuple(c[start:start + k] for c in comps), k))
            chunk[1] = start + k
            if chunk[1] == end:
                self._chunks.popleft()
            n -= k
        return out


def _rows(comps, k):
    return [tuple(c[i] for c in comps) for i in range(k)]


def _stack_rows(rows, ncomp):
    return (tuple(np.stack([r[j] for r in rows]) for j in range(ncomp)), len(rows))


class _ShuffleStorage:
    """Elements in no order; `take` draws uniformly at random (seeded when seed or seed2 is set)."""

    def __init__(self, ncomp: int, seed: int, seed2: int):
        self._rows = []
        self._ncomp = ncomp
        self._rng = np.random.Generator(np.random.PCG64([seed, seed2])) if (seed or seed2) \
            else np.random.default_rng()

    @property
    def size(self) -> int:
        return len(self._rows)

    def put(self, comps, k: int) -> None:
        self._rows.extend(_rows(comps, k))

    def put_back(self, pieces) -> None:
        for comps, k in pieces:
            self.put(comps, k)

    def take(self, n: int) -> list:
        rows, picked = self._rows, []
        draws = self._rng.integers(0, np.arange(len(rows), len(rows) - n, -1)) if n else ()
        for i in draws:
            i = int(i)
            rows[i], rows[-1] = rows[-1], rows[i]
            picked.append(rows.pop())
        return [_stack_rows(picked, self._ncomp)]


class _PriorityStorage:
    """A heap on the int64 first component; equal priorities leave in insertion order."""

    def __init__(self, ncomp: int):
        self._heap = []
        self._ncomp = ncomp
        self._seq = itertools.count()
        self._back = itertools.count(-1, -1)  # elements put back go before their equals

    @property
    def size(self) -> int:
        return len(self._heap)

    def put(self, comps, k: int, seq=None) -> None:
        seq = seq or self._seq
        for row in _rows(comps, k):
            heapq.heappush(self._heap, (int(row[0]), next(seq), row))

    def put_back(self, pieces) -> None:
        for comps, k in reversed(pieces):
            self.put(comps, k, self._back)

    def take(self, n: int) -> list:
        return [_stack_rows([heapq.heappop(self._heap)[2] for _ in range(n)], self._ncomp)]


# ---------------------------------------------------------------------------- attempts
class _Enqueue(_Attempt):
    __slots__ = ("comps", "count", "offset")

    def __init__(self, done, comps, count):
        super().__init__(done)
        self.comps, self.count, self.offset = comps, count, 0

    def step(self, q) -> int:
        if q.closed:
            self.result = errors.CancelledError(None, None, f"{q.kind} '{q.name}' is closed.")
            return _COMPLETE
        left = self.count - self.offset
        if not left:
            return _COMPLETE
        k = min(q.capacity - q.storage.size, left)
        if k <= 0:
            return _NO_PROGRESS
        if k == self.count:
            q.storage.put(self.comps, k)
        else:
            q.storage.put(tuple(c[self.offset:self.offset + k] for c in self.comps), k)
        self.offset += k
        return _COMPLETE if self.offset == self.count else _PROGRESS


class _Close(_Attempt):
    __slots__ = ()

    def step(self, q) -> int:
        if q.closed:
            self.result = errors.CancelledError(None, None, f"Queue '{q.name}' is already closed.")
        else:
            q.closed = True
        return _COMPLETE


class _Dequeue(_Attempt):
    __slots__ = ("n", "remaining", "allow_small", "single", "pieces")

    def __init__(self, done, n, allow_small, single):
        super().__init__(done)
        self.n = self.remaining = n
        self.allow_small, self.single = allow_small, single
        self.pieces = []

    def step(self, q) -> int:
        s = q.storage
        avail = s.size if q.closed else s.size - q.min_after_dequeue
        k = min(avail, self.remaining)
        if k > 0:
            self.pieces.extend(s.take(k))
            self.remaining -= k
        if self.remaining == 0:
            self.result = q.deliver(self.pieces, self.single)
            self.pieces = []
            return _COMPLETE
        if q.closed:  # nothing more can arrive
            if self.allow_small and self.remaining < self.n:
                self.result = q.deliver(self.pieces, self.single)
                self.pieces = []
                return _COMPLETE
            self.restore(q)
            self.result = errors.OutOfRangeError(
                None, None, f"{q.kind} '{q.name}' is closed and has insufficient elements "
                f"(requested {self.n}, current size {s.size})")
            return _COMPLETE
        return _PROGRESS if k > 0 else _NO_PROGRESS

    def restore(self, q) -> None:
        if self.pieces:
            q.storage.put_back(self.pieces)
            self.pieces = []
            self.remaining = self.n


# ---------------------------------------------------------------------------- the queue
class Queue(BlockingResource):
    """A queue resource. See the module docstring for the attempt lines and their invariants.

    Args:
        kind: "FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue" or "PriorityQueue".
        name: the resource name (shown in error messages).
        dtypes: component DTypes.
        shapes: component TensorShapes, or None when unspecified.
        capacity: the most elements held; -1 for unbounded.
        min_after_dequeue, seed, seed2: RandomShuffleQueue parameters.
    """

    def __init__(self, kind, name, dtypes, shapes, capacity, min_after_dequeue=0, seed=0, seed2=0):
        super().__init__(kind, name, 2)
        self.dtypes = list(dtypes)
        self.np_dtypes = [d.as_numpy_dtype for d in self.dtypes]
        self.shapes = shapes
        # Per component: the dims to check (None entries match any size), or None for any shape.
        self._dims = [None if shapes is None or s.rank is None else tuple(s.as_list())
                      for s in (shapes or self.dtypes)]
        self.capacity = capacity if capacity >= 0 else sys.maxsize
        self.requested_capacity = capacity
        self.min_after_dequeue = min_after_dequeue
        self.seeds = (seed, seed2)
        self.padded = kind == "PaddingFIFOQueue"
        self.closed = False
        n = len(self.dtypes)
        if kind == "RandomShuffleQueue":
            self.storage = _ShuffleStorage(n, seed, seed2)
        elif kind == "PriorityQueue":
            self.storage = _PriorityStorage(n)
        else:
            self.storage = _FifoStorage()

    def __repr__(self):
        return f"<{self.kind} '{self.name}' size={self.storage.size} closed={self.closed}>"

    # ------------------------------------------------------------------ validation
    def check_types(self, dtypes, op: str) -> None:
        if [d.base_dtype for d in dtypes] != self.dtypes:
            raise errors.InvalidArgumentError(
                None, None, f"{op}: the components have types [{_type_names(dtypes)}] but "
                f"{self.kind} '{self.name}' holds [{_type_names(self.dtypes)}]")

    def _check_shape(self, i: int, shape, prefix=()) -> None:
        want = self._dims[i]
        if want is None:
            return
        shape = shape[len(prefix):]
        if shape == want or (len(shape) == len(want) and
                             all(w is None or w == d for w, d in zip(want, shape))):
            return
        expected = list(prefix) + list(want)
        raise errors.InvalidArgumentError(
            None, None, f"Shape mismatch in tuple component {i}. Expected {_fmt(expected)}, "
            f"got {_fmt(list(prefix) + list(shape))}")

    def make_element(self, values, many: bool):
        """Copies enqueued values into a piece ``(components, k)``, checking their shapes."""
        comps = [np.array(v, dtype=dt, copy=True) for v, dt in zip(values, self.np_dtypes)]
        if not many:
            for i, c in enumerate(comps):
                self._check_shape(i, c.shape)
            if self.kind == "PriorityQueue" and comps[0].ndim != 0:
                raise errors.InvalidArgumentError(
                    None, None, f"Shape mismatch in tuple component 0 (the priority). Expected "
                    f"[], got {_fmt(comps[0].shape)}")
            return tuple(c[None] for c in comps), 1
        for i, c in enumerate(comps):
            if c.ndim == 0:
                raise errors.InvalidArgumentError(
                    None, None, f"Shape mismatch in tuple component {i}: EnqueueMany needs a batch "
                    f"dimension, got a scalar")
        k = comps[0].shape[0]
        for i, c in enumerate(comps[1:], 1):
            if c.shape[0] != k:
                raise errors.InvalidArgumentError(
                    None, None, f"EnqueueMany requires all components to have the same batch size: "
                    f"component 0 has {k}, component {i} has {c.shape[0]}")
        for i, c in enumerate(comps):
            self._check_shape(i, c.shape, prefix=(k,))
        if self.kind == "PriorityQueue" and comps[0].ndim != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Shape mismatch in tuple component 0 (the priorities). Expected "
                f"[{k}], got {_fmt(comps[0].shape)}")
        return tuple(comps), k

    def empty_batch(self):
        return tuple(np.zeros([0] + [d or 0 for d in s.as_list()], dt)
                     for s, dt in zip(self.shapes, self.np_dtypes))

    # ------------------------------------------------------------------ results
    def deliver(self, pieces, single: bool):
        """The kernel outputs for `pieces`: one element, or a batch (padded for padding queues)."""
        if single:
            comps = pieces[0][0]
            out = [c[0] for c in comps]
        elif len(pieces) == 1:
            out = list(pieces[0][0])
        else:
            out = [self._combine([p[0][j] for p in pieces], j) for j in range(len(self.dtypes))]
        return out[0] if len(out) == 1 else out

    def _combine(self, parts, j):
        first = parts[0].shape[1:]
        if not self.padded or all(p.shape[1:] == first for p in parts):
            return np.concatenate(parts)
        dims = np.max([p.shape[1:] for p in parts], axis=0)
        total = sum(p.shape[0] for p in parts)
        dt = self.np_dtypes[j]
        out = np.full((total,) + tuple(int(d) for d in dims), b"" if np.dtype(dt).kind == "O" else 0, dt)
        at = 0
        for p in parts:
            out[(slice(at, at + p.shape[0]),) + tuple(slice(0, d) for d in p.shape[1:])] = p
            at += p.shape[0]
        return out

    def close_and_cancel(self) -> None:
        """Closes at once and fails every enqueue still waiting (also a pending close)."""
        with self._lock:
            self.closed = True
            cancelled = self._drop_locked([self._lines[_ENQUEUERS]], lambda: errors.CancelledError(
                None, None, "Enqueue operation was cancelled"))
            finished = self._flush_locked()
        self._complete(cancelled + finished)

    def size(self) -> int:
        with self._lock:
            return self.storage.size

    def _destroy_locked(self) -> None:
        self.closed = True


# ---------------------------------------------------------------------------- kernels
_KINDS = {"FIFOQueueV2": "FIFOQueue", "PaddingFIFOQueueV2": "PaddingFIFOQueue",
          "RandomShuffleQueueV2": "RandomShuffleQueue", "PriorityQueueV2": "PriorityQueue"}


def _check_shared(q, want: Queue) -> None:
    """Raises InvalidArgumentError if an existing shared queue differs from the requested one."""
    def fail(what, have, asked):
        raise errors.InvalidArgumentError(None, None, f"Shared queue '{want.name}' has {what} {have} "
                                          f"but requested {what} was {asked}")
    if not isinstance(q, Queue):
        raise errors.InvalidArgumentError(None, None, f"Resource '{want.name}' is a "
                                          f"{type(q).__name__}, not a queue")
    if q.kind != want.kind:
        fail("type", q.kind, want.kind)
    if q.dtypes != want.dtypes:
        fail("component types", f"[{_type_names(q.dtypes)}]", f"[{_type_names(want.dtypes)}]")
    if q.requested_capacity != want.requested_capacity:
        fail("capacity", q.requested_capacity, want.requested_capacity)
    if (q.shapes is None) != (want.shapes is None) or (
            q.shapes is not None and [s.as_list() for s in q.shapes] != [s.as_list() for s in want.shapes]):
        fmt = lambda ss: "unspecified" if ss is None else "[" + ", ".join(map(_fmt, ss)) + "]"  # noqa: E731
        fail("component shapes", fmt(q.shapes), fmt(want.shapes))
    if q.min_after_dequeue != want.min_after_dequeue:
        fail("min_after_dequeue", q.min_after_dequeue, want.min_after_dequeue)
    if q.seeds != want.seeds:
        fail("seeds", q.seeds, want.seeds)


def _queue_op(ctx):
    kind = _KINDS[ctx.op_type]
    container = ctx.get_attr("container")
    name = ctx.get_attr("shared_name") or f"_{next(_ids)}_{ctx.name}"
    dtypes = [d.base_dtype for d in ctx.get_attr("component_types")]
    shapes = [_ts.as_shape(s) for s in ctx.get_attr("shapes")]
    extra = {}
    if kind == "PriorityQueue":
        from kernflow.core.framework import dtypes as _dtypes
        dtypes = [_dtypes.int64] + dtypes
        shapes = [_ts.TensorShape([])] + shapes if len(shapes) == len(dtypes) - 1 else []
    if kind == "RandomShuffleQueue":
        extra = dict(min_after_dequeue=ctx.get_attr("min_after_dequeue"), seed=ctx.get_attr("seed"),
                     seed2=ctx.get_attr("seed2"))
    if shapes and len(shapes) != len(dtypes):
        raise errors.InvalidArgumentError(None, None, f"{ctx.name}: {len(shapes)} shapes for "
                                          f"{len(dtypes)} component types")
    capacity = ctx.get_attr("capacity")
    make = lambda: Queue(kind, name, dtypes, shapes or None, capacity, **extra)  # noqa: E731
    want = make()
    # The queue created (not `want`, made only to compare) reports its size in kernflow.queue.size.
    return ctx.resource_mgr.cached_getter(container, name, lambda: telemetry.observe_queue(make()),
                                          lambda q: _check_shared(q, want))


def _queue_of(handle, node: str) -> Queue:
    if not isinstance(handle, Queue):
        raise errors.InvalidArgumentError(None, None, f"{node}: input 0 is not a queue handle "
                                          f"(got {type(handle).__name__})")
    return handle


def _blocking_kernel(types_attr: str, run):
    """A factory for an async queue kernel: checks the handle and component types, then calls
    ``run(queue, step, inputs, done, node, timeout_ms)``."""
    def factory(ctx):
        types = [d.base_dtype for d in ctx.get_attr(types_attr)]
        timeout_ms = ctx.get_attr("timeout_ms")
        node = ctx.name

        def compute(step, inputs, done):
            q = _queue_of(inputs[0], node)
            q.check_types(types, node)
            run(q, step, inputs, done, node, timeout_ms)
        return compute
    return factory


def _enqueue(many: bool):
    def run(q, step, inputs, done, node, timeout_ms):
        comps, k = q.make_element(inputs[1:], many)
        q.start(_Enqueue(done, comps, k), _ENQUEUERS, step, timeout_ms)
    return _blocking_kernel("Tcomponents", run)


def _dequeue_one(q, step, inputs, done, node, timeout_ms):
    q.start(_Dequeue(done, 1, False, True), _DEQUEUERS, step, timeout_ms)


def _dequeue_n(allow_small: bool):
    def run(q, step, inputs, done, node, timeout_ms):
        n = int(inputs[1])
        if n < 0:
            raise errors.InvalidArgumentError(None, None, f"{node}: requested {n} < 0 elements")
        if q.shapes is None:
            raise errors.InvalidArgumentError(
                None, None, f"{q.kind}'s DequeueMany and DequeueUpTo require the components to "
                f"have specified shapes.")
        if n == 0:
            batch = q.empty_batch()
            done(batch[0] if len(batch) == 1 else list(batch))
            return
        q.start(_Dequeue(done, n, allow_small, False), _DEQUEUERS, step, timeout_ms)
    return _blocking_kernel("component_types", run)


def _close(ctx):
    cancel = ctx.get_attr("cancel_pending_enqueues")
    node = ctx.name

    def compute(step, inputs, done):
        q = _queue_of(inputs[0], node)
        if cancel:
            q.close_and_cancel()
            done(None)
        else:
            q.start(_Close(done), _ENQUEUERS, step)
    return compute


def _size(ctx):
    node = ctx.name
    return lambda handle: np.int32(_queue_of(handle, node).size())


def _is_closed(ctx):
    node = ctx.name
    return lambda handle: np.bool_(_queue_of(handle, node).closed)


def register(registry) -> None:
    """Registers the CPU queue kernels."""
    for op in _KINDS:
        registry.register(op, DEVICE, _queue_op)
    registry.register("QueueEnqueueV2", DEVICE, _enqueue(False), is_async=True)
    registry.register("QueueEnqueueManyV2", DEVICE, _enqueue(True), is_async=True)
    registry.register("QueueDequeueV2", DEVICE, _blocking_kernel("component_types", _dequeue_one),
                      is_async=True)
    registry.register("QueueDequeueManyV2", DEVICE, _dequeue_n(False), is_async=True)
    registry.register("QueueDequeueUpToV2", DEVICE, _dequeue_n(True), is_async=True)
    registry.register("QueueCloseV2", DEVICE, _close, is_async=True)
    registry.register("QueueSizeV2", DEVICE, _size)
    registry.register("QueueIsClosedV2", DEVICE, _is_closed)

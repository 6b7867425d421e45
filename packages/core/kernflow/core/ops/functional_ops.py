"""Higher-order functions over the first dimension: `kf.map_fn`, `kf.foldl`, `kf.foldr`, `kf.scan`.

Each is one `kf.while_loop` (TF1 semantics, so gradients flow through it like through any loop):
the elements are unstacked into TensorArrays before the loop, each iteration reads element i,
calls `fn`, and (for map_fn and scan) writes the result at i into an output TensorArray that is
stacked after the loop. `elems` may be a nested structure (lists, tuples, dicts) of tensors that
share their first dimension n; `fn` sees one slice of each, packed the same way.

The number of iterations n is the static first dimension of the first element when known, else
its dynamic shape; the stacked results get n as their static first dimension when any element
knows it.

Example::

    squares = kf.map_fn(lambda x: x * x, kf.constant([1., 2., 3.]))         # [1, 4, 9]
    total = kf.foldl(lambda a, x: a + x, kf.constant([1, 2, 3]))            # 6
    cumsum = kf.scan(lambda a, x: a + x, kf.constant([1, 2, 3]))            # [1, 3, 6]
    pairs = kf.map_fn(lambda p: p[0] * p[1], (xs, ys), dtype=kf.float32)
"""

from __future__ import annotations

from kernflow.core.framework import nest
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.ops import array_ops_shape
from kernflow.core.ops import control_flow_v1
from kernflow.core.ops.tensor_array_ops import TensorArray

__all__ = ["map_fn", "foldl", "foldr", "scan"]


# ---------------------------------------------------------------------------- shared pieces
def _check_callable(fn) -> None:
    if not callable(fn):
        raise TypeError("fn must be callable.")


def _flat_elems(elems) -> list:
    """The leaves of `elems` as tensors.

    Raises:
        ValueError: `elems` has no tensors, or one of them is a scalar.
    """
    leaves = nest.flatten(elems)
    if not leaves:
        raise ValueError(f"elems must be a Tensor or (possibly nested) sequence of Tensors. "
                         f"Got {elems!r}")
    flat = [_ops.convert_to_tensor(e, name="elem") for e in leaves]
    for e in flat:
        if e.shape.rank == 0:
            raise ValueError(f"Elements in elems must be 1+ dimensional Tensors, not scalars; "
                             f"{e.name} has shape {e.shape}")
    return flat


def _static_length(elems_flat):
    """The first dimension the elements agree on statically (an int, or None if unknown).

    Raises:
        ValueError: two elements have different known first dimensions.
    """
    n = None
    for e in elems_flat:
        d = _ts.dimension_value(e.shape[0])
        if d is None:
            continue
        if n is not None and d != n:
            raise ValueError(f"Elements of elems must have the same first dimension: {e.name} "
                             f"has {d}, an earlier element has {n}")
        n = d
    return n


def _length(elems_flat, n_static):
    """The number of iterations: the static length when known, else the first element's."""
    if n_static is not None:
        return n_static
    return array_ops_shape.shape(elems_flat[0])[0]


def _unstacked(elems_flat, n) -> list:
    """One TensorArray per element, holding its slices along the first dimension."""
    return [TensorArray(e.dtype, size=n, dynamic_size=False, infer_shape=True,
                        element_shape=e.shape[1:])
            .unstack(e) for e in elems_flat]


def _stacked(tas, n_static) -> list:
    """Stacks each output TensorArray, with `n_static` as the first dimension when known."""
    out = []
    for ta in tas:
        r = ta.stack()
        if r.shape.rank is not None:
            r.set_shape(_ts.TensorShape([n_static]).concatenate(r.shape[1:]))
        out.append(r)
    return out


def _same_structure(expected, actual, what) -> None:
    try:
        nest.assert_same_structure(expected, actual)
    except (ValueError, TypeError) as e:
        raise type(e)(f"The output of fn does not match the structure of {what}: {e}") from None


# ---------------------------------------------------------------------------- map_fn
def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False,
           infer_shape=True, name=None):
    """Applies `fn` to each slice of `elems` along its first dimension and stacks the results.

    Args:
        fn: callable taking one slice (structured like `elems`) and returning a (nested)
            structure of tensors, structured like `dtype` when given, else like `elems`.
        elems: a tensor or a (nested) structure of tensors sharing their first dimension n.
        dtype: the dtype (or nested structure of dtypes) of fn's output; required when fn's
            output differs in structure or dtype from `elems`.
        parallel_iterations: how many iterations may run at once (default 10).
        back_prop: whether gradients may flow through the loop.
        swap_memory: accepted for TF compatibility (no device memory swapping here).
        infer_shape: whether all outputs of fn must have the same shape (checked while building).
        name: name scope of the ops (default "map").

    Returns:
        A tensor or structure of tensors (like `dtype`, or `elems`), each [n, ...output shape].

    Raises:
        TypeError: `fn` is not callable.
        ValueError: `elems` is empty or holds a scalar; elements disagree on their first
            dimension; fn's output does not match the expected structure.
        InvalidArgumentError: fn's output does not have the expected dtype.
    """
    _check_callable(fn)
    if parallel_iterations is None:
        parallel_iterations = 10
    out_like = elems if dtype is None else dtype
    with _ops.name_scope(name, "map", nest.flatten(elems)):
        elems_flat = _flat_elems(elems)
        n_static = _static_length(elems_flat)
        n = _length(elems_flat, n_static)
        elems_tas = _unstacked(elems_flat, n)
        out_dtypes = ([e.dtype for e in elems_flat] if dtype is None else nest.flatten(dtype))
        accs = [TensorArray(dt, size=n, dynamic_size=False, infer_shape=infer_shape)
                for dt in out_dtypes]

        def body(i, accs):
            item = nest.pack_sequence_as(elems, [ta.read(i) for ta in elems_tas])
            result = fn(item)
            _same_structure(out_like, result, "dtype" if dtype is not None else "elems")
            return i + 1, [ta.write(i, v) for ta, v in zip(accs, nest.flatten(result))]

        _, accs = control_flow_v1.while_loop(
            lambda i, _: i < n, body, (0, accs), parallel_iterations=parallel_iterations,
            back_prop=back_prop, swap_memory=swap_memory)
        return nest.pack_sequence_as(out_like, _stacked(accs, n_static))


# ---------------------------------------------------------------------------- folds
def _fold(fn, elems, initializer, reverse, parallel_iterations, back_prop, swap_memory, name,
          default_name):
    _check_callable(fn)
    with _ops.name_scope(name, default_name, nest.flatten(elems)):
        elems_flat = _flat_elems(elems)
        n = _length(elems_flat, _static_length(elems_flat))
        elems_tas = _unstacked(elems_flat, n)

        def slice_at(i):
            return nest.pack_sequence_as(elems, [ta.read(i) for ta in elems_tas])

        if reverse:
            # i counts the elements still to fold; the next one is i - 1.
            i0 = n - 1 if initializer is None else n
            acc = slice_at(i0) if initializer is None else initializer
            keep_going = (lambda i, _: i > 0)

            def body(i, a):
                return i - 1, fn(a, slice_at(i - 1))
        else:
            i0 = 1 if initializer is None else 0
            acc = slice_at(0) if initializer is None else initializer
            keep_going = (lambda i, _: i < n)

            def body(i, a):
                return i + 1, fn(a, slice_at(i))
        _, result = control_flow_v1.while_loop(
            keep_going, body, (i0, acc), parallel_iterations=parallel_iterations,
            back_prop=back_prop, swap_memory=swap_memory)
        return result


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False,
          name=None):
    """Folds `fn` over the slices of `elems` from first to last: fn(...fn(fn(init, e0), e1)..).

    Args:
        fn: callable (accumulator, slice) -> new accumulator, keeping the accumulator's
            structure, dtypes and shapes.
        elems: a tensor or a (nested) structure of tensors sharing their first dimension n.
        initializer: the first accumulator (a structure of tensors); default: the first slice
            of `elems` (fn then runs n - 1 times).
        parallel_iterations: how many iterations may run at once.
        back_prop: whether gradients may flow through the loop.
        swap_memory: accepted for TF compatibility.
        name: name scope of the ops (default "foldl").

    Returns:
        The last accumulator.

    Raises:
        TypeError: `fn` is not callable, or it changes an accumulator's dtype.
        ValueError: `elems` is empty or holds a scalar; fn changes the accumulator's structure
            or shape.
    """
    return _fold(fn, elems, initializer, False, parallel_iterations, back_prop, swap_memory, name,
                 "foldl")


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False,
          name=None):
    """Folds `fn` over the slices of `elems` from last to first: fn(...fn(fn(init, e_n-1), ..)).

    Arguments, result and errors as `foldl`; without `initializer` the last slice is the first
    accumulator.
    """
    return _fold(fn, elems, initializer, True, parallel_iterations, back_prop, swap_memory, name,
                 "foldr")


# ---------------------------------------------------------------------------- scan
def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True, swap_memory=False,
         infer_shape=True, reverse=False, name=None):
    """Like `foldl` (or `foldr` with `reverse`), but returns every accumulator, stacked.

    Args:
        fn: callable (accumulator, slice) -> new accumulator, structured like `initializer`
            (like `elems` without an initializer).
        elems: a tensor or a (nested) structure of tensors sharing their first dimension n.
        initializer: the accumulator before the first step; default: the first slice of
            `elems` (the last with `reverse`), which is also the first output.
        parallel_iterations: how many iterations may run at once.
        back_prop: whether gradients may flow through the loop.
        swap_memory: accepted for TF compatibility.
        infer_shape: whether all accumulators must have the same shape.
        reverse: scan from the last slice to the first; output i is still the accumulator
            after slice i.
        name: name scope of the ops (default "scan").

    Returns:
        A tensor or structure (like the accumulator) of tensors [n, ...accumulator shape].

    Raises:
        TypeError: `fn` is not callable, or it changes an accumulator's dtype.
        ValueError: `elems` is empty or holds a scalar; fn's output does not match the
            accumulator's structure or shape.
    """
    _check_callable(fn)
    acc_like = elems if initializer is None else initializer
    with _ops.name_scope(name, "scan", nest.flatten(elems)):
        elems_flat = _flat_elems(elems)
        n_static = _static_length(elems_flat)
        n = _length(elems_flat, n_static)
        elems_tas = _unstacked(elems_flat, n)
        first = n - 1 if reverse else 0
        if initializer is None:
            acc_flat = [ta.read(first) for ta in elems_tas]
        else:
            acc_flat = [_ops.convert_to_tensor(a) for a in nest.flatten(initializer)]
        accs = [TensorArray(a.dtype, size=n, dynamic_size=False, infer_shape=infer_shape,
                            element_shape=a.shape if infer_shape else None) for a in acc_flat]
        if initializer is None:
            accs = [ta.write(first, a) for ta, a in zip(accs, acc_flat)]
            i0 = first - 1 if reverse else 1
        else:
            i0 = first
        step = -1 if reverse else 1

        def body(i, acc_flat, accs):
            item = nest.pack_sequence_as(elems, [ta.read(i) for ta in elems_tas])
            out = fn(nest.pack_sequence_as(acc_like, acc_flat), item)
            _same_structure(acc_like, out, "elems" if initializer is None else "initializer")
            out_flat = nest.flatten(out)
            return i + step, out_flat, [ta.write(i, v) for ta, v in zip(accs, out_flat)]

        if reverse:
            def keep_going(i, *_):
                return i >= 0
        else:
            def keep_going(i, *_):
                return i < n
        _, _, accs = control_flow_v1.while_loop(
            keep_going, body, (i0, acc_flat, accs), parallel_iterations=parallel_iterations,
            back_prop=back_prop, swap_memory=swap_memory)
        return nest.pack_sequence_as(acc_like, _stacked(accs, n_static))

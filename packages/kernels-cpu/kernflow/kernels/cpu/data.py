"""tf.data kernels: dataset objects, iterators and the background work of map and prefetch.

A dataset op's kernel returns a `Dataset` object (the value of its `variant` output): a recipe
whose `elements()` is a Python generator of elements, each a list of numpy arrays (the flat
dense components). Nothing is read until an iterator pulls. `IteratorResource` (the value of an
iterator handle) holds one generator under a lock; `get_next` raises OutOfRange at the end.

Background work: `prefetch` runs its input on a thread filling a bounded buffer, and a parallel
`map` keeps `num_parallel_calls` function calls in flight on a thread pool, yielding results in
input order. Both stop when their generator is closed (re-initializing an iterator, or the
iterator being dropped), and an error raised upstream travels to the consumer in order.
"""

from __future__ import annotations

import collections
import concurrent.futures
import itertools
import os
import queue
import threading
import weakref

import numpy as np

from kernflow.core.data.function import FunctionRunner
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_shape as _ts
from kernflow.kernels.cpu import data_blocks

__all__ = ["Dataset", "IteratorResource", "register", "register_generator", "unregister_generator"]

DEVICE = "CPU"
_EOF = object()


def _err(node: str, msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, f"{node}: {msg}")


class Dataset:
    """A dataset value: `elements()` yields lists of numpy arrays (one per flat component)."""

    def __init__(self, node: str, types, shapes):
        self.node = node
        self.types = types
        self.shapes = shapes

    def elements(self):
        raise NotImplementedError


class _Gen(Dataset):
    """A dataset whose elements come from `make()`, a fresh generator per pass. `blocks`, when not
    None, is ``blocks(n)``: the same elements as stacked blocks (`kernflow.kernels.cpu.data_blocks`)."""

    def __init__(self, node, types, shapes, make, blocks=None):
        super().__init__(node, types, shapes)
        self._make = make
        self.blocks = blocks
        self.slices = None        # (components, count) of a TensorSlice dataset

    def elements(self):
        return self._make()


def _np_types(types):
    return [t.as_numpy_dtype for t in types]


def _cast(values, types):
    return [np.asarray(v, dtype=object if t.as_numpy_dtype is np.object_ else t.as_numpy_dtype)
            for v, t in zip(values, types)]


def _scalar(x) -> int:
    return int(np.asarray(x))


def _str(x) -> str:
    v = np.asarray(x, dtype=object).item()
    return v.decode() if isinstance(v, bytes) else str(v)


# ---------------------------------------------------------------------------- sources
def _tensor_dataset(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")

    def compute(*components):
        comps = [np.asarray(c) for c in components]
        return _Gen(node, types, shapes, lambda: iter([comps]))
    return compute


def _tensor_slice_dataset(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")

    def compute(*components):
        comps = [np.asarray(c) for c in components]
        for i, c in enumerate(comps):
            if c.ndim == 0:
                raise _err(node, f"component {i} is a scalar; from_tensor_slices needs a dimension to slice")
        n = comps[0].shape[0]
        for i, c in enumerate(comps[1:], 1):
            if c.shape[0] != n:
                raise _err(node, f"all components must have the same size in dimension 0, but component 0 "
                                 f"has {n} and component {i} has {c.shape[0]}")

        def gen():
            for j in range(n):
                yield [c[j] for c in comps]
        ds = _Gen(node, types, shapes, gen, data_blocks.slice_blocks(comps, n))
        ds.slices = (comps, n)
        return ds
    return compute


def _range_dataset(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")

    def compute(start, stop, step):
        start, stop, step = _scalar(start), _scalar(stop), _scalar(step)
        if step == 0:
            raise _err(node, "step must be a non-zero integer")
        return _Gen(node, types, shapes, lambda: ([np.int64(i)] for i in range(start, stop, step)),
                    data_blocks.range_blocks(start, stop, step))
    return compute


_generators: dict = {}
_generator_ids = itertools.count(1)


def register_generator(fn) -> int:
    """Registers `fn` (called with no arguments, returns an iterable) for GeneratorDataset ops."""
    gid = next(_generator_ids)
    _generators[gid] = fn
    return gid


def unregister_generator(gid: int) -> None:
    _generators.pop(gid, None)


def _generator_dataset(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")
    gid = ctx.get_attr("generator_id")

    def compute():
        fn = _generators.get(gid)
        if fn is None:
            raise errors.FailedPreconditionError(
                None, None, f"{node}: the generator of Dataset.from_generator lives in the Python process "
                "that built the graph; place the iterator on a device of that process")

        def gen():
            for value in fn():
                flat = value if isinstance(value, (tuple, list)) and len(types) > 1 else [value]
                if len(flat) != len(types):
                    raise _err(node, f"the generator yielded {len(flat)} components, expected {len(types)}")
                out = _cast(flat, types)
                for i, (v, s) in enumerate(zip(out, shapes)):
                    if not _ts.as_shape(s).is_compatible_with(_ts.TensorShape(v.shape)):
                        raise _err(node, f"`generator` yielded an element of shape {list(v.shape)} where an "
                                         f"element of shape {_ts.as_shape(s)} was expected (component {i})")
                yield out
        return _Gen(node, types, shapes, gen)
    return compute


# ---------------------------------------------------------------------------- transformations
def _transform(make_gen, n_params: int = 0):
    """A kernel factory for ``input_dataset, *params``: ``make_gen(node, ds, *params)`` -> generator fn."""
    def factory(ctx):
        node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")

        def compute(ds, *params):
            return _Gen(node, types, shapes, make_gen(node, ds, *params))
        return compute
    return factory


def _zip(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")

    def compute(*datasets):
        def gen():
            its = [d.elements() for d in datasets]
            try:
                for parts in zip(*its):
                    yield [c for p in parts for c in p]
            finally:
                for it in its:
                    _close(it)
        return _Gen(node, types, shapes, gen)
    return compute


def _concatenate(node, a, b):
    def gen():
        yield from a.elements()
        yield from b.elements()
    return gen


def _close(it):
    close = getattr(it, "close", None)
    if close is not None:
        close()


def _function_kernel(prefix: str, build):
    """A kernel factory for ops with a function attr: ``build(node, runner, ds, captured, params)``."""
    def factory(ctx):
        node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")
        runner = FunctionRunner.from_attrs(ctx, prefix)
        n_captured = len(ctx.get_attr("Targuments"))

        batched = FunctionRunner.from_attrs(ctx, "f_batched") if prefix == "f" and \
            ctx.op_type == "MapDataset" and ctx.get_attr("f_batched") else None

        def compute(ds, *rest):
            captured, params = list(rest[:n_captured]), rest[n_captured:]
            out = _Gen(node, types, shapes, build(node, runner, ds, captured, *params))
            if batched is not None and getattr(ds, "blocks", None) is not None:
                out.blocks = _map_blocks(node, batched, ds, captured)
            return out
        return compute
    return factory


def _map_blocks(node, runner, ds, captured):
    def blocks(n):
        for blk in ds.blocks(n):
            yield _call(runner, node, blk, captured)
    return blocks


def _call(runner, node, element, captured):
    try:
        return runner(list(element) + captured)
    except errors.OpError:
        raise
    except Exception as e:  # noqa: BLE001 - a function that fails is the pipeline's error
        raise errors.InvalidArgumentError(None, None, f"{node}: the dataset function failed: "
                                          f"{type(e).__name__}: {e}") from e


def _map(node, runner, ds, captured, num_parallel):
    n = _scalar(num_parallel)

    def sequential():
        for el in ds.elements():
            yield _call(runner, node, el, captured)

    def parallel():
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=n, thread_name_prefix=f"kf-map-{node}")
        pending = collections.deque()
        src = ds.elements()
        try:
            for el in src:
                pending.append(pool.submit(_call, runner, node, el, captured))
                if len(pending) >= n:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()
            pool.shutdown(wait=False)
            _close(src)
    return parallel if n > 1 else sequential


def _filter(node, runner, ds, captured):
    def gen():
        for el in ds.elements():
            out = _call(runner, node, el, captured)
            keep = np.asarray(out[0])
            if keep.shape != () or keep.dtype != np.bool_:
                raise _err(node, f"the filter predicate must return a scalar bool, got {keep.dtype} of shape "
                                 f"{list(keep.shape)}")
            if keep:
                yield el
    return gen


def _dataset_of(node, value) -> Dataset:
    if not isinstance(value, Dataset):
        raise _err(node, f"the function must return a Dataset, got {type(value).__name__}")
    return value


def _flat_map(node, runner, ds, captured):
    def gen():
        for el in ds.elements():
            yield from _dataset_of(node, _call(runner, node, el, captured)[0]).elements()
    return gen


def _interleave(node, runner, ds, captured, cycle_length, block_length, num_parallel):
    cycle, block = _scalar(cycle_length), _scalar(block_length)
    if block <= 0:
        raise _err(node, f"block_length must be greater than zero, got {block}")
    if cycle == -1 or cycle == 0:
        cycle = os.cpu_count() or 1
    if cycle < 0:
        raise _err(node, f"cycle_length must be greater than zero, got {cycle}")

    def gen():
        src = ds.elements()
        active: list = []
        exhausted = False
        i = 0
        while True:
            while not exhausted and len(active) < cycle:
                el = next(src, _EOF)
                if el is _EOF:
                    exhausted = True
                    break
                active.append(_dataset_of(node, _call(runner, node, el, captured)[0]).elements())
            if not active:
                return
            i %= len(active)
            it = active[i]
            for _ in range(block):
                el = next(it, _EOF)
                if el is _EOF:
                    active.pop(i)
                    break
                yield el
            else:
                i += 1
    return gen


def _batch(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")
    sparse = set(ctx.get_attr("sparse_starts"))

    def compute(ds, batch_size, drop_remainder):
        n, drop = _scalar(batch_size), bool(np.asarray(drop_remainder))
        if n <= 0:
            raise _err(node, f"batch_size must be greater than zero, got {n}")

        def gen():
            if not sparse and getattr(ds, "blocks", None) is not None:
                yield from data_blocks.rechunk(ds.blocks(n), n, drop)
                return
            buf = []
            for el in ds.elements():
                buf.append(el)
                if len(buf) == n:
                    yield _stack(node, buf, sparse)
                    buf = []
            if buf and not drop:
                yield _stack(node, buf, sparse)
        return _Gen(node, types, shapes, gen)
    return compute


def _stack(node, rows, sparse=()):
    out = []
    i, k = 0, len(rows[0])
    while i < k:
        if i in sparse:
            out.extend(_stack_sparse(node, [r[i:i + 3] for r in rows], i))
            i += 3
            continue
        parts = [np.asarray(r[i]) for r in rows]
        first = parts[0].shape
        for j, p in enumerate(parts[1:], 1):
            if p.shape != first:
                raise _err(node, f"Cannot batch tensors with different shapes in component {i}. First "
                                 f"element had shape {list(first)} and element {j} had shape "
                                 f"{list(p.shape)}.")
        out.append(np.stack(parts))
        i += 1
    return out


def _stack_sparse(node, triples, i):
    """Batches SparseTensor values (indices, values, dense_shape) into one of rank + 1."""
    ranks = {np.asarray(t[2]).shape[0] for t in triples}
    if len(ranks) != 1:
        raise _err(node, f"Cannot batch SparseTensors of different ranks in component {i}: {sorted(ranks)}")
    rank = ranks.pop()
    dense = np.max(np.stack([np.asarray(t[2], np.int64) for t in triples]), axis=0)
    idx = [np.concatenate([np.full((len(t[1]), 1), b, np.int64),
                           np.asarray(t[0], np.int64).reshape(-1, rank)], axis=1)
           for b, t in enumerate(triples)]
    values = np.concatenate([np.asarray(t[1]) for t in triples])
    return [np.concatenate(idx).reshape(-1, rank + 1), values,
            np.concatenate([[len(triples)], dense]).astype(np.int64)]


def _padded_batch(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")
    n_comp = len(ctx.get_attr("Toutput_types"))

    def compute(ds, batch_size, *rest):
        padded = [np.asarray(p, dtype=np.int64) for p in rest[:n_comp]]
        values = rest[n_comp:2 * n_comp]
        drop = bool(np.asarray(rest[2 * n_comp]))
        n = _scalar(batch_size)
        if n <= 0:
            raise _err(node, f"batch_size must be greater than zero, got {n}")

        def pad(buf):
            out = []
            for i in range(n_comp):
                parts = [np.asarray(r[i]) for r in buf]
                target = []
                for d, want in enumerate(padded[i]):
                    biggest = max(p.shape[d] for p in parts)
                    if want >= 0 and biggest > want:
                        raise _err(node, f"component {i} has size {biggest} in dimension {d}, more than its "
                                         f"padded size {want}")
                    target.append(int(want) if want >= 0 else biggest)
                res = np.full([len(parts)] + target, np.asarray(values[i]), dtype=parts[0].dtype)
                for j, p in enumerate(parts):
                    res[(j,) + tuple(slice(0, s) for s in p.shape)] = p
                out.append(res)
            return out

        def gen():
            buf = []
            for el in ds.elements():
                for i in range(n_comp):
                    if np.ndim(el[i]) != len(padded[i]):
                        raise _err(node, f"component {i} has rank {np.ndim(el[i])} but its padded shape has "
                                         f"rank {len(padded[i])}")
                buf.append(el)
                if len(buf) == n:
                    yield pad(buf)
                    buf = []
            if buf and not drop:
                yield pad(buf)
        return _Gen(node, types, shapes, gen)
    return compute


def _unbatch(node, ds):
    def gen():
        for el in ds.elements():
            arrs = [np.asarray(c) for c in el]
            if any(a.ndim == 0 for a in arrs):
                raise _err(node, "unbatch needs every component to have at least one dimension")
            n = arrs[0].shape[0]
            if any(a.shape[0] != n for a in arrs):
                raise _err(node, "unbatch needs every component to have the same size in dimension 0")
            for j in range(n):
                yield [a[j] for a in arrs]
    return gen


def _shuffle(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")
    reshuffle = ctx.get_attr("reshuffle_each_iteration")

    def compute(ds, buffer_size, seed, seed2):
        size, s1, s2 = _scalar(buffer_size), _scalar(seed), _scalar(seed2)
        if size <= 0:
            raise _err(node, f"buffer_size must be greater than zero, got {size}")
        # Seeds (0, 0): random. Each pass draws its seed from `seeds` when reshuffling.
        seeds = np.random.RandomState(None if (s1 == 0 and s2 == 0) else [s1 & 0xFFFFFFFF, s2 & 0xFFFFFFFF])
        first = int(seeds.randint(2 ** 31))

        def make_rng():
            return np.random.RandomState(int(seeds.randint(2 ** 31)) if reshuffle else first)

        def gen():
            # Each output is drawn uniformly from the buffer: j = int(u * len(buffer)), the uniforms
            # u drawn 256 at a time (data_blocks.shuffled_indices makes the same picks on indices).
            draws = data_blocks.uniforms(make_rng())
            buf = []
            for el in ds.elements():
                if len(buf) < size:
                    buf.append(el)
                    continue
                j = int(next(draws) * size)
                yield buf[j]
                buf[j] = el
            while buf:
                j = int(next(draws) * len(buf))
                buf[j], buf[-1] = buf[-1], buf[j]
                yield buf.pop()
        blocks = None
        if getattr(ds, "slices", None) is not None:
            comps, count = ds.slices
            blocks = data_blocks.shuffled_slice_blocks(comps, count, size, make_rng)
        return _Gen(node, types, shapes, gen, blocks)
    return compute


def _repeat_kernel(ctx):
    node, types, shapes = ctx.name, ctx.get_attr("output_types"), ctx.get_attr("output_shapes")

    def compute(ds, count):
        n = _scalar(count)
        blocks = data_blocks.repeat_blocks(ds, n) if getattr(ds, "blocks", None) is not None else None
        return _Gen(node, types, shapes, _repeat(node, ds, count), blocks)
    return compute


def _repeat(node, ds, count):
    n = _scalar(count)

    def gen():
        i = 0
        while n < 0 or i < n:
            produced = False
            for el in ds.elements():
                produced = True
                yield el
            if not produced:
                return
            i += 1
    return gen


def _take(node, ds, count):
    n = _scalar(count)
    return lambda: ds.elements() if n < 0 else itertools.islice(ds.elements(), n)


def _skip(node, ds, count):
    n = _scalar(count)

    def gen():
        it = ds.elements()
        if n < 0:
            for _ in it:
                pass
            return
        yield from itertools.islice(it, n, None)
    return gen


def _shard(node, ds, num_shards, index):
    n, i = _scalar(num_shards), _scalar(index)
    if n <= 0:
        raise _err(node, f"Number of shards must be greater than zero (currently num_shards = {n})")
    if not 0 <= i < n:
        raise _err(node, f"Index must be between 0 and {n - 1} (currently index = {i})")
    return lambda: itertools.islice(ds.elements(), i, None, n)


def _prefetch(node, ds, buffer_size):
    n = _scalar(buffer_size)
    if n == -1:   # AUTOTUNE
        n = 8
    if n < 0:
        raise _err(node, f"buffer_size must be >= 0 or AUTOTUNE (-1), got {n}")
    if n == 0:
        return ds.elements

    def gen():
        buf: queue.Queue = queue.Queue(maxsize=n)
        stop = threading.Event()

        def produce():
            src = ds.elements()
            try:
                for el in src:
                    while not stop.is_set():
                        try:
                            buf.put(("el", el), timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if stop.is_set():
                        return
                item = ("end", None)
            except BaseException as e:  # noqa: BLE001 - delivered to the consumer in order
                item = ("err", e)
            finally:
                _close(src)
            while not stop.is_set():
                try:
                    buf.put(item, timeout=0.1)
                    return
                except queue.Full:
                    continue

        t = threading.Thread(target=produce, name=f"kf-prefetch-{node}", daemon=True)
        t.start()
        try:
            while True:
                kind, value = buf.get()
                if kind == "el":
                    yield value
                elif kind == "end":
                    return
                else:
                    raise value
        finally:
            stop.set()
    return gen


def _cache(node, ds, filename):
    from kernflow.kernels.cpu import data_files
    path = data_files.cache_path(node, filename)   # confined to the file root
    state = {"done": None}   # the complete list of elements, once a pass finished

    def gen():
        if state["done"] is not None:
            yield from state["done"]
            return
        if path and os.path.exists(path + ".index"):
            yield from data_files.read_cache(path, ds.types)
            return
        seen = []
        for el in ds.elements():
            seen.append(el)
            yield el
        if path:
            data_files.write_cache(path, seen)
        else:
            state["done"] = seen
    return gen


# ---------------------------------------------------------------------------- iterators
_handles: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_handle_ids = itertools.count(1)


class IteratorResource:
    """The state of an iterator: the generator of the dataset it was last bound to."""

    def __init__(self, name: str, types, shapes):
        self.name = name
        self.types = list(types)
        self.shapes = [_ts.as_shape(s) for s in shapes]
        self._lock = threading.Lock()
        self._it = None
        self._initialized = False
        self.string_handle = f"kernflow-iterator:{os.getpid()}:{next(_handle_ids)}:{name}"
        _handles[self.string_handle] = self

    def bind(self, dataset: Dataset, node: str) -> None:
        if [t.base_dtype for t in dataset.types] != [t.base_dtype for t in self.types]:
            raise _err(node, f"the dataset's component types {[t.name for t in dataset.types]} do not "
                             f"match the iterator's {[t.name for t in self.types]}")
        with self._lock:
            old, self._it = self._it, dataset.elements()
            self._initialized = True
        if old is not None:
            _close(old)

    def bind_once(self, make, node: str) -> None:
        with self._lock:
            if self._initialized:
                return
        ds = make()
        with self._lock:
            if not self._initialized:
                self._it = ds.elements()
                self._initialized = True

    def get_next(self, node: str) -> list:
        with self._lock:
            if not self._initialized:
                raise errors.FailedPreconditionError(
                    None, None, f"{node}: GetNext() failed because the iterator has not been initialized. "
                    "Ensure that you have run the initializer operation for this iterator before getting "
                    "the next element.")
            el = next(self._it, _EOF)
        if el is _EOF:
            raise errors.OutOfRangeError(None, None, "End of sequence")
        if len(el) != len(self.types):
            raise _err(node, f"the element has {len(el)} components, the iterator expects {len(self.types)}")
        out = _cast(el, self.types)
        for i, (v, s) in enumerate(zip(out, self.shapes)):
            if not s.is_compatible_with(_ts.TensorShape(v.shape)):
                raise _err(node, f"component {i} of the element has shape {list(v.shape)}, incompatible "
                                 f"with the iterator's {s}")
        return out

    def __del__(self):
        it = getattr(self, "_it", None)
        if it is not None:
            try:
                _close(it)
            except Exception:  # noqa: BLE001 - nothing to report to at collection time
                pass


def _iterator_op(ctx):
    types, shapes = ctx.get_attr("output_types"), ctx.get_attr("output_shapes")
    name = ctx.get_attr("shared_name") or f"_iterator_{id(ctx)}_{ctx.name}"
    make = lambda: IteratorResource(name, types, shapes)  # noqa: E731
    return ctx.resource_mgr.cached_getter(ctx.get_attr("container"), name, make)


def _one_shot_iterator(ctx):
    node = ctx.name
    get = _iterator_op(ctx)
    runner = FunctionRunner.from_attrs(ctx, "dataset_factory")

    def compute():
        it = get()
        it.bind_once(lambda: _dataset_of(node, runner([])[0]), node)
        return it
    return compute


def _iterator_of(node, handle) -> IteratorResource:
    if not isinstance(handle, IteratorResource):
        raise _err(node, f"input 0 is not an iterator handle (got {type(handle).__name__})")
    return handle


def _make_iterator(ctx):
    node = ctx.name

    def compute(dataset, handle):
        _iterator_of(node, handle).bind(_dataset_of(node, dataset), node)
    return compute


def _get_next(ctx):
    node = ctx.name

    def compute(handle):
        out = _iterator_of(node, handle).get_next(node)
        return out[0] if len(out) == 1 else out
    return compute


def _to_string_handle(ctx):
    node = ctx.name
    return lambda handle: np.asarray(_iterator_of(node, handle).string_handle.encode(), dtype=object)


def _from_string_handle(ctx):
    node = ctx.name
    types = ctx.get_attr("output_types")

    def compute(s):
        key = _str(s)
        it = _handles.get(key)
        if it is None:
            raise _err(node, f"no iterator with string handle {key!r} in this process")
        if types and [t.base_dtype for t in types] != [t.base_dtype for t in it.types]:
            raise _err(node, f"the iterator's component types {[t.name for t in it.types]} do not match the "
                             f"expected {[t.name for t in types]}")
        return it
    return compute


def register(registry) -> None:
    """Registers the tf.data kernels."""
    from kernflow.kernels.cpu import data_files
    for op, factory in [
            ("TensorDataset", _tensor_dataset), ("TensorSliceDataset", _tensor_slice_dataset),
            ("RangeDataset", _range_dataset), ("GeneratorDataset", _generator_dataset),
            ("TextLineDataset", data_files.text_line_dataset),
            ("TFRecordDataset", data_files.tfrecord_dataset),
            ("FixedLengthRecordDataset", data_files.fixed_length_dataset), ("ZipDataset", _zip),
            ("ConcatenateDataset", _transform(_concatenate)),
            ("MapDataset", _function_kernel("f", _map)),
            ("FilterDataset", _function_kernel("predicate", _filter)),
            ("FlatMapDataset", _function_kernel("f", _flat_map)),
            ("InterleaveDataset", _function_kernel("f", _interleave)),
            ("BatchDatasetV2", _batch), ("PaddedBatchDatasetV2", _padded_batch),
            ("UnbatchDataset", _transform(_unbatch)), ("ShuffleDataset", _shuffle),
            ("RepeatDataset", _repeat_kernel), ("TakeDataset", _transform(_take)),
            ("SkipDataset", _transform(_skip)), ("ShardDataset", _transform(_shard)),
            ("PrefetchDataset", _transform(_prefetch)), ("CacheDataset", _transform(_cache)),
            ("IteratorV2", _iterator_op), ("OneShotIterator", _one_shot_iterator),
            ("MakeIterator", _make_iterator), ("IteratorGetNext", _get_next),
            ("IteratorToStringHandle", _to_string_handle),
            ("IteratorFromStringHandleV2", _from_string_handle)]:
        registry.register(op, DEVICE, factory)

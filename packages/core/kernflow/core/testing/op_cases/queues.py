"""Contract cases of the queue ops: each builds a queue, fills it and reads it back in one step.

Ops of one case are ordered by control dependencies (enqueue, then close, then dequeue), so a
step never blocks. Blocking, closing and cancellation are tested in packages/core/tests/queues.
The queues' static shapes come from the case's input arrays (`_case` hands them to the builder),
so the same graph also builds from placeholders of unknown shape.
"""

import numpy as np

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import OpCase


def _after(deps, fn):
    with kf.control_dependencies(deps if isinstance(deps, list) else [deps]):
        return fn()


def _listed(out):
    return out if isinstance(out, list) else [out]


def _fifo_one(arrays):
    def build(*xs):
        q = kf.FIFOQueue(4, [x.dtype for x in xs], shapes=[a.shape for a in arrays])
        return _listed(_after(q.enqueue(list(xs)), q.dequeue))
    return build


def _fifo_many(n):
    def make(arrays):
        def build(*xs):
            q = kf.FIFOQueue(10, [x.dtype for x in xs], shapes=[a.shape[1:] for a in arrays])
            return _listed(_after(q.enqueue_many(list(xs)), lambda: q.dequeue_many(n)))
        return build
    return make


def _up_to(arrays):
    def build(x):
        q = kf.FIFOQueue(10, x.dtype, shapes=[arrays[0].shape[1:]])
        close = _after(q.enqueue_many([x]), q.close)
        return _after(close, lambda: q.dequeue_up_to(5))
    return build


def _closed_flag(arrays):
    def build(x):
        q = kf.FIFOQueue(10, x.dtype, shapes=[arrays[0].shape[1:]])
        close = _after(q.enqueue_many([x]), q.close)
        flag, size = _after(close, lambda: [q.is_closed(), q.size()])
        return [flag, size, _after([size], lambda: q.dequeue_up_to(10))]
    return build


def _size(arrays):
    def build(x):
        q = kf.FIFOQueue(10, x.dtype)
        return _after(q.enqueue_many([x]), q.size)
    return build


def _padding(arrays):
    def build(a, b):
        q = kf.PaddingFIFOQueue(4, [a.dtype], shapes=[[None]])
        second = _after(q.enqueue([a]), lambda: q.enqueue([b]))
        return _after(second, lambda: q.dequeue_many(2))
    return build


def _pad_ref(a, b):
    n = max(len(a), len(b))
    return np.stack([np.pad(a, (0, n - len(a))), np.pad(b, (0, n - len(b)))])


def _shuffle(arrays):
    def build(x):
        q = kf.RandomShuffleQueue(10, 0, x.dtype, shapes=[arrays[0].shape[1:]], seed=3)
        return _after(q.enqueue_many([x]), lambda: q.dequeue_many(len(arrays[0])))
    return build


def _same_rows(actual, expected):
    np.testing.assert_array_equal(np.sort(actual, axis=0), np.sort(expected, axis=0))


def _priority(arrays):
    def build(p, v):
        q = kf.PriorityQueue(10, [v.dtype], shapes=[arrays[1].shape[1:]])
        return _after(q.enqueue_many([p, v]), lambda: q.dequeue_many(len(arrays[0])))
    return build


def _priority_ref(p, v):
    order = np.argsort(p, kind="stable")
    return [p[order], v[order]]


def _case(op_type, make, inputs, reference, **kw):
    return OpCase(op_type, make([np.asarray(a) for a in inputs]), inputs, reference, **kw)


_r = np.random.RandomState(3)
_x = _r.randn(2, 3).astype(np.float32)
_i = np.array([4, 5], np.int32)
_rows = _r.randn(4, 2).astype(np.float32)
_col = np.arange(5, dtype=np.int64)
_pa = np.array([1, 2, 3], np.int32)
_pb = np.array([7], np.int32)
_prio = np.array([5, 1, 3], np.int64)
_vals = np.array([[1.0], [2.0], [3.0]], np.float64)
_strs = np.array([b"a", b"bc"], dtype=object)

CASES = [
    _case("FIFOQueueV2", _fifo_one, [_x, _i], lambda x, i: [x, i]),
    _case("QueueEnqueueV2", _fifo_one, [_strs], lambda s: [s], name="string"),
    _case("QueueDequeueV2", _fifo_one, [np.float64(2.5)], lambda s: [s], name="scalar"),
    _case("QueueEnqueueManyV2", _fifo_many(4), [_rows, _rows[:, 0].astype(np.int32)],
          lambda r, c: [r, c]),
    _case("QueueDequeueManyV2", _fifo_many(3), [_col], lambda c: [c[:3]]),
    _case("QueueDequeueUpToV2", _up_to, [_rows], lambda r: r),
    _case("QueueCloseV2", _closed_flag, [_col], lambda c: [np.bool_(True), np.int32(5), c]),
    _case("QueueIsClosedV2", _closed_flag, [_rows], lambda r: [np.bool_(True), np.int32(4), r]),
    _case("QueueSizeV2", _size, [_rows], lambda r: np.int32(4)),
    _case("PaddingFIFOQueueV2", _padding, [_pa, _pb], _pad_ref),
    _case("RandomShuffleQueueV2", _shuffle, [_rows], lambda r: r, compare=_same_rows),
    _case("PriorityQueueV2", _priority, [_prio, _vals], _priority_ref),
]

"""Contract cases of the conditional accumulator ops: apply gradients, then take, in one step.

Ops of one case are ordered by control dependencies (each apply after the previous, the take
last), so a step never blocks. Blocking, staleness, sharing and cancellation are tested in
packages/core/tests/ops/test_accumulator_ops.py. The accumulators declare no shape, so the same
graph also builds from placeholders of unknown shape.
"""

import numpy as np

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import OpCase


def _in_order(ops):
    """Runs the ops of `ops` (functions returning an op) one after the other; returns the last."""
    last = None
    for fn in ops:
        with kf.control_dependencies([last] if last is not None else []):
            last = fn()
    return last


def _dense(reduction, with_count=False):
    def build(*grads):
        acc = kf.ConditionalAccumulator(grads[0].dtype, reduction_type=reduction)
        applied = _in_order([lambda g=g: acc.apply_grad(g) for g in grads])
        with kf.control_dependencies([applied]):
            count = acc.num_accumulated()
        with kf.control_dependencies([count]):
            taken = acc.take_grad(len(grads))
        return [count, taken] if with_count else taken
    return build


def _dense_stale(a, b, with_dropped=False):
    acc = kf.ConditionalAccumulator(a.dtype)
    ops = _in_order([lambda: acc.set_global_step(2), lambda: acc.apply_grad(a, local_step=1),
                     lambda: acc.apply_grad(b, local_step=2)])
    with kf.control_dependencies([ops]):
        taken = acc.take_grad(1)
    if not with_dropped:
        return taken
    with kf.control_dependencies([taken]):
        return [acc.num_dropped(), taken]


def _sparse(reduction):
    def build(i1, v1, i2, v2):
        acc = kf.SparseConditionalAccumulator(v1.dtype, reduction_type=reduction)
        applied = _in_order([lambda: acc.apply_grad(i1, v1, local_step=0),
                             lambda: acc.apply_grad(i2, v2, local_step=0)])
        with kf.control_dependencies([applied]):
            return list(acc.take_grad(2))
    return build


def _sparse_ref(mean):
    def ref(i1, v1, i2, v2):
        rows = {}
        for idx, vals in ((i1, v1), (i2, v2)):
            mine = {}
            for i, v in zip(idx.tolist(), vals):
                mine[i] = mine.get(i, 0) + v
            for i, v in mine.items():
                total, n = rows.get(i, (0, 0))
                rows[i] = (total + v, n + 1)
        keys = sorted(rows)
        vals = np.stack([rows[k][0] / (rows[k][1] if mean else 1) for k in keys]).astype(v1.dtype)
        return [np.array(keys, np.int64), vals, np.array([-1] + list(v1.shape[1:]), np.int64)]
    return ref


_r = np.random.RandomState(5)
_g = [_r.randn(2, 3).astype(np.float32) for _ in range(3)]
_i1, _i2 = np.array([4, 1, 4], np.int64), np.array([1, 0], np.int64)
_v1, _v2 = _r.randn(3, 2), _r.randn(2, 2)

CASES = [
    OpCase("ConditionalAccumulator", _dense("MEAN"), _g, lambda *g: sum(g) / 3, name="mean"),
    OpCase("AccumulatorTakeGradient", _dense("SUM"), _g[:2], lambda a, b: a + b, name="sum"),
    OpCase("AccumulatorTakeGradient", _dense("MEAN"), [np.array([7, 2], np.int32)] * 2,
           lambda a, b: a, name="int32"),
    OpCase("AccumulatorNumAccumulated", _dense("MEAN", with_count=True), _g,
           lambda *g: [np.int32(3), sum(g) / 3]),
    OpCase("AccumulatorSetGlobalStep", _dense_stale, _g[:2], lambda a, b: b),
    OpCase("AccumulatorNumDropped", lambda a, b: _dense_stale(a, b, with_dropped=True), _g[:2],
           lambda a, b: [np.int64(1), b]),
    OpCase("AccumulatorApplyGradient", _dense("MEAN"), [np.float64(2.0), np.float64(5.0)],
           lambda a, b: np.float64(3.5), name="scalar"),
    OpCase("SparseConditionalAccumulator", _sparse("MEAN"), [_i1, _v1, _i2, _v2], _sparse_ref(True)),
    OpCase("SparseAccumulatorTakeGradient", _sparse("SUM"), [_i1, _v1, _i2, _v2], _sparse_ref(False),
           name="sum"),
]

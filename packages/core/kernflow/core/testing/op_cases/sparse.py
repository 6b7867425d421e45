"""Contract cases of the sparse ops (kernflow.core.ops.sparse_ops), each against numpy."""

import numpy as np

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(11)
_IND = np.array([[0, 1], [1, 0], [1, 3], [3, 2]], np.int64)   # canonical order, row 2 empty
_SHAPE = np.array([4, 5], np.int64)
_VAL = np.array([1.5, -2.0, 3.25, 0.5])


def _dense(ind, val, shape, default=0):
    out = np.zeros(tuple(shape), np.asarray(val).dtype)
    np.add.at(out, tuple(np.asarray(ind).T), val)
    if default:
        hit = np.zeros(tuple(shape), bool)
        hit[tuple(np.asarray(ind).T)] = True
        out[~hit] = default
    return out


def _sp(i, v, s):
    return kf.SparseTensor(i, v, s)


def _matmul_ref(adj_a, adj_b):
    def ref(i, v, b):
        a = _dense(i, v, _SHAPE)
        a = a.T if adj_a else a
        return a @ (b.T if adj_b else b)
    return ref


def _seg_ref(kind, num=None):
    def ref(data, idx, ids, *unused):
        n = num if num is not None else int(ids[-1]) + 1
        out = np.zeros((n,) + data.shape[1:], data.dtype)
        for s in range(n):
            rows = data[idx[ids == s]]
            if len(rows):
                scale = {"Sum": 1, "Mean": len(rows), "SqrtN": np.sqrt(len(rows))}[kind]
                out[s] = rows.sum(axis=0) / scale
        return out
    return ref


_DATA = _r.randn(5, 3)
_SIDX = np.array([0, 2, 2, 4, 1], np.int32)
_SIDS = np.array([0, 0, 1, 3, 3], np.int32)

CASES = [
    OpCase("SparseToDense", lambda i, v: kf.sparse.to_dense(_sp(i, v, _SHAPE)), [_IND, _VAL],
           lambda i, v: _dense(i, v, _SHAPE), grad=True, grad_inputs=[1], name="float64"),
    OpCase("SparseToDense", lambda i, v, d: kf.sparse_to_dense(i, [4, 5], v, d),
           [_IND.astype(np.int32), _VAL.astype(np.float32), np.float32(7)],
           lambda i, v, d: _dense(i, v, _SHAPE, 7), grad=True, grad_inputs=[1, 2], name="default"),
    OpCase("SparseReorder", lambda i, v: [kf.sparse.reorder(_sp(i, v, _SHAPE)).indices,
                                          kf.sparse.reorder(_sp(i, v, _SHAPE)).values],
           [_IND[::-1].copy(), _VAL[::-1].copy()], lambda i, v: [_IND, _VAL], grad=True,
           grad_inputs=[1]),
    OpCase("SparseReshape", lambda i: [kf.sparse.reshape(_sp(i, _VAL, _SHAPE), [2, -1]).indices,
                                       kf.sparse.reshape(_sp(i, _VAL, _SHAPE), [2, -1]).dense_shape],
           [_IND], lambda i: [np.stack(np.unravel_index(i[:, 0] * 5 + i[:, 1], (2, 10)), 1),
                              np.array([2, 10])]),
    OpCase("SparseFillEmptyRows",
           lambda i, v, d: [t for sp, e in [kf.sparse.fill_empty_rows(_sp(i, v, _SHAPE), d)]
                            for t in (sp.indices, sp.values, e)],
           [_IND, _VAL, np.float64(9.0)],
           lambda i, v, d: [np.insert(i, 3, [2, 0], axis=0), np.insert(v, 3, d),
                            np.array([False, False, True, False])], grad=True, grad_inputs=[1, 2]),
    OpCase("SparseAdd",
           lambda i, v, j, w: [kf.sparse.add(_sp(i, v, _SHAPE), _sp(j, w, _SHAPE)).indices,
                               kf.sparse.add(_sp(i, v, _SHAPE), _sp(j, w, _SHAPE)).values],
           [_IND, _VAL, _IND[1:3].copy(), np.array([1.0, 4.0])],
           lambda i, v, j, w: [_IND, _VAL + np.array([0, 1.0, 4.0, 0])], grad=True,
           grad_inputs=[1, 3]),
    OpCase("SparseAddGrad",
           lambda g, a, b, s: apply_op("SparseAddGrad", [g, a, b, s]).outputs,
           [_VAL, _IND[[0, 2]].copy(), _IND[[1, 2, 3]].copy(), _IND],
           lambda g, a, b, s: [g[[0, 2]], g[[1, 2, 3]]]),
    OpCase("SparseTensorDenseAdd", lambda i, v, b: kf.sparse.add(_sp(i, v, _SHAPE), b),
           [_IND, _VAL, _r.randn(4, 5)], lambda i, v, b: _dense(i, v, _SHAPE) + b, grad=True,
           grad_inputs=[1, 2]),
    OpCase("SparseReduceSum", lambda i, v: kf.sparse.reduce_sum(_sp(i, v, _SHAPE), axis=1),
           [_IND, _VAL], lambda i, v: _dense(i, v, _SHAPE).sum(1), grad=True, grad_inputs=[1]),
    OpCase("SparseReduceSum", lambda i, v: kf.sparse.reduce_sum(_sp(i, v, _SHAPE), 0, keepdims=True),
           [_IND, _VAL], lambda i, v: _dense(i, v, _SHAPE).sum(0, keepdims=True), grad=True,
           grad_inputs=[1], name="keepdims"),
    OpCase("SparseReduceSum", lambda i, v: kf.sparse_reduce_sum(_sp(i, v, _SHAPE)),
           [_IND, _VAL], lambda i, v: _dense(i, v, _SHAPE).sum(), name="all"),
    OpCase("SparseSlice",
           lambda i, v: [kf.sparse.slice(_sp(i, v, _SHAPE), [1, 0], [3, 3]).indices,
                         kf.sparse.slice(_sp(i, v, _SHAPE), [1, 0], [3, 3]).values,
                         kf.sparse.slice(_sp(i, v, _SHAPE), [1, 0], [9, 3]).dense_shape],
           [_IND, _VAL], lambda i, v: [np.array([[0, 0], [2, 2]]), v[[1, 3]], np.array([3, 3])],
           grad=True, grad_inputs=[1]),
    OpCase("SparseSliceGrad",
           lambda g, i, s, o: apply_op("SparseSliceGrad", [g, i, s, o]).outputs[0],
           [np.array([5.0, 6.0]), _IND, np.array([1, 0], np.int64), np.array([[0, 0], [2, 2]], np.int64)],
           lambda g, i, s, o: np.array([0, 5.0, 0, 6.0])),
]
for _adj_a in (False, True):
    for _adj_b in (False, True):
        _b = _r.randn(3, 4 if _adj_a else 5) if _adj_b else _r.randn(4 if _adj_a else 5, 3)
        CASES.append(OpCase(
            "SparseTensorDenseMatMul",
            lambda i, v, b, aa=_adj_a, ab=_adj_b: kf.sparse.sparse_dense_matmul(
                _sp(i, v, _SHAPE), b, adjoint_a=aa, adjoint_b=ab),
            [_IND, _VAL, _b], _matmul_ref(_adj_a, _adj_b), grad=True, grad_inputs=[1, 2],
            name=f"adj_{int(_adj_a)}{int(_adj_b)}"))
for _kind in ("Sum", "Mean", "SqrtN"):
    _fn = getattr(kf, {"Sum": "sparse_segment_sum", "Mean": "sparse_segment_mean",
                       "SqrtN": "sparse_segment_sqrt_n"}[_kind])
    CASES += [
        OpCase(f"SparseSegment{_kind}", _fn, [_DATA, _SIDX, _SIDS], _seg_ref(_kind), grad=True,
               grad_inputs=[0], name="float64"),
        OpCase(f"SparseSegment{_kind}", _fn, [_DATA.astype(np.float32), _SIDX.astype(np.int64), _SIDS],
               _seg_ref(_kind), name="float32_int64idx"),
        OpCase(f"SparseSegment{_kind}WithNumSegments",
               lambda d, i, s, f=_fn: f(d, i, s, num_segments=6), [_DATA, _SIDX, _SIDS],
               _seg_ref(_kind, 6), grad=True, grad_inputs=[0]),
    ]
    if _kind != "Sum":
        CASES.append(OpCase(
            f"SparseSegment{_kind}Grad",
            lambda g, i, s, k=_kind: apply_op(f"SparseSegment{k}Grad", [g, i, s, 5]).outputs[0],
            [_r.randn(4, 3), _SIDX, _SIDS],
            lambda g, i, s, k=_kind: _seg_grad_ref(k, g, i, s)))


def _seg_grad_ref(kind, g, idx, ids):
    out = np.zeros((5,) + g.shape[1:], g.dtype)
    counts = np.bincount(ids, minlength=g.shape[0]).astype(float)
    scale = counts if kind == "Mean" else np.sqrt(counts)
    for j in range(len(idx)):
        out[idx[j]] += g[ids[j]] / scale[ids[j]]
    return out

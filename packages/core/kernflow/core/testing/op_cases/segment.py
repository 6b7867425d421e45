"""Contract cases of the segment ops (sorted Segment* and UnsortedSegment*)."""

import numpy as np

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(7)


def _distinct(shape, dtype=np.float64):
    """Values with no ties (max/min gradients are well defined), away from zero."""
    n = int(np.prod(shape))
    v = (_r.permutation(n) + 1.0) * 0.37 * np.where(_r.rand(n) < 0.5, -1, 1)
    return v.reshape(shape).astype(dtype)


_IDENTITY = {"Sum": 0, "Mean": 0, "Max": 0, "Min": 0, "Prod": 1}
_REDUCE = {"Sum": np.sum, "Mean": np.mean, "Max": np.max, "Min": np.min, "Prod": np.prod}


def _trunc_mean(rows, dtype):
    if np.dtype(dtype).kind in "iu":
        s = rows.sum(axis=0, dtype=np.int64)
        return (np.sign(s) * (np.abs(s) // len(rows))).astype(dtype)
    return rows.mean(axis=0)


def _sorted_ref(kind):
    def ref(data, ids):
        rows = int(ids[-1]) + 1 if ids.size else 0
        out = np.full((rows,) + data.shape[1:], _IDENTITY[kind], data.dtype)
        for s in range(rows):
            sel = data[ids == s]
            if len(sel):
                out[s] = _trunc_mean(sel, data.dtype) if kind == "Mean" else _REDUCE[kind](sel, axis=0)
        return out
    return ref


def _unsorted_fill(kind, dtype):
    dt = np.dtype(dtype)
    if kind in ("Sum", "Prod"):
        return _IDENTITY[kind]
    info = np.finfo(dt) if dt.kind == "f" else np.iinfo(dt)
    return info.min if kind == "Max" else info.max


def _unsorted_ref(kind, num=None):
    def ref(data, ids, num_segments=None):
        n = int(num_segments if num is None else num)
        inner = data.shape[ids.ndim:]
        flat_ids = ids.reshape(-1)
        rows = data.reshape(flat_ids.shape + inner)
        out = np.full((n,) + inner, _unsorted_fill(kind, data.dtype), data.dtype)
        for s in range(n):
            sel = rows[flat_ids == s]
            if len(sel):
                out[s] = _REDUCE[kind](sel, axis=0)
        return out
    return ref


_IDS = np.array([0, 0, 2, 3, 3, 3], np.int32)
_IDS64 = _IDS.astype(np.int64)
_D2 = _distinct((6, 3))
_UIDS = np.array([3, 0, -1, 3, 1, 0], np.int32)
# Grad cases leave no segment empty: max/min fill empty ones with the type's extremes.
_UIDS_FULL = np.array([2, 0, -1, 2, 1, 0], np.int32)
_UIDS2 = np.array([[1, 0, 2], [-1, 1, 1]], np.int64)

CASES = []
for _kind in ("Sum", "Mean", "Max", "Min", "Prod"):
    _fn = getattr(kf, f"segment_{_kind.lower()}")
    _op = f"Segment{_kind}"
    _ref = _sorted_ref(_kind)
    CASES += [
        OpCase(_op, _fn, [_D2, _IDS], _ref, grad=True, name="float64_gap"),
        OpCase(_op, _fn, [_D2.astype(np.float32)[:, 0], _IDS64], _ref, name="float32_vector_int64ids"),
        OpCase(_op, _fn, [(_D2 * 10).astype(np.int32), _IDS], _ref, name="int32"),
        OpCase(_op, _fn, [_D2.astype(np.float16)[:, :2], _IDS], _ref, rtol=2e-3, atol=2e-3,
               name="float16"),
        OpCase(_op, _fn, [np.zeros((0, 3), np.float32), np.zeros(0, np.int32)], _ref, name="empty"),
        OpCase(_op, lambda d, i, f=_fn: f(d, i), [_distinct((4, 2, 2)), np.array([1, 1, 1, 4], np.int64)],
               _ref, grad=True, name="rank3_leading_gap"),
    ]
    if _kind in ("Sum", "Mean", "Prod"):
        CASES.append(OpCase(_op, _fn, [(_D2[:, :2] + 1j * _D2[:, 1:]).astype(np.complex64), _IDS],
                            _ref, rtol=1e-5, atol=1e-4, name="complex64"))
    if _kind == "Mean":
        CASES.append(OpCase(_op, _fn, [np.array([[-7], [2], [5], [-3]], np.int64),
                                       np.array([0, 0, 1, 1], np.int32)],
                            _ref, name="int64_truncates"))
    if _kind == "Sum":
        CASES.append(OpCase(_op, lambda d: kf.segment_sum(d, [0, 0, 2]),
                            [np.array([[1, 2], [3, 4], [5, 6]], np.int16)],
                            lambda d: np.array([[4, 6], [0, 0], [5, 6]], np.int16),
                            name="constant_ids_int16"))

for _kind in ("Sum", "Max", "Min", "Prod"):
    _fn = getattr(kf, f"unsorted_segment_{_kind.lower()}")
    _op = f"UnsortedSegment{_kind}"
    CASES += [
        OpCase(_op, lambda d, i, f=_fn: f(d, i, 3), [_D2, _UIDS_FULL], _unsorted_ref(_kind, 3),
               grad=True, name="float64_const_num"),
        OpCase(_op, lambda d, i, f=_fn: f(d, i, 5), [_D2, _UIDS], _unsorted_ref(_kind, 5),
               name="float64_empty_segments"),
        OpCase(_op, _fn, [_D2.astype(np.float32), _UIDS, np.int32(4)], _unsorted_ref(_kind),
               name="float32_fed_num"),
        OpCase(_op, _fn, [(_D2 * 10).astype(np.int64)[:, 1], _UIDS.astype(np.int64), np.int64(6)],
               _unsorted_ref(_kind), name="int64_vector"),
        OpCase(_op, lambda d, i, f=_fn: f(d, i, 3), [_distinct((2, 3, 2)), _UIDS2],
               _unsorted_ref(_kind, 3), grad=True, name="2d_ids"),
        OpCase(_op, lambda d, i, f=_fn: f(d, i, 3), [np.zeros((0, 2), np.float32), np.zeros(0, np.int32)],
               _unsorted_ref(_kind, 3), name="empty_data"),
        OpCase(_op, lambda d, i, f=_fn: f(d, i, 4), [_D2.astype(np.float16), _UIDS],
               _unsorted_ref(_kind, 4), rtol=2e-3, atol=2e-3, name="float16"),
    ]
    if _kind in ("Sum", "Prod"):
        CASES.append(OpCase(_op, lambda d, i, f=_fn: f(d, i, 4),
                            [(_D2[:, :2] + 1j * _D2[:, 1:]), _UIDS], _unsorted_ref(_kind, 4),
                            name="complex128"))

"""The hand-written GPU kernels of indexing.py, pooling.py and sparse_apply.py against the CPU kernels.

Each kernel runs on an array module: numpy (here, in CI), numpy with every scatter-add taking the
sort-and-scan path cupy takes for dtypes without atomicAdd, and cupy (marked `gpu`: skipped, saying
why, without a GPU). Values, dtypes, shapes and error messages must match the CPU kernel's.
"""

from __future__ import annotations

import functools
import importlib

import numpy as np
import pytest

import kernflow.core  # noqa: F401 - registers the op definitions
from kernflow.core.framework import dtypes, op_def_registry
from kernflow.core.framework import ops as framework_ops
from kernflow.core.plugins.registry import KernelRegistry
from kernflow.core.runtime.executor import KernelConstruction
from kernflow.kernels.gpu.device import visible_gpus
from kernflow.core.runtime.resource_mgr import Var
from kernflow.kernels.gpu import array_module, indexing, pooling, sparse_apply

# inf - inf and NaN inputs warn in numpy (on the CPU kernels too).
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
_r = np.random.RandomState(11)


@pytest.fixture(params=["numpy", "numpy-scan", pytest.param("cupy", marks=pytest.mark.gpu)])
def am(request):
    if request.param == "cupy":
        if not visible_gpus():
            pytest.skip("no GPU: cupy or a CUDA device is missing")
        return array_module.cupy_module()
    return array_module.numpy_module(atomic_add=request.param == "numpy")


# ------------------------------------------------------------------------------- harness
@functools.lru_cache(maxsize=None)
def _registry(device):
    rec = KernelRegistry()
    if device == "CPU":
        for fam in ("array", "nn", "segment", "training"):
            importlib.import_module(f"kernflow.kernels.cpu.{fam}").register(rec, "CPU")
    else:
        for mod in (indexing, pooling, sparse_apply):
            mod.register(rec, "GPU")
    return rec


def _ctx(op, inputs, attrs):
    """Kernel construction for `op` with type attrs taken from the inputs' dtypes."""
    od = op_def_registry.get(op)
    full = {k: a.default for k, a in od.attrs.items() if a.has_default}
    full.update(attrs)
    pos = 0
    for a in od.inputs:
        n = full[a.number_attr] if a.number_attr else 1
        if a.type_attr and not a.is_ref:
            full[a.type_attr] = dtypes.as_dtype(np.asarray(inputs[pos]).dtype)
        pos += n
    return KernelConstruction(f"{op.lower()}_node", op, full, None, [],
                              framework_ops.output_dtypes(od, full))


def _kernels(op, ctx, am):
    cpu = _registry("CPU").find(op, "CPU", ctx.attrs)
    gpu = _registry("GPU").find(op, "GPU", ctx.attrs)
    assert gpu is not None, f"no GPU kernel of {op} for {ctx.attrs}"
    names = [a.name for a, _ in op_def_registry.get(op).expand_inputs(ctx.attrs)]
    host = [n in gpu.host_memory for n in names]
    return cpu.factory(ctx), gpu.factory(ctx, am), host


def _on(am, inputs, host):
    return [x if h else am.device(x) for x, h in zip(inputs, host)]


def _tol(dt):
    return {"float16": (2e-3, 2e-3), "float32": (1e-5, 1e-6), "complex64": (1e-5, 1e-5)}.get(
        np.dtype(dt).name, (1e-12, 1e-12))


def _same(am, actual, expected):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same(am, a, e)
        return
    assert isinstance(actual, am.xp.ndarray), f"output is a {type(actual)}, not a device array"
    a, e = am.to_host(actual), np.asarray(expected)
    assert a.shape == e.shape and a.dtype == e.dtype, f"{a.dtype}{a.shape} vs {e.dtype}{e.shape}"
    if e.dtype.kind in "fc":
        rtol, atol = _tol(e.dtype)
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, e)


def check(am, op, inputs, **attrs):
    """Runs `op` on the CPU kernel and on the GPU kernel with `am`; the results must agree."""
    ctx = _ctx(op, inputs, attrs)
    cpu, gpu, host = _kernels(op, ctx, am)
    _same(am, gpu(*_on(am, inputs, host)), cpu(*inputs))


def check_error(am, op, inputs, **attrs):
    """Both kernels must raise the same error class with the same message."""
    ctx = _ctx(op, inputs, attrs)
    cpu, gpu, host = _kernels(op, ctx, am)
    with pytest.raises(Exception) as want:
        cpu(*inputs)
    with pytest.raises(type(want.value)) as got:
        gpu(*_on(am, inputs, host))
    assert str(got.value) == str(want.value)


def _i(*v, dt=np.int32):
    return np.array(v, dt)


def _f(*shape, dt=np.float64):
    return _r.randn(*shape).astype(dt)


# ------------------------------------------------------------------------------- join / split
@pytest.mark.parametrize("values, axis", [
    ([_f(2, 3, dt=np.float32), _f(1, 3, dt=np.float32)], np.int32(0)),
    ([_f(2, 3), _f(2, 1), _f(2, 2)], np.int32(-1)),
    ([np.zeros((0, 3), np.float16), _f(2, 3, dt=np.float16)], np.int32(0)),
    ([_r.rand(2, 3) > .5, _r.rand(2, 2) > .5], np.int64(1)),
    ([_f(2, 3, 4).astype(np.int64), _f(2, 1, 4).astype(np.int64)], np.int32(-2)),
    ([_f(2, 2).astype(np.complex64), _f(2, 2).astype(np.complex64)], np.int64(-2)),
], ids=["f32", "neg_axis", "empty_f16", "bool_int64_axis", "int64_3d", "complex"])
def test_concat(am, values, axis):
    check(am, "ConcatV2", values + [axis], N=len(values))


@pytest.mark.parametrize("values, axis", [
    ([_f(2, 3), _f(2, 3)], np.int32(2)),
    ([_f(2, 3), _f(3, 2)], np.int32(0)),
    ([_f(2, 3), _f(2, 3, 1)], np.int32(0)),
    ([np.float64(1), np.float64(2)], np.int32(0)),
    ([_f(2, 3), _f(2, 3)], np.array([0, 1], np.int32)),
], ids=["axis_range", "mismatch", "rank", "scalars", "axis_shape"])
def test_concat_errors(am, values, axis):
    check_error(am, "ConcatV2", values + [axis], N=len(values))


@pytest.mark.parametrize("value, sizes, dim", [
    (_f(2, 3), _i(1, -1, dt=np.int64), np.int32(1)),
    (_f(6, dt=np.float32), _i(2, 0, 4, dt=np.int64), np.int32(0)),
    (_f(4, 3, 2).astype(np.uint8), _i(1, 1), np.int32(-1)),
    (np.zeros((0, 4), np.float64), _i(-1, 3), np.int32(1)),
], ids=["minus_one", "zero_piece", "neg_dim_uint8", "empty"])
def test_split_v(am, value, sizes, dim):
    check(am, "SplitV", [value, sizes, dim], num_split=sizes.size)


@pytest.mark.parametrize("sizes, dim, num", [
    (_i(-1, -1, 1), 0, 3), (_i(2, 2), 0, 2), (_i(1, 1), 0, 3), (_i(2, 1), 2, 2), (_i(5, -1), 0, 2),
], ids=["two_unknown", "sum", "count", "dim", "too_big"])
def test_split_v_errors(am, sizes, dim, num):
    check_error(am, "SplitV", [_f(3, 2), sizes, np.int32(dim)], num_split=num)


# ------------------------------------------------------------------------------- gather/scatter
_P3 = _f(2, 3, 4)


@pytest.mark.parametrize("params, indices", [
    (_P3, _i([1, 2], [0, 0])),
    (_f(2, 3).astype(np.int32), np.array([[[1, 2]], [[0, 0]]], np.int64)),
    (_f(2, 3, dt=np.float32), np.zeros((2, 0), np.int32)),
    (_P3, np.array([[1], [0], [1]], np.int64)),
    (_P3, _i([[1, 2, 3]], [[0, 0, 1]])),
    (_P3, np.zeros((0, 2), np.int32)),
    (_r.rand(3, 2) > .5, _i([2], [0])),
    (_f(3, 2).astype(np.complex128), _i([2, 1], [0, 0])),
], ids=["pairs", "int32_params", "k0", "rows", "elements", "no_indices", "bool", "complex"])
def test_gather_nd(am, params, indices):
    check(am, "GatherNd", [params, indices])


def test_gather_nd_out_of_range_gives_zeros(am):
    """As TF's GPU kernel: no check (it would cost a device->host read), zeros for bad indices."""
    ctx = _ctx("GatherNd", [_P3, _i([1, 2])], {})
    _, gpu, _ = _kernels("GatherNd", ctx, am)
    out = am.to_host(gpu(am.device(_P3), am.device(_i([1, 2], [2, 0], [0, -1]))))
    np.testing.assert_array_equal(out, np.stack([_P3[1, 2], np.zeros(4), np.zeros(4)]))


@pytest.mark.parametrize("params, indices", [
    (_P3, _i([1, 2, 3, 0])), (_P3, np.int32(1)),
], ids=["too_deep", "scalar_indices"])
def test_gather_nd_errors(am, params, indices):
    check_error(am, "GatherNd", [params, indices])


@pytest.mark.parametrize("indices, updates, shape", [
    (_i([1], [3], [1]), _f(3, 3), _i(4, 3)),
    (np.array([[0, 1], [2, 2], [0, 1]], np.int64), _i(5, 7, 9, dt=np.int64), np.array([3, 3], np.int64)),
    (_i([1], [1], [0]), _f(3, 2, dt=np.float16), _i(2, 2)),
    (_i([1], [1], [0]), _f(3, 2).astype(np.complex64), _i(2, 2)),
    (_i([1], [1]), _r.rand(2, 2) > .5, _i(3, 2)),
    (np.zeros((2, 0), np.int32), _f(2, 2, 3), _i(2, 3)),
    (np.zeros((0, 1), np.int32), np.zeros((0, 3)), _i(4, 3)),
    (_i([[0, 1], [1, 1]], [[0, 1], [2, 0]]), _f(2, 2, dt=np.float32), _i(3, 2)),
    (_i([1], [3], [1]), _f(3, 3).astype(np.uint8), _i(4, 3)),
], ids=["duplicates", "elements_int64", "f16", "complex", "bool", "k0", "empty", "2d_indices",
        "uint8"])
def test_scatter_nd(am, indices, updates, shape):
    check(am, "ScatterNd", [indices, updates, shape])


@pytest.mark.parametrize("indices, updates, shape", [
    (_i([1], [4]), _f(2, 3), _i(4, 3)),
    (_i([0, -1]), _f(1), _i(2, 2)),
    (_i([1]), _f(1, 3), _i(-4, 3)),
    (_i([1], [2]), _f(2, 2), _i(4, 3)),
    (_i([1, 1, 1]), _f(1), _i(4, 3)),
    (np.int32(1), _f(3), _i(4, 3)),
], ids=["out_of_range", "negative", "negative_shape", "updates_shape", "too_deep", "scalar_indices"])
def test_scatter_nd_errors(am, indices, updates, shape):
    check_error(am, "ScatterNd", [indices, updates, shape])


# ------------------------------------------------------------------------------- partition
@pytest.mark.parametrize("data, partitions, n", [
    (np.arange(5) * 1.5, _i(0, 2, 0, 1, 2), 3),
    (_f(2, 3).astype(np.int64), _i([1, 0, 1], [0, 0, 1]), 2),
    (_P3, _i([1, 0, 1], [0, 0, 1]), 3),
    (_f(2, 3, dt=np.float32), _i(1, 1), 2),
    (np.zeros((0, 3)), np.zeros(0, np.int32), 2),
    (_r.rand(7) > .5, _i(3, 3, 0, 1, 3, 0, 2), 4),
], ids=["vector", "2d_int64", "2d_empty_partition", "one_empty", "no_rows", "bool"])
def test_dynamic_partition(am, data, partitions, n):
    check(am, "DynamicPartition", [data, partitions], num_partitions=n)


@pytest.mark.parametrize("data, partitions", [
    (_f(2, 3), _i([1, 0, 3], [0, 0, 1])), (_f(4), _i(0, -1, 0, 1)), (_f(4), _i(0, 1, 0)),
], ids=["too_big", "negative", "shape"])
def test_dynamic_partition_errors(am, data, partitions):
    check_error(am, "DynamicPartition", [data, partitions], num_partitions=2)


# ------------------------------------------------------------------------------- top-k
_TIES = np.array([[3, 1, 3, 2, 1], [0, 0, 0, 0, 0]], np.int64)


@pytest.mark.parametrize("x, k", [
    (_f(2, 3, 7, dt=np.float32), 3),
    (_TIES, 4),
    (_TIES.astype(np.float16), 5),
    (np.array([1.0, -np.inf, np.nan, 5.0, np.nan, 2.0, 5.0]), 7),
    (np.array([[0.0, -0.0, 1.0]]), 3),
    (_f(3, 4), 0),
    (np.zeros((0, 5), np.float32), 2),
    (_TIES.astype(np.uint8), 2),
], ids=["f32", "ties_int64", "ties_f16", "nan_inf", "signed_zero", "k0", "no_rows", "uint8"])
def test_top_k(am, x, k):
    check(am, "TopKV2", [x, np.int32(k)])


@pytest.mark.parametrize("x, k", [(_f(2, 3), -1), (_f(2, 3), 4), (np.float64(1), 1)],
                         ids=["negative_k", "k_too_big", "scalar"])
def test_top_k_errors(am, x, k):
    check_error(am, "TopKV2", [x, np.int32(k)])


# ------------------------------------------------------------------------------- segments
_KINDS = ("Sum", "Mean", "Prod", "Max", "Min")
_IDS = _i(0, 0, 2, 3, 3, 3)
_D = _f(6, 3)
_SORTED = [
    ("f64_gap", _D, _IDS),
    ("f32_vector_int64_ids", _D[:, 0].astype(np.float32), _IDS.astype(np.int64)),
    ("f16", _D[:, :2].astype(np.float16), _IDS),
    ("int64", (_D * 10).astype(np.int64), _IDS),
    ("uint8", np.abs(_D * 10).astype(np.uint8), _IDS),
    ("empty", np.zeros((0, 3), np.float32), np.zeros(0, np.int32)),
    ("rank3_leading_gap", _f(4, 2, 2), _i(1, 1, 1, 4, dt=np.int64)),
    ("single", _f(1, 2), _i(2)),
    ("infs_nans", np.array([[-np.inf], [np.nan], [1.0], [-np.inf], [np.inf]]), _i(0, 1, 1, 2, 2)),
]


@pytest.mark.parametrize("kind", _KINDS)
@pytest.mark.parametrize("name, data, ids", _SORTED, ids=[c[0] for c in _SORTED])
def test_sorted_segment(am, kind, name, data, ids):
    check(am, f"Segment{kind}", [data, ids])


@pytest.mark.parametrize("kind", ["Sum", "Mean", "Prod"])
def test_sorted_segment_complex(am, kind):
    check(am, f"Segment{kind}", [(_D[:, :2] + 1j * _D[:, 1:]).astype(np.complex64), _IDS])


def test_segment_mean_truncates(am):
    check(am, "SegmentMean", [np.array([[-7], [2], [5], [-3]], np.int64), _i(0, 0, 1, 1)])


@pytest.mark.parametrize("kind", _KINDS)
@pytest.mark.parametrize("data, ids", [
    (_D, _i(0, 1, 1, 0, 2, 3)), (_D, _i(-1, 0, 0, 1, 1, 2)), (_D, _i([0, 1], [1, 2], [2, 3])),
    (_D, _i(0, 0, 1)), (np.float64(1), _i(0)),
], ids=["not_sorted", "negative", "ids_not_vector", "size", "scalar_data"])
def test_sorted_segment_errors(am, kind, data, ids):
    check_error(am, f"Segment{kind}", [data, ids])


_UIDS = _i(3, 0, -1, 3, 1, 0)
_UNSORTED = [
    ("f64_empty_segments", _D, _UIDS, 5),
    ("f32", _D.astype(np.float32), _UIDS, 4),
    ("int64_vector", (_D * 10).astype(np.int64)[:, 1], _UIDS.astype(np.int64), 6),
    ("2d_ids", _f(2, 3, 2), np.array([[1, 0, 2], [-1, 1, 1]], np.int64), 3),
    ("empty_data", np.zeros((0, 2), np.float32), np.zeros(0, np.int32), 3),
    ("f16", _D.astype(np.float16), _UIDS, 4),
    ("uint16", np.abs(_D * 10).astype(np.uint16), _UIDS, 4),
    ("zero_segments", _D, _i(-1, -1, -1, -1, -1, -1), 0),
    ("infs_nans", np.array([-np.inf, np.nan, 1.0, -np.inf, np.inf]), _i(0, 1, 1, 2, 2), 4),
]


@pytest.mark.parametrize("kind", ["Sum", "Prod", "Max", "Min"])
@pytest.mark.parametrize("name, data, ids, num", _UNSORTED, ids=[c[0] for c in _UNSORTED])
def test_unsorted_segment(am, kind, name, data, ids, num):
    check(am, f"UnsortedSegment{kind}", [data, ids, np.int32(num)])


@pytest.mark.parametrize("kind", ["Sum", "Prod"])
def test_unsorted_segment_complex(am, kind):
    check(am, f"UnsortedSegment{kind}", [_D[:, :2] + 1j * _D[:, 1:], _UIDS, np.int64(4)])


@pytest.mark.parametrize("kind", ["Sum", "Prod", "Max", "Min"])
@pytest.mark.parametrize("data, ids, num", [
    (_D, _UIDS, np.int32(3)), (_D, np.array([[1, 0, 2], [0, 1, 7]]), np.int32(3)),
    (_D, _UIDS, np.int32(-1)), (_D, _i(0, 1), np.int32(4)), (_D, _UIDS, _i(4, 4)),
], ids=["out_of_range", "out_of_range_2d", "negative_num", "shape", "num_not_scalar"])
def test_unsorted_segment_errors(am, kind, data, ids, num):
    check_error(am, f"UnsortedSegment{kind}", [data, ids, num])


# ------------------------------------------------------------------------------- pooling
_PX = _r.permutation(2 * 7 * 6 * 3).reshape(2, 7, 6, 3) / 10.0
_PT = _PX.copy()
_PT[0, 0, 0, 0] = _PT[0, 0, 1, 0] = _PT[0, 1, 0, 0] = 100.0  # ties: the first one wins
_K2 = dict(ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1])
_NAN_X = _PX.astype(np.float32)
_NAN_X[0, 0, 0, 0] = _NAN_X[1, 2, 3, 2] = np.nan   # NaN never wins a window (TF)
_NAN_X[1, 4, 4, 0], _NAN_X[0, 5, 5, 1] = np.inf, -np.inf
_K3S2 = dict(ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1])
_POOLS = [
    ("valid", _PX, _K2, "VALID"),
    ("same_ties", _PT, _K3S2, "SAME"),
    ("f32_overlap", _PX.astype(np.float32), dict(ksize=[1, 2, 3, 1], strides=[1, 1, 2, 1]), "SAME"),
    ("int64", (_PX * 10).astype(np.int64) % 7, _K3S2, "SAME"),
    ("uint8", (_PX * 10).astype(np.uint8) % 5, dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1]), "SAME"),
    ("f16", _PX.astype(np.float16), _K3S2, "VALID"),
    ("neg_inf", -np.ones((1, 3, 3, 2), np.float32) * np.inf, _K2, "SAME"),
    ("nan_inf", _NAN_X, _K3S2, "SAME"),
    ("empty", np.zeros((0, 4, 4, 2), np.float32), _K2, "VALID"),
    ("depth", _PX, dict(ksize=[1, 1, 1, 3], strides=[1, 1, 1, 3]), "VALID"),
    ("nchw", np.transpose(_PT, (0, 3, 1, 2)), dict(ksize=[1, 1, 2, 2], strides=[1, 1, 1, 1]), "SAME"),
]


def _pool_attrs(k, padding, name):
    return dict(k, padding=padding, data_format="NCHW" if name == "nchw" else "NHWC")


@pytest.mark.parametrize("name, x, k, padding", _POOLS, ids=[c[0] for c in _POOLS])
def test_max_pool_family(am, name, x, k, padding):
    attrs = _pool_attrs(k, padding, name)
    ctx = _ctx("MaxPool", [x], attrs)
    y = _registry("CPU").find("MaxPool", "CPU", ctx.attrs).factory(ctx)(x)
    check(am, "MaxPool", [x], **attrs)
    g = (_r.randn(*y.shape) * 4).astype(x.dtype)
    check(am, "MaxPoolGrad", [x, y, g], **attrs)
    gg = (_r.randn(*x.shape) * 4).astype(x.dtype)
    check(am, "MaxPoolGradGrad", [x, y, gg], **attrs)


@pytest.mark.parametrize("op, inputs, k", [
    ("MaxPool", [_f(2, 3, 4)], _K2),
    ("MaxPoolGrad", [_PX, _f(2, 3, 3, 3), _f(2, 3, 2, 3)], _K2),
    ("MaxPoolGradGrad", [_PX, _f(2, 3, 3, 3), _f(2, 7, 6, 2)], _K2),
    ("MaxPoolGradGrad", [_PX, _f(2, 3, 2, 3), _PX], _K2),
    ("MaxPool", [_f(1, 1, 1, 1)], dict(ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1])),
], ids=["not_4d", "grad_shape", "gradgrad_shape", "orig_output_shape", "negative_size"])
def test_max_pool_errors(am, op, inputs, k):
    check_error(am, op, inputs, padding="VALID", **k)


# ------------------------------------------------------------------------------- sparse updates
_HYPER = {"alpha": 0.1, "lr": 0.1, "momentum": 0.9, "rho": 0.8, "epsilon": 1e-6,
          "beta1_power": 0.9 ** 3, "beta2_power": 0.999 ** 3, "beta1": 0.9, "beta2": 0.999}


def _sparse_inputs(op, dt, indices, rows):
    """The op's inputs in order: (name, initial value) for var and its slots (made into Vars by
    `_run_sparse`), host scalar hyperparameters, grad and indices."""
    out, shape = [], (5, 3)
    for a in op_def_registry.get(op).inputs:
        if a.is_ref:
            small = a.name == "mg"  # CenteredRMSProp: ms - mg**2 must stay positive
            init = _r.randn(*shape) * 0.1 if small else (np.abs(_r.randn(*shape)) + 0.5)
            out.append((a.name, init.astype(dt)))
        elif a.name in ("grad", "delta"):
            out.append(rows.astype(dt))
        elif a.name == "indices":
            out.append(indices)
        else:
            out.append(np.asarray(_HYPER[a.name], dt))
    return out


def _run_sparse(kernel, inputs, to_dev):
    args = []
    for x in inputs:
        if isinstance(x, tuple):  # (name, init)
            v = Var(x[0])
            v.assign(to_dev(x[1].copy()))
            args.append(v)
        else:
            args.append(x)
    out = kernel(*args)
    return out, [a.read() for a in args if isinstance(a, Var)]


def _sparse_on(am, inputs, host):
    """Device copies of the non-host inputs (Vars, given as (name, init), are made later)."""
    return [x if h or isinstance(x, tuple) else am.device(x) for x, h in zip(inputs, host)]


_SPARSE_IDX = [
    ("duplicates", _i(2, 0, 2), 3),
    ("distinct_unsorted", np.array([3, 0, 2], np.int64), 3),
    ("all_same", _i(4, 4, 4, 4), 4),
    ("empty", np.zeros(0, np.int32), 0),
]


@pytest.mark.parametrize("name", list(sparse_apply.RULES))
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("case, indices, n", _SPARSE_IDX, ids=[c[0] for c in _SPARSE_IDX])
def test_sparse_apply(am, name, dt, case, indices, n):
    op = f"SparseApply{name}"
    rows = _r.randn(n, 3)
    inputs = _sparse_inputs(op, dt, indices, rows)
    extra = {"use_nesterov": True} if name in ("Momentum", "Adam") and case == "duplicates" else {}
    extra["use_locking"] = case == "distinct_unsorted"
    cpu, gpu, host = _kernels(op, _ctx(op, inputs, extra), am)
    want_var, want = _run_sparse(cpu, inputs, lambda a: a)
    got_var, got = _run_sparse(gpu, _sparse_on(am, inputs, host), am.device)
    assert isinstance(got_var, Var)
    rtol = 5e-3 if dt == np.float16 else 1e-5
    for g, w in zip(got, want):
        assert isinstance(g, am.xp.ndarray)
        np.testing.assert_allclose(am.to_host(g), w, rtol=rtol, atol=rtol)


def test_sparse_apply_unsorted_distinct_indices_reference(am):
    """Each gradient row updates its own index (the CPU kernel once ignored the order)."""
    op = "SparseApplyGradientDescent"
    inputs = [("var", np.zeros((3, 1), np.float32)), np.asarray(1.0, np.float32),
              np.array([[1.0], [2.0]], np.float32), _i(2, 0)]
    _, gpu, host = _kernels(op, _ctx(op, inputs, {}), am)
    _, (var,) = _run_sparse(gpu, _sparse_on(am, inputs, host), am.device)
    np.testing.assert_array_equal(am.to_host(var), [[-2.0], [0.0], [-1.0]])


@pytest.mark.parametrize("indices, rows", [(_i(0, 5), 2), (_i(-1, 1), 2), (_i(0, 1), 3)],
                         ids=["too_big", "negative", "grad_shape"])
def test_sparse_apply_errors(am, indices, rows):
    op = "SparseApplyAdagrad"
    inputs = _sparse_inputs(op, np.float32, indices, _r.randn(rows, 3))
    cpu, gpu, host = _kernels(op, _ctx(op, inputs, {}), am)
    with pytest.raises(Exception) as want:
        _run_sparse(cpu, inputs, lambda a: a)
    with pytest.raises(type(want.value)) as got:
        _run_sparse(gpu, _sparse_on(am, inputs, host), am.device)
    assert str(got.value) == str(want.value)


# ------------------------------------------------------------------------------- registration
def test_registration_excludes_host_int32_and_strings():
    rec = _registry("GPU")
    for (op, _), lst in rec._kernels.items():
        (kd,) = lst
        attr = "Tparams" if op == "GatherNd" else "T"
        assert dtypes.string not in kd.constraints[attr]
        assert (dtypes.int32 in kd.constraints[attr]) == (op == "GatherNd"), op
        names = {a.name for a in op_def_registry.get(op).inputs}
        assert set(kd.host_memory) <= names, op
        assert not {"indices", "segment_ids", "partitions"} & set(kd.host_memory), op


def test_every_listed_op_is_registered():
    ops = {op for op, _ in _registry("GPU")._kernels}
    assert ops == {
        "ConcatV2", "SplitV", "GatherNd", "ScatterNd", "TopKV2", "MaxPool", "MaxPoolGrad",
        "MaxPoolGradGrad", "DynamicPartition", *(f"SparseApply{n}" for n in sparse_apply.RULES),
        *(f"Segment{k}" for k in _KINDS), *(f"UnsortedSegment{k}" for k in _KINDS if k != "Mean")}


def test_first_true(am):
    xp = am.xp
    assert array_module.first_true(am, xp.zeros((0,), bool)) == -1
    assert array_module.first_true(am, xp.asarray(np.array([[False, False], [False, True]]))) == 3
    assert array_module.first_true(am, xp.zeros((3,), bool)) == -1

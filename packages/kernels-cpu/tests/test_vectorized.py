"""The faster numpy formulations (kernflow.kernels.cpu.vectorized) give numpy's results."""

import warnings

import numpy as np
import pytest

from kernflow.kernels.cpu import math as cpu_math
from kernflow.kernels.cpu import nn as cpu_nn
from kernflow.kernels.cpu import vectorized as vz


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.float16])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (64, 128), (3, 5, 7), (vz._CHUNK + 5,)])
def test_relu_into_matches_maximum(dtype, shape):
    rng = np.random.RandomState(0)
    x = np.asarray(rng.randn(*shape) * 3).astype(dtype)
    if x.size and np.dtype(dtype).kind == "f":
        x.reshape(-1)[:: 7] = np.nan
    want = np.maximum(x, 0)
    np.testing.assert_array_equal(vz.relu_into(x, np.empty_like(x)), want)
    y = x.copy()
    assert vz.relu_into(y, y) is y
    np.testing.assert_array_equal(y, want)


def test_relu_into_non_contiguous_input():
    x = np.random.RandomState(1).randn(64, 32).astype(np.float32)
    np.testing.assert_array_equal(cpu_nn._relu(x.T), np.maximum(x.T, 0))
    np.testing.assert_array_equal(cpu_nn._relu(x[:, ::2]), np.maximum(x[:, ::2], 0))


def test_relu_inplace_leaves_read_only_input_alone():
    x = np.arange(-4, 4, dtype=np.float32)
    x.flags.writeable = False
    out = cpu_nn._relu_inplace(x)
    assert out is not x
    np.testing.assert_array_equal(out, [0, 0, 0, 0, 0, 1, 2, 3])


@pytest.mark.parametrize("shape,axes", [
    ((512, 128), 0), ((512, 128), (0,)), ((512, 128), -2), ((512, 10), 1), ((512, 10), (-1,)),
    ((64, 8, 8, 16), (0, 1, 2)), ((64, 8, 8, 16), (2, 1, 0)), ((64, 8, 8, 16), (1, 2, 3)),
    ((64, 8, 8, 16), (1, 2)),            # middle axes: numpy's reduction
    ((100000, 3), 0), ((3, 100000), 1),  # a long trailing axis stays with numpy (pairwise)
    ((2, 2), 0), ((0, 4096), 0), ((4096, 4), (0, 1)),
])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_add_reduce_matches_numpy(shape, axes, keepdims, dtype):
    x = np.random.RandomState(2).randn(*shape).astype(dtype)
    want = np.add.reduce(x.astype(np.float64), axis=axes, keepdims=keepdims)
    got = vz.add_reduce(x, axes, keepdims, dtype)
    assert got.shape == np.shape(want) and got.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1, np.sqrt(x.size)))


def test_add_reduce_propagates_nan_and_inf():
    x = np.ones((4096, 4), np.float32)
    x[5, 1], x[7, 2], x[9, 3], x[10, 3] = np.nan, np.inf, np.inf, -np.inf
    with np.errstate(invalid="ignore"):   # inf - inf, as numpy's own reduction reports
        got = vz.add_reduce(x, 0, False, np.float32)
    np.testing.assert_array_equal(got, [4096, np.nan, np.inf, np.nan])


def test_add_reduce_bad_axis_raises_numpy_error():
    with pytest.raises(np.exceptions.AxisError):
        vz.add_reduce(np.ones((64, 64), np.float32), 2, False, np.float32)


@pytest.mark.parametrize("shape", [(512, 10), (7, 3), (64, 128), (1, 1)])
def test_row_max(shape):
    x = np.random.RandomState(3).randn(*shape).astype(np.float32)
    x[0, 0] = np.nan
    np.testing.assert_array_equal(vz.row_max(x), np.max(x, axis=-1, keepdims=True))


def test_sparse_xent_matches_dense_formula_and_rejects_bad_labels():
    class Ctx:
        op_type, name = "SparseSoftmaxCrossEntropyWithLogits", "xent"
    kernel = cpu_nn._sparse_xent(Ctx())
    rng = np.random.RandomState(4)
    logits = rng.randn(512, 10).astype(np.float32) * 5
    labels = rng.randint(0, 10, 512)
    loss, backprop = kernel(logits, labels)
    z = logits.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    np.testing.assert_allclose(loss, -np.log(p[np.arange(512), labels]), rtol=1e-5, atol=1e-6)
    p[np.arange(512), labels] -= 1
    np.testing.assert_allclose(backprop, p, atol=1e-6)
    for bad in (-1, 10):
        labels[3] = bad
        with pytest.raises(Exception, match=f"label value of {bad} which is outside"):
            kernel(logits, labels.astype(np.int32))
    loss, backprop = kernel(np.zeros((0, 10), np.float32), np.zeros(0, np.int64))
    assert loss.shape == (0,) and backprop.shape == (0, 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scalar_real_div_is_numpys_quotient_without_warnings(dtype):
    rng = np.random.RandomState(5)
    with np.errstate(all="ignore"):
        a = (rng.randn(3000) * 10.0 ** rng.randint(-40, 40, 3000)).astype(dtype)
        b = (rng.randn(3000) * 10.0 ** rng.randint(-40, 40, 3000)).astype(dtype)
        b[::97], a[::89], a[::101] = 0, np.inf, np.nan
        want = a / b
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = np.array([cpu_math._real_div(np.array(p), q) for p, q in zip(a, b)], dtype)
    np.testing.assert_array_equal(got, want)

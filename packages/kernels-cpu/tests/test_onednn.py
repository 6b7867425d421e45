"""The oneDNN convolution and max-pool-gradient kernels give the numpy kernels' results (TF semantics).

Each case runs the same graph twice in one process, with oneDNN on and off (`onednn.set_enabled`),
so both paths of the CPU kernels are checked against each other and the numpy path against its own
reference tests elsewhere. Skipped only where the oneDNN library is not installed (it is a dependency
of kernflow-kernels-cpu on Linux x86-64).
"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.kernels.cpu import onednn

pytestmark = pytest.mark.skipif(not onednn.available(),
                                reason="oneDNN (onednn-cpu-gomp) is not installed on this platform")


def _both(build, feeds):
    """Runs build() -> fetches with oneDNN on and then off; returns (on, off)."""
    g = kf.Graph()
    with g.as_default():
        fetches = build()
    out = []
    for enabled in (True, False):
        previous = onednn.set_enabled(enabled)
        try:
            with kf.Session(graph=g) as s:
                out.append(s.run(fetches, {g.get_tensor_by_name(k): v for k, v in feeds.items()}))
        finally:
            onednn.set_enabled(previous)
    return out


CONV_CASES = [
    # (input NHWC shape, filter shape, strides, padding, dilations)
    ((4, 14, 14, 8), (5, 5, 8, 16), (1, 1), "SAME", (1, 1)),
    ((3, 13, 11, 3), (3, 3, 3, 6), (2, 2), "SAME", (1, 1)),
    ((2, 12, 12, 4), (3, 2, 4, 5), (2, 3), "VALID", (1, 1)),
    ((2, 15, 15, 4), (3, 3, 4, 4), (1, 1), "SAME", (2, 2)),
    ((2, 9, 10, 2), (3, 3, 2, 3), (1, 2), [[0, 0], [1, 2], [0, 1], [0, 0]], (1, 1)),
    ((5, 7, 7, 1), (1, 1, 1, 7), (1, 1), "VALID", (1, 1)),
]


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("xs,ws,st,pad,dil", CONV_CASES)
def test_conv2d_forward_and_gradients_match_numpy(xs, ws, st, pad, dil, fmt):
    rng = np.random.RandomState(0)
    x = rng.randn(*xs).astype(np.float32)
    w = rng.randn(*ws).astype(np.float32)
    if fmt == "NCHW":
        x = x.transpose(0, 3, 1, 2).copy()
        if not isinstance(pad, str):
            pad = [pad[0], pad[3], pad[1], pad[2]]
    strides = [1, 1, *st] if fmt == "NCHW" else [1, *st, 1]
    dilations = [1, 1, *dil] if fmt == "NCHW" else [1, *dil, 1]

    def build():
        xp = kf.placeholder(kf.float32, x.shape, name="x")
        wv = kf.constant(w)
        y = kf.nn.conv2d(xp, wv, strides, pad, data_format=fmt, dilations=dilations)
        dy = kf.constant(rng.randn(*[int(d) for d in y.shape]).astype(np.float32))
        dx, dw = kf.gradients(y, [xp, wv], grad_ys=dy)
        return y, dx, dw

    on, off = _both(build, {"x:0": x})
    for a, b, what in zip(on, off, ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")):
        assert a.shape == b.shape, what
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max(), err_msg=what)


def test_float64_and_empty_batches_use_numpy():
    x = np.random.RandomState(1).randn(2, 6, 6, 2)
    w = np.random.RandomState(2).randn(3, 3, 2, 2)
    on, off = _both(lambda: kf.nn.conv2d(kf.placeholder(kf.float64, x.shape, name="x"), w,
                                         [1, 1, 1, 1], "SAME"), {"x:0": x})
    np.testing.assert_array_equal(on, off)
    with kf.Session(graph=kf.Graph()) as s:
        y = s.run(kf.nn.conv2d(kf.zeros([0, 5, 5, 2]), kf.ones([3, 3, 2, 4]), [1, 1, 1, 1], "SAME"))
    assert y.shape == (0, 5, 5, 4)


POOL_CASES = [
    # (shape, ksize, strides, padding, data_format)
    ((4, 12, 12, 8), [1, 2, 2, 1], [1, 2, 2, 1], "SAME", "NHWC"),
    ((2, 11, 9, 3), [1, 3, 3, 1], [1, 2, 2, 1], "SAME", "NHWC"),
    ((2, 10, 10, 3), [1, 3, 2, 1], [1, 1, 2, 1], "VALID", "NHWC"),
    ((2, 3, 9, 9), [1, 1, 3, 3], [1, 1, 2, 2], "SAME", "NCHW"),
]


@pytest.mark.parametrize("shape,ksize,strides,padding,fmt", POOL_CASES)
def test_max_pool_grad_matches_numpy_with_ties(shape, ksize, strides, padding, fmt):
    rng = np.random.RandomState(3)
    # ReLU-like values: many windows hold only zeros, where the first zero must take the gradient.
    x = np.maximum(rng.randn(*shape), 0).round(1).astype(np.float32)

    def build():
        xp = kf.placeholder(kf.float32, shape, name="x")
        y = kf.nn.max_pool(xp, ksize, strides, padding, data_format=fmt)
        g = kf.constant(rng.rand(*[int(d) for d in y.shape]).astype(np.float32) + 1)
        return kf.gradients(y, xp, grad_ys=g)[0]

    on, off = _both(build, {"x:0": x})
    # Overlapping windows add gradients in another order; a tie sent elsewhere would differ by >= 1.
    np.testing.assert_allclose(on, off, rtol=1e-6, atol=1e-6)


def test_max_pool_grad_with_infinite_windows_keeps_tf_semantics():
    x = np.full((1, 4, 4, 1), -np.inf, dtype=np.float32)
    x[0, 0, 0, 0] = 1.0
    x[0, 3, 3, 0] = np.nan

    def build():
        xp = kf.placeholder(kf.float32, x.shape, name="x")
        y = kf.nn.max_pool(xp, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        return kf.gradients(y, xp)[0]

    on, off = _both(build, {"x:0": x})
    np.testing.assert_array_equal(on, off)
    assert on[0, 0, 0, 0] == 1.0 and on.sum() == 1.0   # the -inf-only windows take no gradient


def test_one_primitive_runs_on_many_threads_at_once():
    rng = np.random.RandomState(4)
    x = rng.randn(8, 16, 16, 8).astype(np.float32)
    w = rng.randn(3, 3, 8, 8).astype(np.float32)
    g = kf.Graph()
    with g.as_default():
        xp = kf.placeholder(kf.float32, x.shape)
        y = kf.nn.conv2d(xp, w, [1, 1, 1, 1], "SAME")
    with kf.Session(graph=g) as s:
        want = s.run(y, {xp: x})
        results, errors = [], []

        def worker(i):
            try:
                for _ in range(20):
                    results.append(np.array_equal(s.run(y, {xp: x}), want))
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert not errors and len(results) == 80 and all(results)


def test_environment_switch_turns_onednn_off():
    code = ("from kernflow.kernels.cpu import onednn; import os; "
            "print(onednn.available(), os.environ.get('OMP_WAIT_POLICY'))")
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**{k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"},
                              "KERNFLOW_ONEDNN": "0"})
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                        env={k: v for k, v in os.environ.items() if k not in ("KERNFLOW_ONEDNN",
                                                                              "OMP_WAIT_POLICY")})
    assert off.stdout.split() == ["False", "None"], off.stderr
    assert on.stdout.split() == ["True", "PASSIVE"], on.stderr

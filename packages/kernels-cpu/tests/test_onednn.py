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


FUSED_CASES = [
    # (input NHWC shape, filter shape, strides, padding, data_format, bias op)
    ((4, 14, 14, 3), (5, 5, 3, 16), (1, 1), "SAME", "NHWC", "add"),
    ((3, 13, 11, 4), (3, 3, 4, 6), (2, 2), "VALID", "NHWC", "bias_add"),
    ((2, 9, 9, 4), (3, 3, 4, 5), (1, 1), "SAME", "NCHW", "bias_add"),
]


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("xs,ws,st,pad,fmt,bias_op", FUSED_CASES)
def test_fused_conv_bias_relu_matches_numpy_and_trains(xs, ws, st, pad, fmt, bias_op, relu):
    """The remapper's `_FusedConv2D` (bias and relu as oneDNN post-ops) against its numpy path, with
    the gradients of a loss on it (which read the fused output through ReluGrad and Shape)."""
    rng = np.random.RandomState(5)
    x = rng.randn(*xs).astype(np.float32)
    if fmt == "NCHW":
        x = x.transpose(0, 3, 1, 2).copy()
    strides = [1, 1, *st] if fmt == "NCHW" else [1, *st, 1]

    def build():
        xp = kf.placeholder(kf.float32, [None] + list(x.shape[1:]), name="x")
        w = kf.constant(rng.randn(*ws).astype(np.float32))
        b = kf.constant(rng.randn(ws[-1]).astype(np.float32))
        c = kf.nn.conv2d(xp, w, strides, pad, data_format=fmt)
        h = kf.nn.bias_add(c, b, data_format=fmt) if bias_op == "bias_add" else c + b
        if relu:
            h = kf.nn.relu(h)
        return [h] + kf.gradients(kf.reduce_sum(h * h), [xp, w, b])

    g = kf.Graph()
    with g.as_default():
        fetches = build()
    with kf.Session(graph=g) as s:
        meta = kf.RunMetadata()
        s.run(fetches, {"x:0": x}, options=kf.RunOptions(output_partition_graphs=True),
              run_metadata=meta)
    assert any(nd.op == "_FusedConv2D" for p in meta.partition_graphs for nd in p.node)
    on, off = _both(build, {"x:0": x})
    for a, b in zip(on, off):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())


def test_fused_conv_relu_of_nan_is_zero_as_in_tf_fused_kernel():
    # TF 2.21's oneDNN _FusedConv2D (what `relu(conv2d(x, w) + b)` runs in TF) gives 0 where the
    # convolution is NaN; a separate Relu op keeps NaN. The fused oneDNN path does what TF does.
    x = np.zeros((1, 4, 4, 1), np.float32)
    x[0, 0, 0, 0] = np.nan
    g = kf.Graph()
    with g.as_default():
        xp = kf.placeholder(kf.float32, [None, 4, 4, 1])
        y = kf.nn.relu(kf.nn.conv2d(xp, np.ones((1, 1, 1, 2), np.float32), [1, 1, 1, 1], "SAME")
                       + np.zeros(2, np.float32))
    with kf.Session(graph=g) as s:
        out = s.run(y, {xp: x})
    np.testing.assert_array_equal(out[0, 0, 0], [0.0, 0.0])


def test_fused_conv_rejects_a_bias_of_the_wrong_size():
    from kernflow.core.framework.op_def_library import apply_op
    g = kf.Graph()
    with g.as_default():
        y = apply_op("_FusedConv2D", [np.ones((1, 3, 3, 2), np.float32), np.ones((1, 1, 2, 4), np.float32),
                                      [np.ones(3, np.float32)]],
                     {"strides": [1, 1, 1, 1], "padding": "VALID", "fused_ops": ["BiasAdd", "Relu"]},
                     name="fused")
    with kf.Session(graph=g) as s:
        with pytest.raises(kf.errors.InvalidArgumentError, match=r"_FusedConv2D fused: bias .* 4 output "
                                                                 r"channels, got shape \[3\]"):
            s.run(y)


def test_relu_grad_keeps_tf_arithmetic_for_special_values():
    """oneDNN's ReluGrad (one JIT pass) is exactly numpy's g * (y > 0): NaN features take no
    gradient, NaN/inf gradients where y <= 0 give NaN (TF multiplies), denormal y > 0 passes."""
    rng = np.random.RandomState(6)
    n = 1 << 16
    y = np.maximum(rng.randn(n), 0).astype(np.float32)
    g = rng.randn(n).astype(np.float32)
    specials_y = [np.nan, 0.0, 1e-45, 1e-40, np.inf, 0.0, 0.0, 1.0, -0.0, np.nan]
    specials_g = [1.0, np.nan, 2.0, 3.0, 4.0, np.inf, -np.inf, np.nan, 5.0, np.nan]
    y[:10], g[:10] = specials_y, specials_g
    with np.errstate(invalid="ignore"):
        want = g * (y > 0)
    got = onednn.relu_grad(g, y)
    assert got is not None
    np.testing.assert_array_equal(got, want)
    assert onednn.relu_grad(g[:100], y[:100]) is None          # small: numpy's
    assert onednn.relu_grad(g.astype(np.float64), y.astype(np.float64)) is None

    def build():
        yp = kf.placeholder(kf.float32, [n], name="x")
        from kernflow.core.framework.op_def_library import apply_op
        return apply_op("ReluGrad", [kf.constant(g), yp], {}).outputs[0]

    on, off = _both(build, {"x:0": y})
    np.testing.assert_array_equal(on, off)
    np.testing.assert_array_equal(on, want)

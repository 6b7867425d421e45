"""The remapper pass (kernflow/core/runtime/remapper.py): Conv2D + bias (+ Relu) -> `_FusedConv2D`.

Each case builds a graph, runs it in a session with the pass (the default) and with
`global_jit_level=OFF` (no rewrite), compares the values, and reads the partition graphs the step
ran to see which ops were fused. The fused kernel itself (oneDNN and numpy paths) is tested in
packages/kernels-cpu/tests/test_onednn.py.
"""

import types

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.plugins import registries
from kernflow.core.runtime.remapper import remap

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def _off():
    return kf.ConfigProto(graph_options=kf.GraphOptions(
        optimizer_options=kf.OptimizerOptions(global_jit_level=kf.OptimizerOptions.OFF)))


def _run(graph, fetches, feeds, config=None):
    """(values, op types of the partition graphs that ran) of one step, on the CPU (the fusion is the
    CPU plugin's: oneDNN post-ops)."""
    config = config or kf.ConfigProto()
    config.device_count["GPU"] = 0
    with kf.Session(graph=graph, config=config) as s:
        s.run(kf.global_variables_initializer()) if graph.get_collection("variables") else None
        meta = kf.RunMetadata()
        out = s.run(fetches, feeds, options=kf.RunOptions(output_partition_graphs=True),
                    run_metadata=meta)
    ops = [nd.op for g in meta.partition_graphs for nd in g.node]
    return out, ops


def _compare(graph, fetches, feeds):
    """Runs with and without the pass; asserts the values match; returns the fused run's op types."""
    fused, ops = _run(graph, fetches, feeds)
    plain, plain_ops = _run(graph, fetches, feeds, _off())
    assert "_FusedConv2D" not in plain_ops
    for a, b in zip(fused, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * (np.abs(b).max() + 1))
    return ops


def _convnet(bias_op="add", relu=True, fmt="NHWC", bias_first=False):
    rng = np.random.RandomState(0)
    g = kf.Graph()
    with g.as_default():
        shape = [None, 9, 9, 3] if fmt == "NHWC" else [None, 3, 9, 9]
        x = kf.placeholder(kf.float32, shape, name="x")
        w = kf.Variable(rng.randn(3, 3, 3, 8).astype(np.float32) * 0.3)
        b = kf.Variable(rng.randn(8).astype(np.float32))
        c = kf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME", data_format=fmt)
        if bias_op == "bias_add":
            h = kf.nn.bias_add(c, b, data_format=fmt)
        else:
            h = b + c if bias_first else c + b
        if relu:
            h = kf.nn.relu(h)
        loss = kf.reduce_sum(h * h)
        gw, gb = kf.gradients(loss, [w, b])
    xs = rng.randn(4, *[int(d) for d in shape[1:]]).astype(np.float32)
    return g, x, h, loss, gw, gb, xs


@pytest.mark.parametrize("bias_op,bias_first", [("add", False), ("add", True), ("bias_add", False)])
def test_training_graph_fuses_conv_bias_relu_and_keeps_values(bias_op, bias_first):
    g, x, h, loss, gw, gb, xs = _convnet(bias_op, bias_first=bias_first)
    ops = _compare(g, [h, loss, gw, gb], {x: xs})
    assert ops.count("_FusedConv2D") == 1
    assert "Conv2D" not in ops and "Relu" not in ops
    assert "AddV2" not in ops and "BiasAdd" not in ops
    assert "ReluGrad" in ops and "Conv2DBackpropFilter" in ops   # the backward pass is untouched


def test_nchw_bias_add_and_no_relu():
    g, x, h, loss, gw, gb, xs = _convnet("bias_add", relu=False, fmt="NCHW")
    ops = _compare(g, [h, gw, gb], {x: xs})
    assert ops.count("_FusedConv2D") == 1 and "BiasAdd" not in ops
    # NCHW + AddV2 of a [C] vector broadcasts over W, not the channels: not a bias, not fused.
    g2 = kf.Graph()
    with g2.as_default():
        xp = kf.placeholder(kf.float32, [None, 3, 9, 9])
        y = kf.nn.conv2d(xp, np.ones((3, 3, 3, 9), np.float32), [1, 1, 1, 1], "SAME",
                         data_format="NCHW") + np.arange(9, dtype=np.float32)
    ops = _compare(g2, [y], {xp: np.ones((2, 3, 9, 9), np.float32)})
    assert "_FusedConv2D" not in ops


def test_patterns_that_are_not_a_bias_or_leak_an_intermediate_are_left_alone():
    rng = np.random.RandomState(1)
    xs = rng.randn(2, 5, 5, 2).astype(np.float32)
    w = rng.randn(3, 3, 2, 4).astype(np.float32)
    cases = {
        "scalar": lambda c: c + 1.0,                                   # broadcasts, not [C]
        "broadcast_up": lambda c: c + np.ones((3, 1, 1, 1, 4), np.float32),  # changes the shape
        "fetched_conv": None,
        "second_consumer": lambda c: kf.nn.relu(c + np.ones(4, np.float32)) + kf.abs(c),
    }
    for name, f in cases.items():
        g = kf.Graph()
        with g.as_default():
            x = kf.placeholder(kf.float32, [None, 5, 5, 2])
            c = kf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
            fetches = [kf.nn.relu(c + np.ones(4, np.float32)), c] if f is None else [f(c)]
        ops = _compare(g, fetches, {x: xs})
        assert "_FusedConv2D" not in ops, name


def test_control_dependencies_are_kept():
    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(0.0)
        x = kf.placeholder(kf.float32, [2, 4, 4, 1])
        bump = kf.assign_add(v, 1.0)
        with kf.control_dependencies([bump]):
            c = kf.nn.conv2d(x, np.ones((1, 1, 1, 2), np.float32), [1, 1, 1, 1], "VALID")
        y = kf.nn.relu(c + np.array([1.0, -1.0], np.float32))
    with kf.Session(graph=g) as s:
        s.run(v.initializer)
        meta = kf.RunMetadata()
        out = s.run(y, {x: np.ones((2, 4, 4, 1), np.float32)},
                    options=kf.RunOptions(output_partition_graphs=True), run_metadata=meta)
        assert s.run(v) == 1.0
    assert any(nd.op == "_FusedConv2D" for p in meta.partition_graphs for nd in p.node)
    np.testing.assert_array_equal(out[..., 0], 2.0)
    np.testing.assert_array_equal(out[..., 1], 0.0)


def test_bias_computed_from_the_conv_output_is_not_fused():
    # b depends on conv's output: fusing would make the fused node its own ancestor.
    gr = kf.Graph()
    with gr.as_default():
        x = kf.placeholder(kf.float32, [None, 3, 3, 2])
        c = kf.nn.conv2d(x, np.ones((1, 1, 2, 2), np.float32), [1, 1, 1, 1], "VALID")
        b = kf.reshape(kf.reduce_sum(kf.cast(kf.shape(c), kf.float32)) * kf.ones([2]), [2])
        y = kf.nn.relu(c + b)
    gd = gr.as_graph_def(add_shapes=True)
    for nd in gd.node:
        nd.device = CPU0
    out = remap(gd, {CPU0: types.SimpleNamespace(device_type="CPU")}, registries().kernels, 0)
    assert not any(nd.op == "_FusedConv2D" for nd in out.node)
    ops = _compare(gr, [y], {x: np.ones((1, 3, 3, 2), np.float32)})
    assert "_FusedConv2D" not in ops


def test_jit_off_and_devices_without_the_kernel_leave_the_graph_alone():
    g, x, h, loss, gw, gb, xs = _convnet()
    gd = g.as_graph_def(add_shapes=True)
    for nd in gd.node:
        nd.device = CPU0
    kernels = registries().kernels
    cpu = {CPU0: types.SimpleNamespace(device_type="CPU")}
    assert remap(gd, cpu, kernels, -1) is gd
    assert remap(gd, {CPU0: types.SimpleNamespace(device_type="NOSUCH")}, kernels, 0) is gd
    fused = remap(gd, cpu, kernels, 0)
    node = next(nd for nd in fused.node if nd.op == "_FusedConv2D")
    assert node.name == h.op.name
    assert list(node.attr["fused_ops"].list.s) == [b"BiasAdd", b"Relu"]
    # The gradient's Shape nodes now read the fused output.
    names = {nd.name for nd in fused.node}
    conv = next(nd.name for nd in gd.node if nd.op == "Conv2D")
    assert conv not in names
    assert sum(nd.op == "Shape" and nd.input[0] == h.op.name for nd in fused.node) >= 2
    assert not any(nd.input[i].split(":")[0].lstrip("^") not in names
                   for nd in fused.node for i in range(len(nd.input)))

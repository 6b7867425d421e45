"""The elementwise fusion pass (kernflow/core/runtime/fusion.py), run on CPU through the numpy
interpreter of the fused ops: graph structure, and values fused vs unfused."""

import types

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.plugins import registries
from kernflow.core.runtime import executor
from kernflow.core.runtime.fusion import FUSIBLE, MAX_INPUTS, fuse_elementwise, jit_level
from kernflow.core.runtime.partition import partition
from kernflow.core.runtime.placer import PlacementOptions, place
from kernflow.core.runtime.prune import prune

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
ON_1 = kf.OptimizerOptions.ON_1
OFF = kf.OptimizerOptions.OFF


def _config(level):
    return kf.ConfigProto(graph_options=kf.GraphOptions(
        optimizer_options=kf.OptimizerOptions(global_jit_level=level)))


def _fuse(graph, level=ON_1):
    """The pass on the whole graph, every node placed on CPU:0."""
    gd = graph.as_graph_def(add_shapes=True)
    for nd in gd.node:
        nd.device = CPU0
    return gd, fuse_elementwise(gd, {CPU0: types.SimpleNamespace(device_type="CPU")},
                                registries().kernels, level)


def _run_step(graph, feeds: dict, fetches: list, level=ON_1):
    """Runs one step as DirectSession does, with the pass between prune and partition.

    Returns (fetched values, the fused pruned GraphDef).
    """
    kernels = registries().kernels
    devices = registries().devices.create_devices(None)
    by_name = {d.name: d for d in devices if d.device_type == "CPU"}
    placed = place(graph.as_graph_def(add_shapes=True), list(by_name.values()), kernels,
                   PlacementOptions(client_device=CPU0))
    feed_names = tuple(t.name for t in feeds)
    pruned = prune(placed, feed_names, tuple(t.name for t in fetches), (), client_device=CPU0)
    fused = fuse_elementwise(pruned, by_name, kernels, level)
    parts = partition(fused, {n: d.incarnation for n, d in by_name.items()})
    plan = executor.compile_partition(parts[CPU0], by_name[CPU0], kernels, None)
    out = plan.run_inline([feeds[t] for t in feeds], executor.StepContext(1, None, by_name[CPU0]))
    return out, fused


def _ops(gd, op):
    return [nd for nd in gd.node if nd.op == op]


def _program(nd):
    return [s.decode() for s in nd.attr["program"].list.s]


def _assert_same(got, want):
    for a, b in zip(got, want):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_jit_level_reads_the_session_config():
    assert jit_level(None) == 0
    assert jit_level(kf.ConfigProto()) == kf.OptimizerOptions.DEFAULT == 0
    assert jit_level(_config(ON_1)) == 1
    assert jit_level(_config(OFF)) == -1


def _chain(n):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2, 3], name="x")
        y = x
        for _ in range(n):
            y = y + 1.0
    return g, x, y


@pytest.mark.parametrize("level", [OFF, kf.OptimizerOptions.DEFAULT])
def test_off_and_default_leave_cpu_graphs_alone(level):
    g, _, _ = _chain(3)
    gd, out = _fuse(g, level)
    assert out is gd


def test_a_thousand_chained_adds_become_one_kernel_with_one_input():
    g, x, y = _chain(1000)
    gd, out = _fuse(g)
    fused = _ops(out, "_FusedElementwise")
    assert len(fused) == 1 and len(out.node) == 2   # the placeholder and the fused node
    nd = fused[0]
    assert nd.name == y.op.name and list(nd.input) == ["x"]
    prog = _program(nd)
    assert len(prog) == 1000 and prog[0] == "AddV2 float32 i0 float32:1.0"
    assert list(nd.attr["_output_shapes"].list.shape[0].dim) == \
        list(gd.node[-1].attr["_output_shapes"].list.shape[0].dim)
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    g2 = kf.Graph()
    with g2.as_default():
        kf.import_graph_def(out, name="")
    with kf.Session(graph=g2) as s:
        got = s.run(y.name, {"x:0": xv})
    with kf.Session(graph=g) as s:
        want = s.run(y, {x: xv})
    _assert_same([got], [want])
    np.testing.assert_array_equal(got, xv + 1000)


def test_value_needed_elsewhere_is_not_swallowed():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [3, 3], name="x")
        a = kf.multiply(x, 2.0, name="a")
        b = kf.exp(a, name="b")
        c = kf.tanh(b, name="c")
        m = kf.matmul(a, c, name="m")   # `a` also feeds a MatMul: it must stay
        out = kf.add(m, 1.0, name="out")
    xv = np.random.RandomState(0).randn(3, 3).astype(np.float32)
    got, fused = _run_step(g, {x: xv}, [out])
    names = {nd.name: nd.op for nd in fused.node}
    assert names["a"] == "Mul" and names["c"] == "_FusedElementwise" and "b" not in names
    assert _program(next(nd for nd in fused.node if nd.name == "c")) == \
        ["Exp float32 i0", "Tanh float32 t0"]
    want, _ = _run_step(g, {x: xv}, [out], OFF)
    _assert_same(got, want)


def test_fetched_intermediate_stays():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [4], name="x")
        a = kf.square(x, name="a")
        b = kf.sqrt(a + 1.0, name="b")
        c = kf.negative(kf.log(b), name="c")
    xv = np.array([0.5, 1, 2, 3], np.float32)
    got, fused = _run_step(g, {x: xv}, [c, a])
    ops = {nd.name: nd.op for nd in fused.node}
    assert ops["a"] == "Square" and ops["c"] == "_FusedElementwise" and "b" not in ops
    want, _ = _run_step(g, {x: xv}, [c, a], OFF)
    _assert_same(got, want)


def test_diamond_with_a_repeated_input_is_one_cluster_with_deduplicated_inputs():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float64, [5], name="x")
        y = kf.placeholder(kf.float64, [5], name="y")
        a = x * y
        out = kf.sigmoid(a) * kf.tanh(a) + x - y * x
    rng = np.random.RandomState(1)
    feeds = {x: rng.randn(5), y: rng.randn(5)}
    got, fused = _run_step(g, feeds, [out])
    fn = _ops(fused, "_FusedElementwise")
    assert len(fn) == 1 and len(fn[0].input) == 2 and len(_program(fn[0])) == 7
    want, _ = _run_step(g, feeds, [out], OFF)
    _assert_same(got, want)


def test_control_edges_move_to_the_fused_node():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [3], name="x")
        side = kf.no_op(name="side")
        with kf.control_dependencies([side]):
            a = kf.exp(x, name="a")
        b = kf.add(a, 1.0, name="b")
        with kf.control_dependencies([a]):   # a control consumer of a member
            later = kf.identity(x, name="later")
        out = kf.multiply(b, 2.0, name="out")
    gd, fused = _fuse(g)
    by = {nd.name: nd for nd in fused.node}
    assert by["out"].op == "_FusedElementwise" and "a" not in by and "b" not in by
    assert "^side" in by["out"].input
    assert list(by["later"].input) == ["x", "^out"]
    xv = np.array([0, 1, 2], np.float32)
    got, _ = _run_step(g, {x: xv}, [out, later])
    want, _ = _run_step(g, {x: xv}, [out, later], OFF)
    _assert_same(got, want)


def test_member_whose_control_consumer_reaches_the_root_is_left_out():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [3], name="x")
        a = kf.exp(x, name="a")
        with kf.control_dependencies([a]):
            gate = kf.identity(x * 3.0, name="gate")   # runs after a, and feeds the root
        b = kf.sqrt(a, name="b")
        out = kf.add(b, gate, name="out")
    gd, fused = _fuse(g)
    by = {nd.name: nd for nd in fused.node}
    assert by["a"].op == "Exp"   # fusing it would close the cycle a -> gate -> out(a)
    assert by["out"].op == "_FusedElementwise"
    xv = np.array([0, 1, 2], np.float32)
    got, pruned = _run_step(g, {x: xv}, [out])
    want, _ = _run_step(g, {x: xv}, [out], OFF)
    _assert_same(got, want)


def test_inputs_are_capped():
    g = kf.Graph()
    with g.as_default():
        xs = [kf.placeholder(kf.float32, [2], name=f"x{i}") for i in range(100)]
        acc = xs[0]
        for v in xs[1:]:
            acc = acc * 0.5 + v
    rng = np.random.RandomState(2)
    feeds = {x: rng.randn(2).astype(np.float32) for x in xs}
    got, fused = _run_step(g, feeds, [acc])
    fn = _ops(fused, "_FusedElementwise")
    assert len(fn) >= 2 and all(len(nd.input) <= MAX_INPUTS for nd in fn)
    want, _ = _run_step(g, feeds, [acc], OFF)
    _assert_same(got, want)


# ------------------------------------------------------------------ every fusible op
_R = np.random.RandomState(5)


def _vals(dt, shape, domain="any"):
    if dt == "bool":
        return _R.rand(*shape) < 0.5
    if dt.startswith("int"):
        v = _R.randint(-5, 6, size=shape)
        return v.astype(dt)
    v = _R.uniform(-3, 3, size=shape)
    if domain == "positive":
        v = np.abs(v) + 0.1
    return v.astype(dt)


_F, _I = ("float32", "float64", "float16"), ("int32", "int64")
# op -> (inputs: list of (dtype or "T", shape, domain), attrs, dtypes to try)
_SPECS = {
    **{op: ([("T", (3, 4), "any"), ("T", (4,), "any")], {}, _F + _I)
       for op in ("Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference")},
    **{op: ([("T", (3, 4), "any")], {}, _F + _I)
       for op in ("Neg", "Abs", "Square", "Sign", "Relu", "Relu6")},
    "BiasAdd": ([("T", (3, 4), "any"), ("T", (4,), "any")], {}, _F + _I),
    "AddN": ([[("T", (3, 4), "any")] * 3], {}, _F + _I),
    **{op: ([("T", (3, 4), "any"), ("T", (3, 4), "any")], {}, _F) for op in ("RealDiv", "Div")},
    "Pow": ([("T", (3, 4), "positive"), ("T", (3, 4), "any")], {}, _F),
    **{op: ([("T", (3, 4), "positive")], {}, _F) for op in ("Sqrt", "Rsqrt", "Log", "Reciprocal")},
    **{op: ([("T", (3, 4), "any")], {}, _F)
       for op in ("Exp", "Log1p", "Expm1", "Tanh", "Sigmoid", "Sin", "Cos", "Floor", "Ceil", "Elu",
                  "Softplus")},
    "LeakyRelu": ([("T", (3, 4), "any")], {"alpha": 0.3}, _F),
    **{op: ([("T", (3, 4), "any"), ("T", (3, 4), "any")], {}, _F)
       for op in ("ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad", "TanhGrad", "SigmoidGrad",
                  "RsqrtGrad", "ReciprocalGrad")},
    "SqrtGrad": ([("T", (3, 4), "positive"), ("T", (3, 4), "any")], {}, _F),
    **{op: ([("T", (3, 4), "any"), ("T", (1, 4), "any")], {}, _F + _I)
       for op in ("Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual")},
    **{op: ([("bool", (3, 4), "any"), ("bool", (3, 4), "any")], {}, ("bool",))
       for op in ("LogicalAnd", "LogicalOr")},
    "LogicalNot": ([("bool", (3, 4), "any")], {}, ("bool",)),
    "Select": ([("bool", (3, 4), "any"), ("T", (3, 4), "any"), ("T", (3, 4), "any")], {},
               _F + _I),
    "SelectV2": ([("bool", (4,), "any"), ("T", (3, 4), "any"), ("T", (1, 4), "any")], {},
                 _F + _I + ("bool",)),
    "Cast": ([("T", (3, 4), "any")], {"DstT": kf.float16}, _F + _I + ("bool",)),
}
_CASES = [(op, dt) for op, spec in _SPECS.items() for dt in spec[2]]


def test_every_fusible_op_has_a_case():
    assert set(_SPECS) == set(FUSIBLE) - {"Identity"}


@pytest.mark.parametrize("op,dt", _CASES, ids=[f"{o}-{d}" for o, d in _CASES])
def test_each_fusible_op_matches_the_unfused_kernel(op, dt):
    ins, attrs, _ = _SPECS[op]
    g = kf.Graph()
    feeds = {}

    def ph(spec, i):
        t, shape, domain = spec
        t = dt if t == "T" else t
        p = kf.placeholder(kf.as_dtype(t), shape, name=f"p{i}")
        feeds[p] = _vals(t, shape, domain)
        # A first fused op in front (Identity-like for bools): the op under test is then inside
        # a cluster, fed by another step rather than an input.
        if t == "bool":
            return kf.logical_not(p)
        return kf.negative(p)

    with g.as_default():
        args = [[ph(s, f"{i}_{j}") for j, s in enumerate(a)] if isinstance(a, list) else ph(a, i)
                for i, a in enumerate(ins)]
        y = apply_op(op, args, dict(attrs), name="under_test").outputs[0]
        out = kf.logical_not(y) if y.dtype == kf.bool else kf.negative(y)
    got, fused = _run_step(g, feeds, [out])
    fn = _ops(fused, "_FusedElementwise")
    assert len(fn) == 1 and any(s.startswith(f"{op} ") for s in _program(fn[0])), \
        [nd.op for nd in fused.node]
    want, _ = _run_step(g, feeds, [out], OFF)
    _assert_same(got, want)


# ------------------------------------------------------------------ reductions
@pytest.mark.parametrize("reduce,keep", [(kf.reduce_sum, False), (kf.reduce_mean, True),
                                         (kf.reduce_max, False), (kf.reduce_min, True)])
def test_reduction_of_a_cluster_is_one_fused_reduction(reduce, keep):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [4, 6], name="x")
        y = kf.placeholder(kf.float32, [6], name="y")
        out = reduce(kf.square(x - y) * 0.5, axis=[-1], keepdims=keep)
    rng = np.random.RandomState(3)
    feeds = {x: rng.randn(4, 6).astype(np.float32), y: rng.randn(6).astype(np.float32)}
    got, fused = _run_step(g, feeds, [out])
    fr = _ops(fused, "_FusedReduction")
    assert len(fr) == 1 and not _ops(fused, "_FusedElementwise") and not _ops(fused, "Const")
    assert list(fr[0].attr["axis"].list.i) == [-1] and fr[0].attr["keep_dims"].b == keep
    want, _ = _run_step(g, feeds, [out], OFF)
    _assert_same(got, want)


# ------------------------------------------------------------------ whole models
def _mlp():
    rng = np.random.RandomState(4)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [8, 5], name="x")
        w1 = kf.constant(rng.randn(5, 16).astype(np.float32) * 0.5, name="w1")
        b1 = kf.constant(rng.randn(16).astype(np.float32) * 0.1, name="b1")
        w2 = kf.constant(rng.randn(16, 3).astype(np.float32) * 0.5, name="w2")
        h = kf.nn.relu(kf.nn.bias_add(kf.matmul(x, w1), b1))
        h2 = kf.sigmoid(h) * kf.tanh(h * 0.5 + 1.0) + kf.square(h) * 0.01
        y = kf.matmul(h2, w2)
        loss = kf.reduce_mean(kf.square(y - 1.0))
        grads = kf.gradients(loss, [x, w1, b1, w2])
    return g, x, [loss, h2] + grads


def test_mlp_forward_and_backward_match_unfused():
    g, x, fetches = _mlp()
    feeds = {x: np.random.RandomState(5).randn(8, 5).astype(np.float32)}
    got, fused = _run_step(g, feeds, fetches)
    want, unfused = _run_step(g, feeds, fetches, OFF)
    _assert_same(got, want)
    n_fused = len(_ops(fused, "_FusedElementwise")) + len(_ops(fused, "_FusedReduction"))
    assert n_fused >= 3 and len(fused.node) < len(unfused.node) - 5


def test_training_with_variables_and_an_optimizer_through_the_session():
    def train(config):
        g = kf.Graph()
        # Pinned to the CPU, whose fused kernels are bit-identical to the unfused ones (a GPU's
        # generated kernels round differently; the GPU tests compare them with tolerances).
        with g.as_default(), kf.device("/cpu:0"):
            kf.set_random_seed(1)
            x = kf.placeholder(kf.float32, [8, 3], name="x")
            w = kf.Variable(np.full((3, 2), 0.1, np.float32), name="w")
            b = kf.Variable(np.zeros(2, np.float32), name="b")
            y = kf.tanh(kf.matmul(x, w) + b) * 2.0 - 0.5
            loss = kf.reduce_sum(kf.square(y))
            step = kf.train.GradientDescentOptimizer(0.05).minimize(loss)
            with kf.Session(graph=g, config=config) as s:
                s.run(kf.global_variables_initializer())
                xv = np.random.RandomState(6).randn(8, 3).astype(np.float32)
                for _ in range(5):
                    s.run(step, {x: xv})
                return s.run([loss, w, b], {x: xv})
    _assert_same(train(_config(ON_1)), train(_config(OFF)))


def test_session_config_on_1_fuses_on_cpu():
    """Through kf.Session: the session runs the pass (once DirectSession wires it in)."""
    g, x, fetches = _mlp()
    xv = np.random.RandomState(7).randn(8, 5).astype(np.float32)
    md = kf.RunMetadata()
    with kf.Session(graph=g, config=_config(ON_1)) as s:
        got = s.run(fetches, {x: xv}, options=kf.RunOptions(output_partition_graphs=True),
                    run_metadata=md)
    with kf.Session(graph=g, config=_config(OFF)) as s:
        want = s.run(fetches, {x: xv})
    _assert_same(got, want)
    assert any(nd.op in ("_FusedElementwise", "_FusedReduction")
               for p in md.partition_graphs for nd in p.node)

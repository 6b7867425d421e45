"""The fused-op GPU kernels (kernflow/kernels/gpu/fusion.py) against the CPU interpreter, and the
fusion pass on GPU graphs (values, gradients, the fused node in the GPU partition)."""

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from kernflow.kernels.gpu.device import visible_gpus  # noqa: E402 - 0 without cupy or a GPU

if not visible_gpus():
    pytest.skip("no GPU: cupy or a CUDA device is missing", allow_module_level=True)
import cupy  # noqa: E402

import kernflow.core as kf  # noqa: E402
from kernflow.kernels.cpu.fusion import compile_program  # noqa: E402
from kernflow.kernels.gpu import fusion as gpu_fusion  # noqa: E402

_F = ("float32", "float64", "float16")
_FI = _F + ("int32", "int64")
# op -> (arity, result dtype ('same' or a name), dtypes, input domain)
_OPS = {
    **{op: (2, "same", _FI, "any") for op in ("Add", "AddV2", "Sub", "Mul", "Maximum", "Minimum",
                                              "SquaredDifference", "BiasAdd")},
    **{op: (1, "same", _FI, "any") for op in ("Neg", "Abs", "Square", "Sign", "Relu", "Relu6")},
    "AddN": (3, "same", _FI, "any"),
    **{op: (2, "same", _F, "nonzero") for op in ("RealDiv", "Div")},
    "Pow": (2, "same", _F, "positive"),
    **{op: (1, "same", _F, "positive") for op in ("Sqrt", "Rsqrt", "Log", "Reciprocal")},
    **{op: (1, "same", _F, "any") for op in ("Log1p", "Exp", "Expm1", "Tanh", "Sigmoid", "Sin",
                                             "Cos", "Floor", "Ceil", "Elu", "Softplus")},
    **{op: (2, "same", _F, "any") for op in ("ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad",
                                             "TanhGrad", "SigmoidGrad", "RsqrtGrad",
                                             "ReciprocalGrad")},
    "SqrtGrad": (2, "same", _F, "positive"),
    **{op: (2, "bool", _FI, "any") for op in ("Less", "LessEqual", "Greater", "GreaterEqual",
                                              "Equal", "NotEqual")},
}
_CASES = [(op, dt) for op, spec in _OPS.items() for dt in spec[2]]


def _values(dt, domain, shape, rng):
    if dt.startswith("int"):
        v = rng.randint(-6, 7, size=shape)
        if domain != "any":
            v[v == 0] = 1
        return v.astype(dt)
    v = rng.uniform(-3, 3, size=shape)
    if domain == "positive":
        v = np.abs(v) + 0.1
    elif domain == "nonzero":
        v[np.abs(v) < 0.1] = 0.5
    return v.astype(dt)


def _tol(dt):
    return {"float16": (2e-3, 2e-3), "float32": (2e-5, 1e-6), "float64": (1e-12, 1e-13)}.get(dt)


def _compare(program, dtypes, out_type, inputs):
    want = np.asarray(compile_program(program, dtypes)(*inputs))
    kern = gpu_fusion.elementwise_kernel(program, dtypes, out_type)
    got = cupy.asnumpy(kern(*[cupy.asarray(x) for x in inputs]))
    assert got.dtype == np.dtype(out_type) and got.shape == want.shape
    tol = _tol(out_type)
    if tol is None:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol[0],
                                   atol=tol[1], equal_nan=True)


@pytest.mark.parametrize("op,dt", _CASES, ids=[f"{o}-{d}" for o, d in _CASES])
def test_each_op_matches_the_cpu_interpreter(op, dt):
    arity, res, _, domain = _OPS[op]
    rng = np.random.RandomState(0)
    shapes = [(4, 33)] * arity
    if op == "BiasAdd":
        shapes = [(4, 33), (33,)]
    elif arity == 2:
        shapes = [(4, 33), (1, 33)]   # broadcasting
    inputs = [_values(dt, domain, s, rng) for s in shapes]
    out = dt if res == "same" else res
    args = " ".join(f"i{k}" for k in range(arity))
    program = [f"{op} {out} {args}"]
    if out != "bool":   # a second step reading the first, with an inlined literal
        program.append(f"Mul {out} t0 {out}:{1 if dt.startswith('int') else 1.0}")
    _compare(program, [dt] * arity, out, inputs)


def test_select_cast_logical_and_literals():
    rng = np.random.RandomState(1)
    x = rng.uniform(-2, 2, (5, 7)).astype(np.float32)
    y = rng.uniform(-2, 2, (5, 7)).astype(np.float16)
    program = ["Greater bool i0 float32:0.0", "Less bool i0 float32:1.0", "LogicalAnd bool t0 t1",
               "LogicalNot bool t2", "Cast float32 i1", "Select float32 t3 t4 i0",
               "SelectV2 float32 t2 float32:nan t5", "Cast float64 t6",
               "Maximum float64 t7 float64:-inf", "Cast float16 t8"]
    _compare(program, ["float32", "float16"], "float16", [x, y])


def test_special_values_follow_the_unfused_kernels():
    x = np.array([np.nan, -np.inf, -100.0, -1.0, -0.0, 0.0, 1.0, 7.0, 100.0, np.inf], np.float32)
    for op in ("Relu", "Relu6", "Sigmoid", "Softplus", "Elu", "Sign", "Abs", "Tanh", "Exp"):
        _compare([f"{op} float32 i0", "Mul float32 t0 float32:1.0"], ["float32"], "float32", [x])
    _compare(["RealDiv float32 i0 float32:0.0"], ["float32"], "float32", [x])
    _compare(["Maximum float32 i0 float32:0.5", "Minimum float32 float32:nan t0"], ["float32"],
             "float32", [x])


def test_int64_literal_extremes():
    x = np.array([0, 1, -1], np.int64)
    _compare([f"Add int64 i0 int64:{-(1 << 63)}", "Sub int64 t0 int64:9223372036854775807"],
             ["int64"], "int64", [x])


@pytest.mark.parametrize("red", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("dt", ["float32", "float16", "float64", "int32"])
def test_fused_reduction_matches_the_cpu_interpreter(red, dt):
    rng = np.random.RandomState(2)
    a, b = _values(dt, "any", (6, 5, 9), rng), _values(dt, "any", (5, 1), rng)
    program = [f"Mul {dt} i0 i1", f"Add {dt} t0 {dt}:{2 if dt.startswith('int') else 0.5}"]

    class Ctx:
        name = "r"
        attrs = {"program": program, "T": [kf.as_dtype(dt)] * 2, "out_type": kf.as_dtype(dt),
                 "reduction": red, "axis": [0, -1], "keep_dims": False}
        output_dtypes = [kf.as_dtype(dt)]

        def get_attr(self, k):
            return self.attrs[k]

    from kernflow.kernels.cpu.fusion import _fused_reduction as cpu_reduction
    for keep in (False, True):
        Ctx.attrs["keep_dims"] = keep
        want = np.asarray(cpu_reduction(Ctx())(a, b))
        got = cupy.asnumpy(gpu_fusion._fused_reduction(Ctx())(cupy.asarray(a), cupy.asarray(b)))
        assert got.shape == want.shape and got.dtype == want.dtype
        tol = _tol(dt) or (0, 0)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=max(tol[0], 1e-6 if dt == "float32" else 0),
                                   atol=max(tol[1], 1e-2 if dt == "float16" else 0))


def test_kernels_are_cached_per_program_and_dtypes():
    p = ["Mul float32 i0 i0", "Exp float32 t0"]
    k1 = gpu_fusion.elementwise_kernel(p, [kf.float32], kf.float32)
    assert gpu_fusion.elementwise_kernel(list(p), ["float32"], "float32") is k1
    assert gpu_fusion.elementwise_kernel(p, [kf.float64], "float32") is not k1


def test_inplace_variant_writes_into_input_zero():
    class Ctx:
        attrs = {"program": ["Mul float32 i0 i1", "Relu float32 t0"], "T": [kf.float32] * 2,
                 "out_type": kf.float32}

        def get_attr(self, k):
            return self.attrs[k]

    x = cupy.arange(-6, 6, dtype=cupy.float32).reshape(3, 4)
    y = cupy.full((4,), 2.0, cupy.float32)
    out = gpu_fusion._fused_elementwise_inplace(Ctx())(x, y)
    assert out.data.ptr == x.data.ptr
    np.testing.assert_array_equal(cupy.asnumpy(out), np.maximum(np.arange(-6, 6).reshape(3, 4) * 2, 0))
    small = cupy.ones((4,), cupy.float32)
    assert gpu_fusion._fused_elementwise_inplace(Ctx())(small, cupy.ones((3, 4), cupy.float32)).shape \
        == (3, 4)


# ------------------------------------------------------------------ the pass on GPU graphs
@pytest.fixture
def gpu_devices():
    from kernflow.core.plugins import registries
    if "GPU" not in registries().devices.device_types():
        pytest.skip("no GPU device factory is registered (install kernflow-kernels-gpu)")


def _mlp(device):
    rng = np.random.RandomState(3)
    g = kf.Graph()
    with g.as_default(), kf.device(device):
        x = kf.placeholder(kf.float32, [16, 8], name="x")
        w1 = kf.constant(rng.randn(8, 32).astype(np.float32) * 0.3)
        b1 = kf.constant(rng.randn(32).astype(np.float32) * 0.1)
        w2 = kf.constant(rng.randn(32, 4).astype(np.float32) * 0.3)
        h = kf.nn.relu(kf.nn.bias_add(kf.matmul(x, w1), b1))
        h2 = kf.sigmoid(h) * kf.tanh(h * 0.5 + 1.0)
        y = kf.matmul(h2, w2)
        loss = kf.reduce_sum(kf.square(y - 1.0))
        grads = kf.gradients(loss, [x, w1, b1, w2])
    return g, x, [loss, h2] + grads


def test_mlp_values_and_gradients_on_gpu_match_the_cpu(gpu_devices):
    xv = np.random.RandomState(4).randn(16, 8).astype(np.float32)
    g_cpu, x_cpu, f_cpu = _mlp("/device:CPU:0")
    with kf.Session(graph=g_cpu) as s:
        want = s.run(f_cpu, {x_cpu: xv})
    g, x, fetches = _mlp("/device:GPU:0")
    opts = kf.RunOptions(output_partition_graphs=True)
    md = kf.RunMetadata()
    with kf.Session(graph=g) as s:   # DEFAULT jit level: fuses on GPUs
        got = s.run(fetches, {x: xv}, options=opts, run_metadata=md)
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    fused = [nd for p in md.partition_graphs for nd in p.node
             if nd.op in ("_FusedElementwise", "_FusedReduction")]
    assert fused and all("GPU" in nd.device for nd in fused)


def test_jit_off_leaves_gpu_graphs_unfused(gpu_devices):
    g, x, fetches = _mlp("/device:GPU:0")
    cfg = kf.ConfigProto(graph_options=kf.GraphOptions(
        optimizer_options=kf.OptimizerOptions(global_jit_level=kf.OptimizerOptions.OFF)))
    md = kf.RunMetadata()
    with kf.Session(graph=g, config=cfg) as s:
        s.run(fetches, {x: np.ones((16, 8), np.float32)},
              options=kf.RunOptions(output_partition_graphs=True), run_metadata=md)
    assert not [nd for p in md.partition_graphs for nd in p.node if nd.op.startswith("_Fused")]


def test_long_chain_is_one_gpu_kernel(gpu_devices):
    g = kf.Graph()
    with g.as_default(), kf.device("/device:GPU:0"):
        x = kf.placeholder(kf.float32, [1000], name="x")
        y = x
        for _ in range(200):
            y = y * 1.001 + 0.5
    md = kf.RunMetadata()
    with kf.Session(graph=g) as s:
        v = s.run(y, {x: np.zeros(1000, np.float32)},
                  options=kf.RunOptions(output_partition_graphs=True), run_metadata=md)
    ref = np.zeros(1000, np.float32)
    for _ in range(200):
        ref = ref * np.float32(1.001) + np.float32(0.5)
    np.testing.assert_allclose(v, ref, rtol=1e-5)
    fused = [nd for p in md.partition_graphs for nd in p.node if nd.op == "_FusedElementwise"]
    assert len(fused) == 1 and len(fused[0].attr["program"].list.s) == 400

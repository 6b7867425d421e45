"""Numpy interpreter of the fused ops (kernflow.core.ops.fused_ops) made by the fusion pass.

Each step of a program calls the function the unfused op's CPU kernel uses (the tables of
kernflow.kernels.cpu.math and .nn), in the step's dtype, so a fused graph computes what the
unfused one does, float16 rounding after every step included. The CPU gains no speed from fusion;
this kernel lets the pass run (and be tested) on any machine and is the reference of the GPU code.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.ops.fused_ops import literal_value, parse_program
from kernflow.kernels.cpu import math as _math
from kernflow.kernels.cpu import nn as _nn

DEVICE = "CPU"


def _leaky_relu(x, alpha):
    return np.where(x > 0, x, x * alpha)


# The unary gradients of kernflow.kernels.cpu.math (real types), the same ufuncs in the same
# order without writing into temporaries, which need not have the broadcast shape here.
def _tanh_grad(y, dy):
    return np.multiply(np.subtract(1, np.multiply(y, y)), dy)


def _sigmoid_grad(y, dy):
    return np.multiply(np.multiply(np.subtract(1, y), y), dy)


def _sqrt_grad(y, dy):
    return np.divide(np.multiply(dy, dy.dtype.type(0.5)), y)


def _rsqrt_grad(y, dy):
    return np.multiply(np.multiply(np.multiply(y, y), y), np.multiply(dy, dy.dtype.type(-0.5)))


def _reciprocal_grad(y, dy):
    return np.multiply(np.multiply(y, y), np.negative(dy))


def _cast_to(dtype):
    dt = dtype.as_numpy_dtype
    return lambda x: np.asarray(x).astype(dt)


# op type -> fn(*args) of the step's arguments; Cast is built per step (it needs the dtype).
_STEP_FNS = {
    **_math.ELEMENTWISE, **_math.QUIET,
    "TanhGrad": _tanh_grad, "SigmoidGrad": _sigmoid_grad, "SqrtGrad": _sqrt_grad,
    "RsqrtGrad": _rsqrt_grad, "ReciprocalGrad": _reciprocal_grad,
    **{op: fns[0] for op, fns in _math.BY_KIND.items()},
    "Equal": np.equal, "NotEqual": np.not_equal, "Select": np.where, "BiasAdd": np.add,
    "Relu": _nn._relu, "Relu6": _nn._relu6, "Elu": _nn._elu, "Softplus": _nn._softplus,
    "LeakyRelu": _leaky_relu, "ReluGrad": _nn._relu_grad, "Relu6Grad": _nn._relu6_grad,
    "EluGrad": _nn._elu_grad, "SoftplusGrad": _nn._softplus_grad,
}
# Integer forms where the floating kernel differs (the pass fuses Div-like ops on floats only).
_INT_FNS = {op: fns[1] for op, fns in _math.BY_KIND.items()}


def compile_program(program, input_dtypes):
    """Returns fn(*inputs) evaluating a fused program with numpy.

    Raises:
        InvalidArgumentError: for an op type the interpreter does not know.
    """
    steps = parse_program(program)
    plan = []
    for j, st in enumerate(steps):
        if st.op == "Cast":
            fn = _cast_to(st.dtype)
        elif st.dtype.is_integer and st.op in _INT_FNS:
            fn = _INT_FNS[st.op]
        else:
            fn = _STEP_FNS.get(st.op)
        if fn is None:
            raise errors.InvalidArgumentError(None, None, f"fused program step {j}: no CPU "
                                              f"interpretation of op {st.op!r}")
        srcs = []
        for a in st.args:
            if a[0] == "c":
                srcs.append((2, literal_value(a)))
            else:
                srcs.append((0 if a[0] == "i" else 1, a[1]))
        plan.append((fn, tuple(srcs)))
    n_in = len(input_dtypes)

    def run(*inputs):
        if len(inputs) != n_in:
            raise errors.InvalidArgumentError(None, None, f"fused program takes {n_in} inputs, got "
                                              f"{len(inputs)}")
        vals = []
        pools = (inputs, vals)
        with np.errstate(all="ignore"):
            for fn, srcs in plan:
                vals.append(fn(*[s if kind == 2 else pools[kind][s] for kind, s in srcs]))
        return vals[-1]
    return run


def _fused_elementwise(ctx):
    run = compile_program(ctx.get_attr("program"), ctx.get_attr("T"))
    dt = ctx.get_attr("out_type").as_numpy_dtype

    def compute(*inputs):
        out = run(*inputs)
        return out if getattr(out, "dtype", None) == dt else np.asarray(out, dt)
    return compute


def _fused_reduction(ctx):
    run = compile_program(ctx.get_attr("program"), ctx.get_attr("T"))
    op = ctx.get_attr("reduction")
    reduce_fn = _math._reduction(op, _math.REDUCTIONS[op])(ctx)
    axis = np.asarray(ctx.get_attr("axis"), np.int64)

    def compute(*inputs):
        return reduce_fn(np.asarray(run(*inputs)), axis)
    return compute


def register(registry, device=DEVICE):
    """Registers the fused-op kernels (the interpreter) on `device`."""
    registry.register("_FusedElementwise", device, _fused_elementwise)
    registry.register("_FusedReduction", device, _fused_reduction)

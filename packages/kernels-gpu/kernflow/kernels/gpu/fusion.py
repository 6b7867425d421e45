"""GPU kernels of the fused ops: a fused program becomes one generated cupy kernel.

`_FusedElementwise` programs (kernflow.core.ops.fused_ops) are translated into the body of one
`cupy.ElementwiseKernel`: one C statement per step, in the step's compute type (float for
float16, rounded back to half after every step as the unfused kernels do); cupy broadcasts the
inputs. `_FusedReduction` puts the same statements in a ``__device__`` function that is the map
expression of a `cupy.ReductionKernel`. Kernels are cached per (program, dtypes) for the process,
so compiling a plan again, in any session, reuses them (cupy caches the compiled binaries too).
"""

from __future__ import annotations

import hashlib
import math
import threading

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.ops.fused_ops import parse_program

DEVICE = "GPU"

# dtype -> (C type of values in memory, C type computed in).
_CTYPES = {
    "float16": ("float16", "float"), "float32": ("float", "float"), "float64": ("double", "double"),
    "int32": ("int", "int"), "int64": ("long long", "long long"), "bool": ("bool", "bool"),
}
# int32 tensors of a GPU device live in host memory (see kernels.py): clusters touching them are
# left to the host kernels, so the pass finds no GPU kernel for them.
SUPPORTED = tuple(_dtypes.as_dtype(n) for n in _CTYPES if n != "int32")


def _f(name: str, ct: str) -> str:
    """The CUDA math function `name` for compute type ct (expf for float, exp for double)."""
    return name + "f" if ct == "float" else name


def _unary_math(name):
    return lambda a, ct, rt: f"{_f(name, ct)}({a[0]})"


def _sigmoid(a, ct, rt):
    x, e = a[0], _f("exp", ct)
    return (f"({x} >= 0 ? ({ct})1 / (({ct})1 + {e}(-{x})) "
            f": {e}({x}) / (({ct})1 + {e}({x})))")


_UNSIGNED = {"int": "unsigned int", "long long": "unsigned long long"}


def _wrapping(fn):
    """Integer arithmetic done in unsigned types: it wraps around as numpy's does (signed overflow
    is undefined in C++, and the compiler exploits that)."""
    def tmpl(a, ct, rt):
        u = _UNSIGNED.get(ct)
        if u is None:
            return fn(a, ct, rt)
        return f"(({ct})({fn([f'(({u}){x})' for x in a], u, u)}))"
    return tmpl


# op type -> fn(argument expressions, operand compute type, result compute type) -> C expression.
# Each matches the op's CPU kernel: NaN propagates through Maximum, Minimum, Relu and Sign as it
# does through numpy's maximum and sign.
_TEMPLATES = {
    "Add": _wrapping(lambda a, ct, rt: f"({a[0]} + {a[1]})"),
    "AddV2": _wrapping(lambda a, ct, rt: f"({a[0]} + {a[1]})"),
    "BiasAdd": _wrapping(lambda a, ct, rt: f"({a[0]} + {a[1]})"),
    "AddN": _wrapping(lambda a, ct, rt: "(" + " + ".join(a) + ")"),
    "Sub": _wrapping(lambda a, ct, rt: f"({a[0]} - {a[1]})"),
    "Mul": _wrapping(lambda a, ct, rt: f"({a[0]} * {a[1]})"),
    "RealDiv": lambda a, ct, rt: f"({a[0]} / {a[1]})",
    "Div": lambda a, ct, rt: f"({a[0]} / {a[1]})",
    "Maximum": lambda a, ct, rt: f"(({a[0]} > {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})",
    "Minimum": lambda a, ct, rt: f"(({a[0]} < {a[1]} || {a[0]} != {a[0]}) ? {a[0]} : {a[1]})",
    "SquaredDifference": _wrapping(lambda a, ct, rt: f"(({a[0]} - {a[1]}) * ({a[0]} - {a[1]}))"),
    "Pow": lambda a, ct, rt: f"{_f('pow', ct)}({a[0]}, {a[1]})",
    "Neg": _wrapping(lambda a, ct, rt: f"(-{a[0]})"),
    "Abs": lambda a, ct, rt: (f"{_f('fabs', ct)}({a[0]})" if ct in ("float", "double") else
                              f"({a[0]} < 0 ? ({ct})(0u - ({_UNSIGNED[ct]}){a[0]}) : {a[0]})"),
    "Square": _wrapping(lambda a, ct, rt: f"({a[0]} * {a[0]})"),
    "Sign": lambda a, ct, rt: f"({a[0]} != {a[0]} ? {a[0]} : ({ct})(({a[0]} > 0) - ({a[0]} < 0)))",
    "Relu": lambda a, ct, rt: f"(({a[0]} > 0 || {a[0]} != {a[0]}) ? {a[0]} : ({ct})0)",
    "Relu6": lambda a, ct, rt: (f"({a[0]} != {a[0]} ? {a[0]} : ({a[0]} < ({ct})0 ? ({ct})0 : "
                                f"({a[0]} > ({ct})6 ? ({ct})6 : {a[0]})))"),
    "Reciprocal": lambda a, ct, rt: f"(({ct})1 / {a[0]})",
    "Rsqrt": lambda a, ct, rt: f"(({ct})1 / {_f('sqrt', ct)}({a[0]}))",
    **{op: _unary_math(op.lower()) for op in ("Sqrt", "Exp", "Log", "Log1p", "Expm1", "Tanh",
                                              "Sin", "Cos", "Floor", "Ceil")},
    "Sigmoid": _sigmoid,
    "Elu": lambda a, ct, rt: f"({a[0]} > 0 ? {a[0]} : {_f('expm1', ct)}({a[0]}))",
    "Softplus": lambda a, ct, rt: (f"(({a[0]} > 0 ? {a[0]} : ({ct})0) + "
                                   f"{_f('log1p', ct)}({_f('exp', ct)}(-{_f('fabs', ct)}({a[0]}))))"),
    "LeakyRelu": lambda a, ct, rt: f"({a[0]} > 0 ? {a[0]} : {a[0]} * {a[1]})",
    "ReluGrad": lambda a, ct, rt: f"({a[0]} * ({ct})({a[1]} > 0))",
    "Relu6Grad": lambda a, ct, rt: f"({a[0]} * ({ct})({a[1]} > 0 && {a[1]} < 6))",
    "EluGrad": lambda a, ct, rt: f"({a[1]} > 0 ? {a[0]} : {a[0]} * ({a[1]} + ({ct})1))",
    "SoftplusGrad": lambda a, ct, rt: f"({a[0]} / (({ct})1 + {_f('exp', ct)}(-{a[1]})))",
    "TanhGrad": lambda a, ct, rt: f"((({ct})1 - {a[0]} * {a[0]}) * {a[1]})",
    "SigmoidGrad": lambda a, ct, rt: f"(((({ct})1 - {a[0]}) * {a[0]}) * {a[1]})",
    "SqrtGrad": lambda a, ct, rt: f"(({a[1]} * ({ct})0.5) / {a[0]})",
    "RsqrtGrad": lambda a, ct, rt: f"(({a[0]} * {a[0]} * {a[0]}) * ({a[1]} * ({ct})-0.5))",
    "ReciprocalGrad": lambda a, ct, rt: f"(({a[0]} * {a[0]}) * (-{a[1]}))",
    "Less": lambda a, ct, rt: f"({a[0]} < {a[1]})",
    "LessEqual": lambda a, ct, rt: f"({a[0]} <= {a[1]})",
    "Greater": lambda a, ct, rt: f"({a[0]} > {a[1]})",
    "GreaterEqual": lambda a, ct, rt: f"({a[0]} >= {a[1]})",
    "Equal": lambda a, ct, rt: f"({a[0]} == {a[1]})",
    "NotEqual": lambda a, ct, rt: f"({a[0]} != {a[1]})",
    "LogicalAnd": lambda a, ct, rt: f"({a[0]} && {a[1]})",
    "LogicalOr": lambda a, ct, rt: f"({a[0]} || {a[1]})",
    "LogicalNot": lambda a, ct, rt: f"(!{a[0]})",
    "Select": lambda a, ct, rt: f"({a[0]} ? {a[1]} : {a[2]})",
    "SelectV2": lambda a, ct, rt: f"({a[0]} ? {a[1]} : {a[2]})",
    "Cast": lambda a, ct, rt: f"(({rt})({a[0]}))",
}


def _literal(dtype, value) -> str:
    name = dtype.name
    ct = _CTYPES[name][1]
    if name == "bool":
        return "true" if value else "false"
    if dtype.is_integer:
        v = int(value)
        if v == -(1 << 63):
            return "(-9223372036854775807LL - 1)"
        return f"(({ct}){v}{'LL' if name == 'int64' else ''})"
    v = float(value)
    if math.isnan(v):
        return "__int_as_float(0x7fc00000)" if ct == "float" else \
            "__longlong_as_double(0x7ff8000000000000LL)"
    if math.isinf(v):
        inf = "__int_as_float(0x7f800000)" if ct == "float" else \
            "__longlong_as_double(0x7ff0000000000000LL)"
        return inf if v > 0 else f"(-{inf})"
    return f"(({ct}){v!r})"


def translate(program, input_dtypes) -> tuple[list[str], str, str]:
    """Translates a fused program into C statements.

    Args:
        program: the `program` attr (list of step strings).
        input_dtypes: DType of each input; inputs are named in0, in1, ... in the C code.

    Returns:
        (statements, name of the result variable, its compute type).

    Raises:
        InvalidArgumentError: for an op or dtype the code generator does not handle.
    """
    steps = parse_program(program)
    lines = []
    types = {}
    for k, dt in enumerate(input_dtypes):
        dt = _dtypes.as_dtype(dt).base_dtype
        if dt.name not in _CTYPES:
            raise errors.InvalidArgumentError(None, None, f"fused kernel: input {k} has dtype "
                                              f"{dt.name}, not supported on GPU")
        ct = _CTYPES[dt.name][1]
        lines.append(f"const {ct} x{k} = ({ct})in{k};")
    for j, st in enumerate(steps):
        tmpl = _TEMPLATES.get(st.op)
        if tmpl is None or st.dtype.name not in _CTYPES:
            raise errors.InvalidArgumentError(None, None, f"fused kernel step {j}: no GPU code for "
                                              f"{st.op} with result dtype {st.dtype.name}")
        args, operand = [], None
        for a in st.args:
            if a[0] == "c":
                args.append(_literal(a[1], a[2]))
                operand = a[1]
            else:
                args.append(f"x{a[1]}" if a[0] == "i" else f"t{a[1]}")
                operand = _dtypes.as_dtype(input_dtypes[a[1]]).base_dtype if a[0] == "i" \
                    else types[a[1]]
        ct = _CTYPES[operand.name][1]
        rt = _CTYPES[st.dtype.name][1]
        expr = tmpl(args, ct, rt)
        if st.dtype.name == "float16":  # round as the unfused half kernel would
            expr = f"(float)(float16)({expr})"
        lines.append(f"const {rt} t{j} = {expr};")
        types[j] = st.dtype
    last = len(steps) - 1
    return lines, f"t{last}", _CTYPES[steps[-1].dtype.name][1]


_lock = threading.Lock()
_cache: dict = {}


def _name(kind, key) -> str:
    return f"kf_{kind}_{hashlib.sha1(repr(key).encode()).hexdigest()[:16]}"


def _params(input_dtypes, out_name, out_type) -> tuple[str, str]:
    ins = ", ".join(f"{_dtypes.as_dtype(t).base_dtype.name} in{k}" for k, t in enumerate(input_dtypes))
    return ins, f"{_dtypes.as_dtype(out_type).name} {out_name}"


def elementwise_kernel(program, input_dtypes, out_type):
    """The (cached) cupy.ElementwiseKernel of a `_FusedElementwise` program."""
    import cupy
    key = ("ew", tuple(program), tuple(_dtypes.as_dtype(t).name for t in input_dtypes),
           _dtypes.as_dtype(out_type).name)
    with _lock:
        kern = _cache.get(key)
        if kern is None:
            lines, res, _ = translate(program, input_dtypes)
            mem = _CTYPES[_dtypes.as_dtype(out_type).name][0]
            lines.append(f"y = ({mem})({res});")
            ins, outs = _params(input_dtypes, "y", out_type)
            kern = _cache[key] = cupy.ElementwiseKernel(ins, outs, "\n".join(lines),
                                                        name=_name("fused", key))
    return kern


_REDUCE = {  # reduction -> reduce_expr (NaN propagates, as through numpy's max)
    "Sum": "a + b",
    "Mean": "a + b",
    "Max": "(a > b || a != a) ? a : b",
    "Min": "(a < b || a != a) ? a : b",
}
# Identities of Max and Min per compute type: what the CPU kernel gives for an empty reduction.
_LOWEST = {"float": "__int_as_float(0xff800000)",
           "double": "__longlong_as_double(0xfff0000000000000LL)",
           "int": "(-2147483647 - 1)", "long long": "(-9223372036854775807LL - 1)"}
_HIGHEST = {"float": "__int_as_float(0x7f800000)",
            "double": "__longlong_as_double(0x7ff0000000000000LL)",
            "int": "2147483647", "long long": "9223372036854775807LL"}


def reduction_kernel(program, input_dtypes, out_type, reduction):
    """The (cached) cupy.ReductionKernel of a `_FusedReduction` program."""
    import cupy
    out = _dtypes.as_dtype(out_type)
    key = ("red", tuple(program), tuple(_dtypes.as_dtype(t).name for t in input_dtypes), out.name,
           reduction)
    with _lock:
        kern = _cache.get(key)
        if kern is None:
            lines, res, ct = translate(program, input_dtypes)
            fn = _name("map", key)
            args = ", ".join(f"{_CTYPES[_dtypes.as_dtype(t).base_dtype.name][0]} in{k}"
                             for k, t in enumerate(input_dtypes))
            body = "\n    ".join(lines)
            preamble = f"__device__ {ct} {fn}({args}) {{\n    {body}\n    return {res};\n}}\n"
            call = f"{fn}({', '.join(f'in{k}' for k in range(len(input_dtypes)))})"
            reduce_expr = _REDUCE[reduction]
            identity = {"Max": _LOWEST, "Min": _HIGHEST}.get(reduction, {}).get(ct, "0")
            mem = _CTYPES[out.name][0]
            if reduction == "Mean":
                post = f"y = ({mem})(a / ({ct})(_in_ind.size() / _out_ind.size()))"
            else:
                post = f"y = ({mem})(a)"
            ins, outs = _params(input_dtypes, "y", out)
            kern = _cache[key] = cupy.ReductionKernel(
                ins, outs, call, reduce_expr, post, identity, name=_name("fusedred", key),
                reduce_type=ct, preamble=preamble)
    return kern


def _broadcast_shape(xs):
    import numpy as np
    return np.broadcast_shapes(*(x.shape for x in xs))


def _fused_elementwise(ctx):
    kern = elementwise_kernel(ctx.get_attr("program"), ctx.get_attr("T"), ctx.get_attr("out_type"))
    return kern


def _fused_elementwise_inplace(ctx):
    kern = elementwise_kernel(ctx.get_attr("program"), ctx.get_attr("T"), ctx.get_attr("out_type"))
    out_dt = ctx.get_attr("out_type").as_numpy_dtype

    def compute(x, *rest):
        if x.dtype == out_dt and x.flags.c_contiguous and _broadcast_shape((x,) + rest) == x.shape:
            return kern(x, *rest, x)
        return kern(x, *rest)
    return compute


def _fused_reduction(ctx):
    op = ctx.get_attr("reduction")
    out_dt = ctx.get_attr("out_type")
    kern = reduction_kernel(ctx.get_attr("program"), ctx.get_attr("T"), out_dt, op)
    ew = elementwise_kernel(ctx.get_attr("program"), ctx.get_attr("T"), out_dt)
    axes = tuple(ctx.get_attr("axis"))
    keep = ctx.get_attr("keep_dims")

    def compute(*xs):
        if not axes:
            return ew(*xs)  # nothing reduced: the program's value itself
        nd = max(x.ndim for x in xs)
        ax = []
        for a in axes:
            if not -nd <= a < nd:
                raise errors.InvalidArgumentError(
                    None, None, f"{op} {ctx.name}: Invalid reduction dimension {a} for input with "
                                f"{nd} dimensions")
            ax.append(a % nd)
        return kern(*xs, axis=tuple(sorted(set(ax))), keepdims=keep)
    return compute


def _current_device(factory):
    """Makes a kernel of a GPU other than 0 run with that GPU current."""
    def wrapped(ctx):
        compute = factory(ctx)
        if getattr(ctx.device, "ordinal", 0) == 0:
            return compute
        scope = ctx.device.scope

        def run(*args):
            with scope():
                return compute(*args)
        return run
    return wrapped


def register(registry, device=DEVICE):
    """Registers the fused-op kernels on `device` (cupy code generated per program)."""
    numeric = tuple(t for t in SUPPORTED if t != _dtypes.bool)
    registry.register("_FusedElementwise", device, _current_device(_fused_elementwise),
                      constraints={"T": SUPPORTED, "out_type": SUPPORTED}, fresh=True,
                      inplace=_current_device(_fused_elementwise_inplace))
    registry.register("_FusedReduction", device, _current_device(_fused_reduction),
                      constraints={"T": SUPPORTED, "out_type": numeric}, fresh=True)

"""Numpy kernels of the math ops (kernflow.core.ops.math_ops).

Most ops map straight to a numpy ufunc (the tables below); ops whose semantics differ between
floating and integer types, or that read attrs, have small factories.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.kernels.cpu import intra_op
from kernflow.kernels.cpu.vectorized import add_reduce

DEVICE = "CPU"

_INEXACT = (_dtypes.float16, _dtypes.float32, _dtypes.float64, _dtypes.complex64, _dtypes.complex128)
_INTEGER = (_dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64, _dtypes.uint8, _dtypes.uint16,
            _dtypes.uint32, _dtypes.uint64)


def _error(msg):
    return errors.InvalidArgumentError(None, None, msg)


def _dims(x) -> str:
    """A shape written as TF writes it: [2,3]."""
    return "[" + ",".join(str(d) for d in np.shape(x)) + "]"


# ---------------------------------------------------------------------------- elementwise helpers
def _quiet(fn):
    """`fn` without numpy's RuntimeWarnings: inf and nan results are intended (as in TF)."""
    def compute(*xs):
        with np.errstate(all="ignore"):
            return fn(*xs)
    compute.__name__ = getattr(fn, "__name__", "compute")
    return compute


def _trunc_div(x, y):
    """Integer division rounding toward zero (C semantics), exact for every integer width."""
    q = np.floor_divide(x, y)
    if q.dtype.kind == "i":
        q += (np.remainder(x, y) != 0) & (np.less(x, 0) != np.less(y, 0))
    return q


def _floor_div(x, y):
    """TF's floating FloorDiv: floor(x / y) (numpy's floor_divide differs, e.g. 1 // 0.1 == 9)."""
    q = np.true_divide(x, y)
    return np.floor(q, out=q) if isinstance(q, np.ndarray) else np.floor(q)


def _rsqrt(x):
    r = np.sqrt(x)
    return np.reciprocal(r, out=r) if isinstance(r, np.ndarray) else np.reciprocal(r)


def _sigmoid(x):
    if x.dtype.kind == "c":
        return np.tanh(x * 0.5) * 0.5 + 0.5
    if x.dtype.kind == "f" and x.dtype.itemsize < 4:     # half precision: computed in float32
        return _sigmoid(x.astype(np.float32)).astype(x.dtype)
    # 1 / (1 + exp(-x)), four cheap passes (logaddexp's form was 7x slower). exp(-x) overflows to
    # inf (quietly: Sigmoid is in QUIET) only where the true result is below the dtype's normal
    # range (x < -87 for float32), and the result is then 0, as TF's Eigen kernel gives.
    e = np.negative(x)
    if not isinstance(e, np.ndarray):
        return 1 / (1 + np.exp(e))
    np.exp(e, out=e)
    np.add(e, 1, out=e)
    return np.reciprocal(e, out=e)


def _squared_difference(x, y):
    d = np.subtract(x, y)
    if d.dtype.kind == "c":
        return d * np.conjugate(d)
    return np.multiply(d, d, out=d) if isinstance(d, np.ndarray) else d * d


def _add_n(*xs):
    if len(xs) == 1:
        return np.copy(xs[0])
    shape = np.shape(xs[0])
    for x in xs[1:]:
        if np.shape(x) != shape:
            raise _error(f"AddN: inputs must have the same shape, got {_dims(xs[0])} and "
                         f"{_dims(x)}")
    out = np.add(xs[0], xs[1])
    for x in xs[2:]:
        out = np.add(out, x, out=out) if isinstance(out, np.ndarray) else out + x
    return out


def _clip_by_value(t, lo, hi):
    out = np.clip(t, lo, hi)
    if np.shape(out) != np.shape(t):
        raise _error(f"ClipByValue: clip_value_min and clip_value_max must broadcast to t's shape "
                     f"{_dims(t)}, got {_dims(lo)} and {_dims(hi)}")
    return out


def _conj(y):
    return np.conjugate(y) if y.dtype.kind == "c" else y


def _into(ufunc, a, b):
    """ufunc(a, b), written into `a` when it is a fresh array (a temporary of the kernel)."""
    return ufunc(a, b, out=a) if isinstance(a, np.ndarray) else ufunc(a, b)


def _tanh_grad(y, dy):
    y = _conj(y)
    t = np.multiply(y, y)
    t = np.subtract(1, t, out=t) if isinstance(t, np.ndarray) else 1 - t
    return _into(np.multiply, t, dy)


def _sigmoid_grad(y, dy):
    y = _conj(y)
    return _into(np.multiply, _into(np.multiply, np.subtract(1, y), y), dy)


def _sqrt_grad(y, dy):
    return _into(np.divide, np.multiply(dy, dy.dtype.type(0.5)), _conj(y))


def _rsqrt_grad(y, dy):
    y = _conj(y)
    t = _into(np.multiply, np.multiply(y, y), y)
    return _into(np.multiply, t, np.multiply(dy, dy.dtype.type(-0.5)))


def _reciprocal_grad(y, dy):
    y = _conj(y)
    return _into(np.multiply, np.multiply(y, y), np.negative(dy))


def _same_shape_grad(op_type, fn):
    """The kernel of a unary op's gradient op: y and dy must have one shape."""
    def factory(ctx):
        name = ctx.name

        def compute(y, dy):
            if np.shape(y) != np.shape(dy):
                raise _error(f"{op_type} {name}: y and dy must have the same shape, got "
                             f"{_dims(y)} and {_dims(dy)}")
            with np.errstate(all="ignore"):
                return fn(y, dy)
        return compute
    return factory


UNARY_GRADS = {
    "TanhGrad": _tanh_grad,
    "SigmoidGrad": _sigmoid_grad,
    "SqrtGrad": _sqrt_grad,
    "RsqrtGrad": _rsqrt_grad,
    "ReciprocalGrad": _reciprocal_grad,
}


def _where(x):
    return np.argwhere(x).astype(np.int64, copy=False)


# op type -> numpy callable taking the op's inputs positionally (any allowed dtype).
ELEMENTWISE = {
    "AddV2": np.add,
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "SquaredDifference": _squared_difference,
    "Neg": np.negative,
    "Abs": np.absolute,
    "ComplexAbs": np.absolute,
    "Sign": np.sign,
    "Square": np.square,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tanh": np.tanh,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Conj": np.conjugate,
    "Less": np.less,
    "LessEqual": np.less_equal,
    "Greater": np.greater,
    "GreaterEqual": np.greater_equal,
    "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
    "LogicalNot": np.logical_not,
    "SelectV2": np.where,
    "Where": _where,
    "AddN": _add_n,
    "ClipByValue": _clip_by_value,
}

# Ops whose inf/nan results are routine (log(0), sqrt(-1), overflow): no numpy warnings.
QUIET = {
    "Exp": np.exp,
    "Expm1": np.expm1,
    "Log": np.log,
    "Log1p": np.log1p,
    "Sqrt": np.sqrt,
    "Rsqrt": _rsqrt,
    "Sigmoid": _sigmoid,
    "Pow": np.power,
}

_SCALAR_DIV_TYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_SCALAR_OPERAND = frozenset({np.ndarray, np.float32, np.float64})
_F32_MAX = float(np.finfo(np.float32).max)


def _real_div(x, y):
    """x / y for floating T, quiet. Two nonzero 0-d operands (a mean's 1/size) divide as Python
    floats, without numpy's error-state context (~3 us): a double quotient of float32 values
    rounds to the correctly rounded float32 quotient, so the result is the same."""
    if type(x) in _SCALAR_OPERAND and type(y) in _SCALAR_OPERAND and not x.ndim and not y.ndim \
            and x.dtype == y.dtype and x.dtype in _SCALAR_DIV_TYPES and y:
        q = float(x) / float(y)
        if -_F32_MAX < q < _F32_MAX or x.dtype.itemsize == 8:   # else float32 overflows: numpy's path
            return x.dtype.type(q)
    with np.errstate(all="ignore"):
        return np.true_divide(x, y)


# op type -> (kernel for floating/complex T, kernel for integer T).
BY_KIND = {
    "RealDiv": (np.true_divide, _trunc_div),
    "Div": (np.true_divide, _trunc_div),
    "FloorDiv": (_floor_div, np.floor_divide),
    "FloorMod": (np.remainder, np.remainder),
    "Reciprocal": (np.reciprocal, np.reciprocal),
    "Round": (np.rint, np.positive),
}
# Their integer kernels reject a zero divisor (the last input), as TF's do; floating ones are quiet.
DIVISIONS = {"RealDiv", "Div", "FloorDiv", "FloorMod", "Reciprocal"}


def _int_division(op_type, fn):
    def factory(ctx):
        name = ctx.name

        def compute(*xs):
            d = xs[-1]
            if not (d.all() if hasattr(d, "all") else np.all(d)):
                raise _error(f"{op_type} {name}: Integer division by zero")
            return fn(*xs)
        return compute
    return factory


def _equality(ufunc, mismatch):
    """Equal/NotEqual: incompatible shapes give a scalar `mismatch` unless the attr forbids it."""
    def factory(ctx):
        if ctx.get_attr("incompatible_shape_error"):
            return ufunc

        def compute(x, y):
            try:
                return ufunc(x, y)
            except ValueError:
                return np.bool_(mismatch)
        return compute
    return factory


def _select(ctx):
    name = ctx.name

    def compute(c, x, y):
        if np.shape(x) != np.shape(y):
            raise _error(f"Select {name}: 'then' and 'else' must have the same size. but received: "
                         f"{_dims(x)} vs. {_dims(y)}")
        cs, xs = np.shape(c), np.shape(x)
        if cs == xs or not cs:
            return np.where(c, x, y)
        if len(cs) == 1 and xs and cs[0] == xs[0]:
            return np.where(np.reshape(c, cs + (1,) * (len(xs) - 1)), x, y)
        raise _error(f"Select {name}: 'condition' must be a scalar, a vector of size {xs[0] if xs else 1}"
                     f" or of shape {_dims(x)}, got shape {_dims(c)}")
    return compute


def _cast(ctx):
    src, dst = ctx.get_attr("SrcT"), ctx.get_attr("DstT").as_numpy_dtype
    if src.is_complex and not np.issubdtype(dst, np.complexfloating):
        return lambda x: np.real(x).astype(dst)
    if src.is_floating and np.dtype(dst).kind in "iu":
        return _quiet(lambda x: x.astype(dst))
    return lambda x: x.astype(dst)


# ---------------------------------------------------------------------------- matmul
def _matmul_cost(inputs) -> bool:
    a, b = inputs[0], inputs[1]
    if np.ndim(a) < 2 or np.ndim(b) < 2:
        return False
    k = a.shape[-1] if a.shape[-1] in b.shape[-2:] else a.shape[-2]
    return a.size * (b.size // max(k, 1)) > 1 << 22


def _matmul(ctx):
    ta, tb, name = ctx.get_attr("transpose_a"), ctx.get_attr("transpose_b"), ctx.name

    def check(a, b):
        if np.ndim(a) != 2 or np.ndim(b) != 2:
            raise _error(f"MatMul {name}: In[0] and In[1] must be matrices, got shapes "
                         f"{_dims(a)} and {_dims(b)}")
        raise _error(f"MatMul {name}: Matrix size-incompatible: In[0]: {_dims(a)}, In[1]: {_dims(b)}")

    # One variant per transpose pair, so the hot path is the matmul and one shape test.
    if not ta and not tb:
        def compute(a, b):
            if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
                check(a, b)
            return intra_op.matmul(a, b)
    elif ta and not tb:
        def compute(a, b):
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0]:
                check(a, b)
            return intra_op.matmul(a.T, b)
    elif not ta and tb:
        def compute(a, b):
            if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
                check(a, b)
            return intra_op.matmul(a, b.T)
    else:
        def compute(a, b):
            if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[1]:
                check(a, b)
            return intra_op.matmul(a.T, b.T)
    return compute


def _adjoint(x):
    x = np.swapaxes(x, -1, -2)
    return np.conjugate(x) if x.dtype.kind == "c" else x


def _batch_matmul(ctx):
    adj_x, adj_y, name = ctx.get_attr("adj_x"), ctx.get_attr("adj_y"), ctx.name

    def compute(a, b):
        if np.ndim(a) < 2 or np.ndim(b) < 2:
            raise _error(f"BatchMatMulV2 {name}: In[0] and In[1] must have rank >= 2, got shapes "
                         f"{_dims(a)} and {_dims(b)}")
        x = _adjoint(a) if adj_x else a
        y = _adjoint(b) if adj_y else b
        if x.shape[-1] != y.shape[-2]:
            raise _error(f"BatchMatMulV2 {name}: Matrix size-incompatible: In[0]: {_dims(a)}, "
                         f"In[1]: {_dims(b)}")
        try:
            return intra_op.batch_matmul(x, y)
        except ValueError:
            raise _error(f"BatchMatMulV2 {name}: In[0] and In[1] must have compatible batch "
                         f"dimensions: {_dims(a)} vs. {_dims(b)}") from None
    return compute


# ---------------------------------------------------------------------------- reductions
def _axes(axis):
    a = np.asarray(axis)
    return int(a) if a.ndim == 0 else tuple(a.reshape(-1).tolist())


# np.add.reduce directly: np.sum/np.mean add several microseconds of Python dispatch per call.
def _sum(x, ax, kd, dt):
    if dt is np.float16:  # accumulate halves in float32, as TF does
        return np.add.reduce(x, axis=ax, keepdims=kd, dtype=np.float32).astype(dt)
    return add_reduce(x, ax, kd, dt)


_INT_TYPES = frozenset(t.type for t in map(np.dtype, "bBhHiIlLqQ"))


def _mean(x, ax, kd, dt):
    if dt in _INT_TYPES:
        s = np.add.reduce(x, axis=ax, keepdims=kd, dtype=dt)
        n = x.size // np.size(s) if np.size(s) else 1
        return _trunc_div(s, dt(n)) if n else np.zeros_like(s)
    if x.size == 0:  # every output element is the mean of an empty slice
        return np.full_like(np.add.reduce(x, axis=ax, keepdims=kd, dtype=dt), np.nan)
    if dt is np.float16:
        s = np.add.reduce(x, axis=ax, keepdims=kd, dtype=np.float32)
        return (s / np.float32(x.size // max(np.size(s), 1))).astype(dt)
    s = add_reduce(x, ax, kd, dt)
    # s is an array or (a full reduction) a numpy scalar; both divide in dt.
    n = x.size // max(s.size, 1)
    d = _DIVISORS.get((dt, n))
    if d is None:
        d = dt(n)
        if len(_DIVISORS) < 4096:
            _DIVISORS[(dt, n)] = d
    return s / d


# Mean's divisors by (numpy type, count), a bounded memo: making the numpy scalar costs ~1 us.
_DIVISORS: dict = {}


def _extremum(fn, pick):
    def reduce(x, ax, kd, dt):
        try:
            return fn(x, axis=ax, keepdims=kd)
        except ValueError:
            if np.size(x):
                raise
            kind = np.dtype(dt).kind
            init = (-np.inf if pick == "min" else np.inf) if kind == "f" else getattr(np.iinfo(dt), pick)
            return fn(x, axis=ax, keepdims=kd, initial=init)
    return reduce


REDUCTIONS = {  # op type -> fn(x, axes, keep_dims, output numpy type)
    "Sum": _sum,
    "Prod": lambda x, ax, kd, dt: np.prod(x, axis=ax, keepdims=kd, dtype=dt),
    "Mean": _mean,
    "Max": _extremum(np.max, "min"),
    "Min": _extremum(np.min, "max"),
    "Any": lambda x, ax, kd, dt: np.any(x, axis=ax, keepdims=kd),
    "All": lambda x, ax, kd, dt: np.all(x, axis=ax, keepdims=kd),
}


def _last_converted(convert):
    """fn(axis) -> convert(axis), remembering the last axis array: an axis input is usually the
    same constant array every step (the reference held keeps its identity from being reused)."""
    last = [(None, None)]   # one slot, replaced whole: concurrent steps share the kernel

    def get(axis):
        seen, value = last[0]
        if axis is seen:
            return value
        value = convert(axis)
        last[0] = (axis, value)
        return value
    return get


def _reduction(op_type, fn):
    def factory(ctx):
        kd, dt, name = ctx.get_attr("keep_dims"), ctx.output_dtypes[0].as_numpy_dtype, ctx.name

        axes = _last_converted(_axes)

        def compute(x, axis):
            ax = axes(axis)
            if ax == () and isinstance(x, np.ndarray) and x.dtype == dt:
                return x.view()  # nothing reduced (e.g. a broadcast gradient's empty axes)
            try:
                return fn(x, ax, kd, dt)
            except np.exceptions.AxisError as e:
                raise _error(f"{op_type} {name}: Invalid reduction dimension in "
                             f"{np.reshape(axis, -1).tolist()} for input with {np.ndim(x)} "
                             f"dimensions ({e})") from None
        return compute
    return factory


def _arg(method: str):
    """ArgMax/ArgMin through the array's own method (np.argmax's dispatch costs 2.4 us more on a
    64x10 batch), cast only when `output_type` is not the index type the method returns."""
    def factory(ctx):
        out = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        cast = out != np.dtype(np.intp)
        as_int = _last_converted(int)

        def compute(x, axis):
            r = getattr(x, method)(as_int(axis))
            return r.astype(out) if cast else r
        return compute
    return factory


def _scan(op_type, accumulate, identity):
    def factory(ctx):
        excl, rev = ctx.get_attr("exclusive"), ctx.get_attr("reverse")
        dt, name = ctx.output_dtypes[0].as_numpy_dtype, ctx.name

        def compute(x, axis):
            nd, ax = np.ndim(x), int(axis)
            if not -nd <= ax < nd:
                raise _error(f"{op_type} {name}: Expected scan axis in the range [{-nd}, {nd}), but "
                             f"got {ax}")
            ax %= nd
            if rev:
                x = np.flip(x, ax)
            out = accumulate(x, axis=ax, dtype=dt)
            if excl:
                shifted = np.empty_like(out)
                head = (slice(None),) * ax
                shifted[head + (slice(0, 1),)] = identity
                shifted[head + (slice(1, None),)] = out[head + (slice(None, -1),)]
                out = shifted
            return np.flip(out, ax) if rev else out
        return compute
    return factory


def _inplace(ufunc):
    """ufunc(x, ...) written into x's buffer when shapes and dtypes allow, else allocated."""
    def compute(x, *rest):
        try:
            return ufunc(x, *rest, out=x)
        except (TypeError, ValueError):  # a numpy scalar, broadcasting into x, read-only, casting
            return ufunc(x, *rest)
    return compute


def _quiet_inplace(ufunc):
    def compute(x, *rest):
        with np.errstate(all="ignore"):
            try:
                return ufunc(x, *rest, out=x)
            except (TypeError, ValueError):
                return ufunc(x, *rest)
    return compute


# Elementwise kernels that may reuse their first input's buffer (buffer forwarding).
INPLACE = {"AddV2", "Sub", "Mul", "Maximum", "Minimum", "Neg", "Square", "Sin", "Cos", "Tanh",
           "Floor", "Ceil", "Abs"}
QUIET_INPLACE = {"Exp", "Expm1", "Log", "Log1p", "Sqrt"}
# Ufunc kernels always return new arrays (or numpy scalars): safe producers for forwarding.
FRESH = set(ELEMENTWISE) - {"AddN", "ClipByValue", "Where", "SelectV2", "Conj", "SquaredDifference"}


def register(registry, device=DEVICE):
    for op, fn in ELEMENTWISE.items():
        registry.register_simple(op, device, fn, fresh=op in FRESH,
                                 inplace_fn=_inplace(fn) if op in INPLACE else None)
    for op, fn in QUIET.items():
        registry.register_simple(op, device, _quiet(fn), fresh=True,
                                 inplace_fn=_quiet_inplace(fn) if op in QUIET_INPLACE else None)
    for op, (inexact_fn, int_fn) in BY_KIND.items():
        inexact = _quiet(inexact_fn) if op in DIVISIONS else inexact_fn
        if inexact_fn is np.true_divide:
            inexact = _real_div
        registry.register_simple(op, device, inexact, constraints={"T": _INEXACT}, fresh=True,
                                 inplace_fn=_quiet_inplace(inexact_fn) if op == "RealDiv" else None)
        factory = _int_division(op, int_fn) if op in DIVISIONS else (lambda ctx, f=int_fn: f)
        registry.register(op, device, factory, constraints={"T": _INTEGER})
    for op, fn in UNARY_GRADS.items():
        registry.register(op, device, _same_shape_grad(op, fn))
    registry.register("Equal", device, _equality(np.equal, False))
    registry.register("NotEqual", device, _equality(np.not_equal, True))
    registry.register("Select", device, _select)
    registry.register("Cast", device, _cast)
    registry.register("MatMul", device, _matmul, expensive=_matmul_cost, fresh=True)
    registry.register("BatchMatMulV2", device, _batch_matmul, expensive=_matmul_cost, fresh=True)
    for op, fn in REDUCTIONS.items():
        registry.register(op, device, _reduction(op, fn))
    registry.register("ArgMax", device, _arg("argmax"))
    registry.register("ArgMin", device, _arg("argmin"))
    registry.register("Cumsum", device, _scan("Cumsum", np.cumsum, 0))
    registry.register("Cumprod", device, _scan("Cumprod", np.cumprod, 1))

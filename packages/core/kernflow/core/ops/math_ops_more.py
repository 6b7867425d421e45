"""The remaining TF1 math families: special functions (incomplete gamma and beta, zeta, polygamma,
Bessel, inverse error functions), the FFT ops, the newer random ops (gamma, Poisson, stateless) and
the remaining linear algebra (LU, matrix functions, tridiagonal systems).

This module declares every OpDef of those families and the wrappers of the special functions and of
the linear algebra; the FFT and tf.signal wrappers are in kernflow.core.signal, the random ones in
kernflow.core.random (the TF1 top-level names of both are re-exported here, at the bottom). CPU
kernels are in kernflow.kernels.cpu.math_more (host only), gradients in
kernflow.core.grads.math_more_grad.
"""

from __future__ import annotations

import importlib

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes

_S = _ts.TensorShape
_FLOAT = "half, float, double"
_SEEDS = ["seed: int = 0", "seed2: int = 0"]


# ---------------------------------------------------------------------------- shape functions
def _betainc_shape(op):
    out, scalars = _S(None), 0
    for what, t in zip(("a", "b", "x"), op.inputs):
        if t.shape.rank == 0:
            scalars += 1
            continue
        if not out.is_compatible_with(t.shape):
            raise ValueError(f"Shapes of a, b and x must be equal or scalar for '{op.name}' (op: Betainc): "
                             f"{what} has shape {t.shape}, the others {out}")
        out = out.merge_with(t.shape)
    return [_S([]) if scalars == 3 else out]


def _fft_shape(k):
    def shape_fn(op):
        s = op.inputs[0].shape.with_rank_at_least(k)
        return [s]
    return shape_fn


def _fft_lengths(op, k):
    op.inputs[1].shape.with_rank(1)
    n = tensor_util.constant_value(op.inputs[1])
    if n is not None and n.size != k:
        raise ValueError(f"'{op.name}' (op: {op.type}): fft_length must have {k} elements, got "
                         f"{n.tolist()}")
    return [None] * k if n is None else [int(v) for v in n]


def _rfft_shape(k, inverse):
    def shape_fn(op):
        s = op.inputs[0].shape.with_rank_at_least(k)
        n = _fft_lengths(op, k)
        if s.rank is None:
            return [s]
        if not inverse and n[-1] is not None:
            n[-1] = n[-1] // 2 + 1
        return [_S(list(s.dim_values[:-k]) + n)]
    return shape_fn


def _fftnd_shape(real):
    def shape_fn(op):
        s = op.inputs[0].shape
        n = tensor_util.constant_value(op.inputs[1])
        axes = tensor_util.constant_value(op.inputs[2])
        if s.rank is None or n is None or axes is None:
            return [_S(None) if s.rank is None else _S([None] * s.rank)]
        dims = list(s.dim_values)
        for i, (a, length) in enumerate(zip(axes.tolist(), n.tolist())):
            dims[a] = length // 2 + 1 if real and i == len(axes) - 1 else length
        return [_S(dims)]
    return shape_fn


def _shape_then(i_extra=None):
    """Output = the `shape` input's value (input 0), then input i_extra's shape if given."""
    def shape_fn(op):
        head = tensor_util.constant_value_as_shape(op.inputs[0])
        if i_extra is None:
            return [head]
        return [head.concatenate(op.inputs[i_extra].shape)]
    return shape_fn


def _seed_shape(op, i):
    op.inputs[i].shape.with_rank(1).merge_with(_S([2]))


def _stateless_shape(op):
    _seed_shape(op, 1)
    return [tensor_util.constant_value_as_shape(op.inputs[0])]


def _stateless_multinomial_shape(op):
    _seed_shape(op, 2)
    logits = op.inputs[0].shape.with_rank(2)
    n = tensor_util.constant_value(op.inputs[1])
    return [_S([logits.dim_values[0], None if n is None else int(n)])]


def _lu_shape(op):
    s = op.inputs[0].shape.with_rank_at_least(2)
    if s.rank is None:
        return [s, _S(None)]
    m, n = s.dim_values[-2:]
    if m is not None and n is not None and m != n:
        raise ValueError(f"'{op.name}' (op: Lu): input must be square matrices, got shape {s}")
    return [s, _S(s.dim_values[:-1])]


def _square_shape(op):
    return _lu_shape(op)[:1]


def _tridiag_matmul_shape(op):
    return [op.inputs[3].shape.with_rank_at_least(2)]


def _tridiag_solve_shape(op):
    d = op.inputs[0].shape.with_rank_at_least(2)
    if d.rank is not None and d.dim_values[-2] not in (None, 3):
        raise ValueError(f"'{op.name}' (op: TridiagonalSolve): diagonals must have shape [..., 3, M], "
                         f"got {d}")
    return [op.inputs[1].shape.with_rank_at_least(2)]


# ---------------------------------------------------------------------------- OpDefs
register_op("Betainc", inputs=["a: T", "b: T", "x: T"], outputs=["z: T"], attrs=["T: {float, double}"],
            shape_fn=_betainc_shape,
            doc="Returns the regularized incomplete beta function I_x(a, b) elementwise; a, b and x have "
                "equal shapes or are scalars.")
_SPECIAL_BINARY = [  # (op type, input names, allowed T, what)
    ("Igamma", ("a", "x"), _FLOAT, "the regularized lower incomplete gamma function P(a, x)"),
    ("Igammac", ("a", "x"), _FLOAT, "the regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)"),
    ("IgammaGradA", ("a", "x"), "float, double", "the derivative of Igamma(a, x) with respect to a"),
    ("Zeta", ("x", "q"), "float, double", "the Hurwitz zeta function zeta(x, q)"),
    ("Polygamma", ("a", "x"), "float, double", "the polygamma function psi^(a)(x) of integer order a"),
    ("NextAfter", ("x1", "x2"), "float, double", "the next representable value of x1 in the direction of x2"),
    ("RandomGammaGrad", ("alpha", "sample"), "float, double",
     "d sample / d alpha of Gamma(alpha, 1) samples (implicit reparameterization)"),
]
for _name, (_a, _b), _types, _what in _SPECIAL_BINARY:
    register_op(_name, inputs=[f"{_a}: T", f"{_b}: T"], outputs=["z: T"], attrs=[f"T: {{{_types}}}"],
                shape_fn=common_shapes.broadcast_binary, doc=f"Returns {_what}, with numpy broadcasting.")
_SPECIAL_UNARY = [
    ("BesselI0", "the modified Bessel function of order 0, I0(x)"),
    ("BesselI0e", "the exponentially scaled modified Bessel function exp(-|x|) I0(x)"),
    ("BesselI1", "the modified Bessel function of order 1, I1(x)"),
    ("BesselI1e", "the exponentially scaled modified Bessel function exp(-|x|) I1(x)"),
    ("Erfinv", "the inverse error function: erf(erfinv(x)) = x on (-1, 1)"),
    ("Ndtri", "the inverse of the standard normal CDF (the quantile function) on (0, 1)"),
]
for _name, _what in _SPECIAL_UNARY:
    register_op(_name, inputs=["x: T"], outputs=["y: T"], attrs=[f"T: {{{_FLOAT}}}"],
                shape_fn=common_shapes.unchanged, doc=f"Returns {_what} elementwise.")

_C = "Tcomplex: {complex64, complex128} = complex64"
_R = "Treal: {float, double} = float"
for _k, _sfx in ((1, ""), (2, "2D"), (3, "3D")):
    for _inv in (False, True):
        _which = "inverse " if _inv else ""
        register_op(f"{'I' if _inv else ''}FFT{_sfx}", inputs=["input: Tcomplex"],
                    outputs=["output: Tcomplex"], attrs=[_C], shape_fn=_fft_shape(_k),
                    doc=f"The {_which}{_k}-D discrete Fourier transform over the inner-most {_k} dimensions"
                        + (" (scaled by 1/n)." if _inv else "."))
    register_op(f"RFFT{_sfx}", inputs=["input: Treal", "fft_length: int32"], outputs=["output: Tcomplex"],
                attrs=[_R, _C], shape_fn=_rfft_shape(_k, False),
                doc=f"The {_k}-D FFT of a real signal over its inner-most {_k} dimensions, each cropped or "
                    "zero-padded to fft_length; the last dimension keeps fft_length[-1] // 2 + 1 terms.")
    register_op(f"IRFFT{_sfx}", inputs=["input: Tcomplex", "fft_length: int32"], outputs=["output: Treal"],
                attrs=[_R, _C], shape_fn=_rfft_shape(_k, True),
                doc=f"The inverse of RFFT{_sfx}: a real signal of fft_length over the inner-most {_k} "
                    "dimensions from their Hermitian half-spectrum.")
for _name, _in, _out, _real, _what in (
        ("FFTND", "Tcomplex", "Tcomplex", False, "the N-D discrete Fourier transform"),
        ("IFFTND", "Tcomplex", "Tcomplex", False, "the N-D inverse DFT (scaled by 1/n)"),
        ("RFFTND", "Treal", "Tcomplex", True, "the N-D FFT of a real signal (last axis: n // 2 + 1 terms)"),
        ("IRFFTND", "Tcomplex", "Treal", False, "the inverse of RFFTND, a real signal")):
    register_op(_name, inputs=[f"input: {_in}", "fft_length: int32", "axes: int32"],
                outputs=[f"output: {_out}"],
                attrs=[_C] if _in == _out else [_R, _C], shape_fn=_fftnd_shape(_real),
                doc=f"Returns {_what} over `axes`, each cropped or zero-padded to fft_length.")

register_op("RandomGamma", inputs=["shape: S", "alpha: T"], outputs=["output: T"],
            attrs=_SEEDS + ["S: {int32, int64}", f"T: {{{_FLOAT}}}"], shape_fn=_shape_then(1), stateful=True,
            doc="Draws Gamma(alpha, 1) samples: shape `shape` + alpha.shape, one draw per alpha each.")
register_op("RandomPoissonV2", inputs=["shape: S", "rate: R"], outputs=["output: dtype"],
            attrs=_SEEDS + ["S: {int32, int64}", "R: {half, float, double, int32, int64} = double",
                            "dtype: {half, float, double, int32, int64} = int64"],
            shape_fn=_shape_then(1), stateful=True,
            doc="Draws Poisson(rate) samples: shape `shape` + rate.shape.")
_STATELESS_ATTRS = ["T: {int32, int64} = int32", "Tseed: {int32, int64} = int64"]
for _name, _what in (("StatelessRandomUniform", "uniform over [0, 1)"),
                     ("StatelessRandomNormal", "standard normal"),
                     ("StatelessTruncatedNormal", "standard normal truncated to [-2, 2]")):
    register_op(_name, inputs=["shape: T", "seed: Tseed"], outputs=["output: dtype"],
                attrs=[f"dtype: {{{_FLOAT}}} = float"] + _STATELESS_ATTRS, shape_fn=_stateless_shape,
                doc=f"Outputs {_what} values, a deterministic function of `seed` (shape [2]).")
register_op("StatelessRandomUniformInt", inputs=["shape: T", "seed: Tseed", "minval: dtype", "maxval: dtype"],
            outputs=["output: dtype"], attrs=["dtype: {int32, int64}"] + _STATELESS_ATTRS,
            shape_fn=_stateless_shape,
            doc="Outputs integers uniform over [minval, maxval), a deterministic function of `seed`.")
register_op("StatelessRandomUniformFullInt", inputs=["shape: T", "seed: Tseed"], outputs=["output: dtype"],
            attrs=["dtype: {int32, int64, uint32, uint64} = uint64"] + _STATELESS_ATTRS,
            shape_fn=_stateless_shape,
            doc="Outputs integers uniform over the whole range of dtype, a deterministic function of `seed`.")
register_op("StatelessMultinomial", inputs=["logits: T", "num_samples: int32", "seed: Tseed"],
            outputs=["output: output_dtype"],
            attrs=["T: {half, float, double, int32, int64}", "Tseed: {int32, int64} = int64",
                   "output_dtype: {int32, int64} = int64"], shape_fn=_stateless_multinomial_shape,
            doc="Draws categorical samples [batch_size, num_samples] from logits [batch_size, num_classes], "
                "a deterministic function of `seed`.")
register_op("StatelessRandomBinomial", inputs=["shape: S", "seed: Tseed", "counts: T", "probs: T"],
            outputs=["output: dtype"],
            attrs=["S: {int32, int64}", "Tseed: {int32, int64} = int64",
                   "T: {half, float, double, int32, int64} = double",
                   "dtype: {half, float, double, int32, int64} = int64"], shape_fn=_stateless_shape,
            doc="Draws Binomial(counts, probs) samples (counts and probs broadcast to `shape`), a "
                "deterministic function of `seed`.")
register_op("StatelessRandomGammaV2", inputs=["shape: T", "seed: Tseed", "alpha: dtype"],
            outputs=["output: dtype"], attrs=[f"dtype: {{{_FLOAT}}}"] + _STATELESS_ATTRS,
            shape_fn=_stateless_shape,
            doc="Draws Gamma(alpha, 1) samples (alpha broadcasts to `shape`), a deterministic function of "
                "`seed`.")
register_op("StatelessRandomPoisson", inputs=["shape: T", "seed: Tseed", "lam: Rtype"],
            outputs=["output: dtype"],
            attrs=["Rtype: {half, float, double, int32, int64}", "dtype: {half, float, double, int32, int64}"]
            + _STATELESS_ATTRS, shape_fn=_stateless_shape,
            doc="Draws Poisson(lam) samples (lam broadcasts to `shape`), a deterministic function of `seed`.")
register_op("StatelessParameterizedTruncatedNormal",
            inputs=["shape: S", "seed: Tseed", "means: dtype", "stddevs: dtype", "minvals: dtype",
                    "maxvals: dtype"], outputs=["output: dtype"],
            attrs=["S: {int32, int64}", "Tseed: {int32, int64} = int64", "dtype: {half, float, double}"],
            shape_fn=_stateless_shape,
            doc="Draws Normal(means, stddevs) samples truncated to [minvals, maxvals] (the four broadcast "
                "to `shape`; stddevs > 0, minvals < maxvals, either may be infinite), a deterministic "
                "function of `seed`.")

_LT = "T: {double, float, half, complex64, complex128}"
register_op("Lu", inputs=["input: T"], outputs=["lu: T", "p: output_idx_type"],
            attrs=[_LT, "output_idx_type: {int32, int64} = int32"], shape_fn=_lu_shape,
            doc="LU decomposition with partial pivoting of square matrices: lu holds L (unit diagonal, "
                "below) and U (on and above the diagonal); p is the row permutation, input[p] = L @ U.")
register_op("MatrixSquareRoot", inputs=["input: T"], outputs=["output: T"], attrs=[_LT],
            shape_fn=_square_shape,
            doc="Returns the principal square root of square matrices (their eigenvalues off the "
                "closed negative real axis).")
register_op("MatrixExponential", inputs=["input: T"], outputs=["output: T"], attrs=[_LT],
            shape_fn=_square_shape,
            doc="Returns the matrix exponential of square matrices (scaling and squaring with a Pade "
                "approximant).")
register_op("MatrixLogarithm", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: {complex64, complex128}"],
            shape_fn=_square_shape, doc="Returns the principal logarithm of square complex matrices.")
register_op("TridiagonalMatMul", inputs=["superdiag: T", "maindiag: T", "subdiag: T", "rhs: T"],
            outputs=["output: T"], attrs=["T: {double, float, complex64, complex128}"],
            shape_fn=_tridiag_matmul_shape,
            doc="Multiplies tridiagonal matrices (diagonals [..., 1, M]; superdiag[-1] and subdiag[0] "
                "unused) by rhs [..., M, N].")
register_op("TridiagonalSolve", inputs=["diagonals: T", "rhs: T"], outputs=["output: T"],
            attrs=["partial_pivoting: bool = true", "perturb_singular: bool = false",
                   "T: {double, float, complex64, complex128}"], shape_fn=_tridiag_solve_shape,
            doc="Solves tridiagonal systems: diagonals [..., 3, M] (super, main, sub), rhs [..., M, K].")

# Op types of this module: host only (kernel_contract.HOST_ONLY_OPS) until they get GPU kernels.
MATH_MORE_OPS = (
    ("Betainc",) + tuple(b[0] for b in _SPECIAL_BINARY) + tuple(u[0] for u in _SPECIAL_UNARY)
    + tuple(f"{p}FFT{s}" for s in ("", "2D", "3D") for p in ("", "I", "R", "IR"))
    + ("FFTND", "IFFTND", "RFFTND", "IRFFTND", "RandomGamma", "RandomPoissonV2", "StatelessRandomUniform",
       "StatelessRandomNormal", "StatelessTruncatedNormal", "StatelessRandomUniformInt",
       "StatelessRandomUniformFullInt", "StatelessMultinomial", "StatelessRandomBinomial",
       "StatelessRandomGammaV2", "StatelessRandomPoisson", "StatelessParameterizedTruncatedNormal",
       "Lu", "MatrixSquareRoot", "MatrixExponential",
       "MatrixLogarithm", "TridiagonalMatMul", "TridiagonalSolve"))


# ---------------------------------------------------------------------------- special function wrappers
def _out(op_type, inputs, name=None, attrs=None):
    return apply_op(op_type, inputs, attrs, name=name).outputs[0]


def _convert_all(names, values):
    first = _ops.convert_to_tensor(values[0], name=names[0])
    rest = [_ops.convert_to_tensor(v, name=n, preferred_dtype=first.dtype.base_dtype)
            for n, v in zip(names[1:], values[1:])]
    return [first] + rest


def _make(op_type, py_name, args, what):
    def wrapper(*values, name=None):
        if len(values) != len(args):
            raise TypeError(f"{py_name}() takes {len(args)} arguments ({', '.join(args)}), got {len(values)}")
        return _out(op_type, _convert_all(args, values), name)
    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"""Returns {what} elementwise (op `{op_type}`).

    Args:
        {', '.join(args)}: Tensors of one floating dtype{'' if len(args) == 1 else ' (broadcasting)'}.
        name: optional op name (default "{op_type}").

    Raises:
        TypeError: the dtypes differ or are not supported by `{op_type}`.
    """
    return wrapper


betainc = _make("Betainc", "betainc", ("a", "b", "x"), "the regularized incomplete beta function I_x(a, b)")
igamma = _make("Igamma", "igamma", ("a", "x"), "the regularized lower incomplete gamma function P(a, x)")
igammac = _make("Igammac", "igammac", ("a", "x"), "the regularized upper incomplete gamma function Q(a, x)")
zeta = _make("Zeta", "zeta", ("x", "q"), "the Hurwitz zeta function sum_n (n + q)^-x")
polygamma = _make("Polygamma", "polygamma", ("a", "x"), "the a-th derivative of digamma at x")
nextafter = _make("NextAfter", "nextafter", ("x1", "x2"), "the next float after x1 towards x2")
bessel_i0 = _make("BesselI0", "bessel_i0", ("x",), "the modified Bessel function I0(x)")
bessel_i0e = _make("BesselI0e", "bessel_i0e", ("x",), "exp(-|x|) I0(x)")
bessel_i1 = _make("BesselI1", "bessel_i1", ("x",), "the modified Bessel function I1(x)")
bessel_i1e = _make("BesselI1e", "bessel_i1e", ("x",), "exp(-|x|) I1(x)")
erfinv = _make("Erfinv", "erfinv", ("x",), "the inverse error function")
ndtri = _make("Ndtri", "ndtri", ("x",), "the inverse of the standard normal CDF")


def erfcinv(x, name=None):
    """Returns the inverse of erfc elementwise: -ndtri(x / 2) / sqrt(2), on (0, 2).

    Args:
        x: a floating Tensor.
        name: optional name scope (default "erfcinv").
    """
    with _ops.name_scope(name, "erfcinv", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        half = _ops.convert_to_tensor(0.5, dtype=x.dtype.base_dtype)
        minus_root_half = _ops.convert_to_tensor(-np.sqrt(0.5), dtype=x.dtype.base_dtype)
        return _out("Mul", [ndtri(_out("Mul", [x, half])), minus_root_half], name)


# ---------------------------------------------------------------------------- linear algebra wrappers
def lu(input, output_idx_type=_dtypes.int32, name=None):  # noqa: A002 - TF's argument name
    """LU decomposition with partial pivoting (op `Lu`).

    Args:
        input: [..., M, M] matrices.
        output_idx_type: int32 (default) or int64, the dtype of `p`.
        name: optional op name.

    Returns:
        (lu, p): lu [..., M, M] packs L (unit diagonal, strictly below) and U; p [..., M] is the
        permutation with input[..., p, :] = L @ U.
    """
    x = _ops.convert_to_tensor(input, name="input")
    op = apply_op("Lu", [x], {"output_idx_type": _dtypes.as_dtype(output_idx_type)}, name=name)
    return op.outputs[0], op.outputs[1]


def lu_reconstruct(lower_upper, perm, validate_args=False, name=None):
    """Returns the matrices P^-1 L U whose LU decomposition is (lower_upper, perm).

    Args:
        lower_upper, perm: the outputs of `lu`.
        validate_args: unused (kept for TF's signature).
        name: optional name scope (default "lu_reconstruct").
    """
    from kernflow.core.ops import array_ops, linalg_ops, math_ops
    with _ops.name_scope(name, "lu_reconstruct", [lower_upper, perm]) as name:
        lu_t = _ops.convert_to_tensor(lower_upper, name="lower_upper")
        perm = _ops.convert_to_tensor(perm, name="perm")
        lower = linalg_ops.matrix_set_diag(linalg_ops.matrix_band_part(lu_t, -1, 0),
                                           array_ops.ones_like(linalg_ops.matrix_diag_part(lu_t)))
        prod = math_ops.matmul(lower, linalg_ops.matrix_band_part(lu_t, 0, -1))
        return math_ops.matmul(_perm_matrix(perm, lu_t.dtype.base_dtype), prod, adjoint_a=True, name=name)


def lu_solve(lower_upper, perm, rhs, validate_args=False, name=None):
    """Solves A X = rhs given A's LU decomposition (lower_upper, perm) from `lu`.

    Args:
        lower_upper, perm: the outputs of `lu` for A [..., M, M].
        rhs: [..., M, K] right-hand sides.
        validate_args: unused (kept for TF's signature).
        name: optional name scope (default "lu_solve").
    """
    from kernflow.core.ops import array_ops, linalg_ops, math_ops
    with _ops.name_scope(name, "lu_solve", [lower_upper, perm, rhs]) as name:
        lu_t = _ops.convert_to_tensor(lower_upper, name="lower_upper")
        rhs = _ops.convert_to_tensor(rhs, name="rhs", dtype=lu_t.dtype.base_dtype)
        permuted = math_ops.matmul(_perm_matrix(perm, lu_t.dtype.base_dtype), rhs)
        lower = linalg_ops.matrix_set_diag(linalg_ops.matrix_band_part(lu_t, -1, 0),
                                           array_ops.ones_like(linalg_ops.matrix_diag_part(lu_t)))
        y = linalg_ops.matrix_triangular_solve(lower, permuted, lower=True)
        return linalg_ops.matrix_triangular_solve(linalg_ops.matrix_band_part(lu_t, 0, -1), y, lower=False,
                                                  name=name)


def lu_matrix_inverse(lower_upper, perm, validate_args=False, name=None):
    """Returns the inverse of A given its LU decomposition (lower_upper, perm) from `lu`."""
    from kernflow.core.ops import array_ops, linalg_ops
    with _ops.name_scope(name, "lu_matrix_inverse", [lower_upper, perm]) as name:
        lu_t = _ops.convert_to_tensor(lower_upper, name="lower_upper")
        eye = linalg_ops.matrix_diag(array_ops.ones_like(linalg_ops.matrix_diag_part(lu_t)))
        return lu_solve(lu_t, perm, eye, name=name)


def _perm_matrix(perm, dtype):
    """P [..., M, M] with P[i, j] = 1 where perm[i] == j, so that P @ x = x[..., perm, :]."""
    from kernflow.core.ops import array_ops
    perm = _ops.convert_to_tensor(perm, name="perm")
    return array_ops.one_hot(perm, array_ops.shape(perm)[-1], dtype=dtype)


def _matrix_fn(op_type, py_name, what):
    def wrapper(input, name=None):  # noqa: A002
        return _out(op_type, [_ops.convert_to_tensor(input, name="input")], name)
    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = f"""Returns {what} of square matrices [..., M, M] (op `{op_type}`)."""
    return wrapper


matrix_square_root = _matrix_fn("MatrixSquareRoot", "matrix_square_root", "the principal square root")
sqrtm = matrix_square_root
expm = _matrix_fn("MatrixExponential", "expm", "the matrix exponential")
matrix_exponential = expm
logm = _matrix_fn("MatrixLogarithm", "logm", "the principal logarithm (complex dtypes only)")
matrix_logarithm = logm


def tridiagonal_matmul(diagonals, rhs, diagonals_format="compact", name=None):
    """Multiplies tridiagonal matrices by rhs [..., M, N].

    Args:
        diagonals: "compact": [..., 3, M] (superdiagonal, main diagonal, subdiagonal; the
            superdiagonal's last and the subdiagonal's first entries are ignored); "sequence": a
            tuple of three [..., M] tensors; "matrix": [..., M, M] (its three diagonals are used).
        rhs: [..., M, N].
        diagonals_format: "compact", "sequence" or "matrix".
        name: optional name scope.
    """
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, "tridiagonal_matmul", [rhs]) as name:
        sup, main, sub = _three_diagonals(diagonals, diagonals_format, "tridiagonal_matmul")
        rhs = _ops.convert_to_tensor(rhs, name="rhs", dtype=main.dtype.base_dtype)
        ex = [array_ops.expand_dims(d, -2) for d in (sup, main, sub)]
        return _out("TridiagonalMatMul", ex + [rhs], name)


def tridiagonal_solve(diagonals, rhs, diagonals_format="compact", transpose_rhs=False, conjugate_rhs=False,
                      name=None, partial_pivoting=True, perturb_singular=False):
    """Solves tridiagonal systems A X = rhs.

    Args:
        diagonals: as in `tridiagonal_matmul` ("compact" [..., 3, M], "sequence" or "matrix").
        rhs: [..., M, K] (or [..., M] for a single right-hand side; [..., K, M] with transpose_rhs).
        diagonals_format: "compact", "sequence" or "matrix".
        transpose_rhs, conjugate_rhs: transpose / conjugate rhs first.
        name: optional name scope.
        partial_pivoting: pivot rows (default True; otherwise plain Thomas elimination).
        perturb_singular: replace exact zero pivots by a tiny value instead of failing.

    Raises:
        InvalidArgumentError (at run time): a system is singular.
    """
    from kernflow.core.ops import array_ops, math_ops
    with _ops.name_scope(name, "tridiagonal_solve", [rhs]) as name:
        sup, main, sub = _three_diagonals(diagonals, diagonals_format, "tridiagonal_solve")
        rhs = _ops.convert_to_tensor(rhs, name="rhs", dtype=main.dtype.base_dtype)
        if conjugate_rhs:
            rhs = math_ops.conj(rhs)
        vector = rhs.shape.rank is not None and rhs.shape.rank == main.shape.rank
        if vector:
            rhs = array_ops.expand_dims(rhs, -1)
        elif transpose_rhs:
            rhs = array_ops.matrix_transpose(rhs)
        d = array_ops.stack([sup, main, sub], axis=-2)
        out = _out("TridiagonalSolve", [d, rhs], None,
                   {"partial_pivoting": bool(partial_pivoting), "perturb_singular": bool(perturb_singular)})
        return array_ops.squeeze(out, [-1], name=name) if vector else array_ops.identity(out, name=name)


def _three_diagonals(diagonals, fmt, fn):
    from kernflow.core.ops import array_ops, linalg_ops
    if fmt == "compact":
        d = _ops.convert_to_tensor(diagonals, name="diagonals")
        d.shape.with_rank_at_least(2)
        if d.shape.rank is not None and d.shape.dim_values[-2] not in (None, 3):
            raise ValueError(f"{fn}: compact diagonals must have shape [..., 3, M], got {d.shape}")
        return d[..., 0, :], d[..., 1, :], d[..., 2, :]
    if fmt == "sequence":
        if not isinstance(diagonals, (list, tuple)) or len(diagonals) != 3:
            raise ValueError(f"{fn}: sequence diagonals must be a tuple of 3 tensors (super, main, sub)")
        main = _ops.convert_to_tensor(diagonals[1], name="maindiag")
        return tuple(_ops.convert_to_tensor(t, dtype=main.dtype.base_dtype) for t in diagonals)
    if fmt == "matrix":
        m = _ops.convert_to_tensor(diagonals, name="diagonals")
        main = linalg_ops.matrix_diag_part(m)
        zero = array_ops.zeros_like(main[..., :1])
        sup = array_ops.concat([linalg_ops.matrix_diag_part(m[..., :-1, 1:]), zero], -1)
        sub = array_ops.concat([zero, linalg_ops.matrix_diag_part(m[..., 1:, :-1])], -1)
        return sup, main, sub
    raise ValueError(f"{fn}: unrecognized diagonals_format {fmt!r}: expected compact, sequence or matrix")


def tensor_diag(diagonal, name=None):
    """Returns the tensor of rank 2k with `diagonal` (rank k) on its diagonal: out[i.., i..] = d[i..].

    Args:
        diagonal: a Tensor of rank k >= 1.
        name: optional name scope (default "Diag").
    """
    from kernflow.core.ops import array_ops, linalg_ops
    with _ops.name_scope(name, "Diag", [diagonal]) as name:
        d = _ops.convert_to_tensor(diagonal, name="diagonal")
        shape = array_ops.shape(d)
        flat = linalg_ops.matrix_diag(array_ops.reshape(d, [-1]))
        return array_ops.reshape(flat, array_ops.concat([shape, shape], 0), name=name)


def tensor_diag_part(input, name=None):  # noqa: A002
    """Returns the diagonal part of a tensor of shape S + S (rank 2k): out[i..] = input[i.., i..].

    Raises:
        ValueError: the rank is unknown or odd, or the two halves of the static shape differ.
    """
    from kernflow.core.ops import array_ops, linalg_ops, math_ops
    with _ops.name_scope(name, "DiagPart", [input]) as name:
        x = _ops.convert_to_tensor(input, name="input")
        r = x.shape.rank
        if r is None or r % 2:
            raise ValueError(f"tensor_diag_part: input must have an even, known rank, got shape {x.shape}")
        half = x.shape[: r // 2]
        if not half.is_compatible_with(x.shape[r // 2:]):
            raise ValueError(f"tensor_diag_part: the two halves of shape {x.shape} must be equal")
        shape = array_ops.shape(x)[: r // 2]
        size = math_ops.reduce_prod(shape)
        flat = array_ops.reshape(x, array_ops.stack([size, size]))
        return array_ops.reshape(linalg_ops.matrix_diag_part(flat), shape, name=name)


def eigh_tridiagonal(alpha, beta, eigvals_only=True, select="a", select_range=None, tol=None, name=None):
    """Eigenvalues (and vectors) of the Hermitian tridiagonal matrix with diagonal `alpha` and
    off-diagonal `beta`.

    Args:
        alpha: [n] real diagonal.
        beta: [n - 1] off-diagonal (real or complex; the lower off-diagonal is conj(beta)).
        eigvals_only: return only the eigenvalues (ascending); otherwise (eigvals, eigvectors) with
            the eigenvectors as columns.
        select: "a" all, "i" indices select_range = (lo, hi) inclusive, "v" values in (lo, hi].
        select_range: as `select` says.
        tol: unused (the dense solver is exact to rounding).
        name: optional name scope.
    """
    from kernflow.core.ops import array_ops, linalg_ops, math_ops
    if select not in ("a", "i", "v"):
        raise ValueError(f"eigh_tridiagonal: select must be 'a', 'i' or 'v', got {select!r}")
    with _ops.name_scope(name, "eigh_tridiagonal", [alpha, beta]) as name:
        beta = _ops.convert_to_tensor(beta, name="beta")
        alpha = _ops.convert_to_tensor(alpha, name="alpha", dtype=beta.dtype.real_dtype)
        a_c = math_ops.cast(alpha, beta.dtype.base_dtype) if beta.dtype.is_complex else alpha
        m = (linalg_ops.matrix_diag(a_c) + array_ops.pad(linalg_ops.matrix_diag(beta), [[0, 1], [1, 0]])
             + array_ops.pad(linalg_ops.matrix_diag(math_ops.conj(beta)), [[1, 0], [0, 1]]))
        e, v = linalg_ops.self_adjoint_eig(m)
        if select == "i":
            lo, hi = select_range
            e, v = e[lo:hi + 1], v[:, lo:hi + 1]
        elif select == "v":
            lo, hi = select_range
            keep = math_ops.logical_and(e > lo, e <= hi)
            e, v = array_ops.boolean_mask(e, keep), array_ops.boolean_mask(v, keep, axis=1)
        if eigvals_only:
            return array_ops.identity(e, name=name)
        return e, v


def einsum(equation, *inputs, **kwargs):
    """`kf.einsum` (defined in kernflow.core.ops.array_ops_more; looked up when called)."""
    import kernflow.core as kf
    return kf.einsum(equation, *inputs, **kwargs)


def tensordot(a, b, axes, name=None):
    """`kf.tensordot` (defined in kernflow.core.ops.array_ops_more; looked up when called)."""
    import kernflow.core as kf
    return kf.tensordot(a, b, axes, name=name)


# ---------------------------------------------------------------------------- the kf.<name> exports
# By module path: the package attribute `random` may still be another object while kf loads.
_random = importlib.import_module("kernflow.core.random")  # they import this module's OpDefs
_signal = importlib.import_module("kernflow.core.signal")

fft, ifft, fft2d, ifft2d, fft3d, ifft3d = (_signal.fft, _signal.ifft, _signal.fft2d, _signal.ifft2d,
                                           _signal.fft3d, _signal.ifft3d)
fftnd, ifftnd, rfftnd, irfftnd = _signal.fftnd, _signal.ifftnd, _signal.rfftnd, _signal.irfftnd
random_gamma, random_poisson, random_crop = _random.gamma, _random.poisson, _random.random_crop

__all__ = ["betainc", "igamma", "igammac", "zeta", "polygamma", "matrix_square_root", "fft", "ifft",
           "fft2d", "ifft2d", "fft3d", "ifft3d", "fftnd", "ifftnd", "rfftnd", "irfftnd", "random_gamma",
           "random_poisson", "random_crop"]

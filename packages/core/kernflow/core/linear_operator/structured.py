"""Operators with few parameters per row: Toeplitz and Tridiag.

A Toeplitz matmul embeds the matrix in a 2N circulant and multiplies with FFTs (O(N log N) per column);
a tridiagonal matmul is three shifted elementwise products (O(N) per column) and its solve the
tridiagonal_solve op.
"""

from __future__ import annotations

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.framework.tensor_shape import TensorShape, dimension_value
from kernflow.core.linear_operator.base import (LinearOperator, broadcast_matrix_batch, check_dtype,
                                                conj_if, float_or_complex, matrix_adjoint,
                                                static_batch_broadcast, to_tensor)

__all__ = ["LinearOperatorToeplitz", "LinearOperatorTridiag"]

_COMPLEX_OF = {"float16": "complex64", "float32": "complex64", "float64": "complex128",
               "complex64": "complex64", "complex128": "complex128"}


def complex_of(dtype):
    return kf.as_dtype(_COMPLEX_OF[dtype.base_dtype.name])


def to_complex(x, dtype):
    """x cast to the complex dtype `dtype` (real parts become the real part)."""
    if x.dtype.is_complex:
        return kf.cast(x, dtype)
    real = kf.cast(x, dtype.real_dtype)
    return kf.complex(real, kf.zeros_like(real))


def from_complex(z, dtype):
    """z back in `dtype`: its real part when dtype is real."""
    return kf.cast(z, dtype) if dtype.is_complex else kf.cast(kf.math.real(z), dtype)


def _vector_square_shape(*vectors):
    statics = [v.shape for v in vectors]
    if any(s.ndims is None for s in statics):
        return TensorShape(None)
    batch = static_batch_broadcast(*[s[:-1] for s in statics])
    n = None
    for s in statics:
        n = n if n is not None else dimension_value(s[-1])
    return batch.concatenate([n, n])


def _vector_square_shape_tensor(*vectors):
    batch = kf.shape(vectors[0])[:-1]
    for v in vectors[1:]:
        batch = kf.broadcast_dynamic_shape(batch, kf.shape(v)[:-1])
    n = kf.shape(vectors[0])[-1]
    return kf.concat([batch, kf.stack([n, n])], 0)


class LinearOperatorToeplitz(LinearOperator):
    """A [batch] Toeplitz matrix `T[i, j] = col[i - j]` (i >= j), `row[j - i]` (i < j) (TF1 name).

    `row[..., 0]` is ignored: the diagonal is `col[..., 0]`. matmul is an FFT convolution with the
    2N circulant that embeds T; solve and determinant use the dense matrix, as TF does.

    Raises:
        ValueError: `col` or `row` has rank 0 or they differ in length. TypeError: dtypes differ.
    """

    def __init__(self, col, row, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorToeplitz"):
        with kf.name_scope(name):
            self._col, self._row = to_tensor(col, "col"), to_tensor(row, "row")
        for t, what in ((self._col, "col"), (self._row, "row")):
            check_dtype(t, float_or_complex(), "%s: %s" % (name, what))
            if t.shape.ndims is not None and t.shape.ndims < 1:
                raise ValueError("%s: %s must have rank >= 1; got shape %s" % (name, what, t.shape))
        if self._row.dtype != self._col.dtype:
            raise TypeError("%s: col and row must have one dtype; found %s and %s" % (
                name, self._col.dtype.name, self._row.dtype.name))
        n_col, n_row = (dimension_value(t.shape[-1]) if t.shape.ndims else None
                        for t in (self._col, self._row))
        if n_col is not None and n_row is not None and n_col != n_row:
            raise ValueError("%s: col and row must have the same length; got shapes %s and %s" % (
                name, self._col.shape, self._row.shape))
        super().__init__(self._col.dtype, [self._col, self._row], is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square, name)

    @property
    def col(self):
        return self._col

    @property
    def row(self):
        return self._row

    def _shape(self):
        return _vector_square_shape(self._col, self._row)

    def _shape_tensor(self):
        return _vector_square_shape_tensor(self._col, self._row)

    def _col_row(self, adjoint):
        if not adjoint:
            return self._col, self._row
        # T^H is Toeplitz with column conj(row) (diagonal conj(col[0])) and row conj(col).
        col = kf.concat(broadcast_matrix_batch([self._col[..., :1, None], self._row[..., 1:, None]]), -2)
        return conj_if(kf.squeeze(col, [-1]), True), conj_if(self._col, True)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = matrix_adjoint(x, adjoint_arg)
        col, row = self._col_row(adjoint)
        ctype = complex_of(self.dtype)
        zero = kf.zeros_like(col[..., :1])
        circulant = kf.concat(broadcast_matrix_batch([col[..., None], zero[..., None],
                                                      kf.reverse(row[..., 1:], [-1])[..., None]]), -2)
        spectrum = kf.signal.fft(to_complex(kf.squeeze(circulant, [-1]), ctype))     # [..., 2N]
        xt = to_complex(kf.linalg.matrix_transpose(x), ctype)                         # [..., R, N]
        xt = kf.concat([xt, kf.zeros_like(xt)], -1)                                   # [..., R, 2N]
        y = kf.signal.ifft(kf.signal.fft(xt) * kf.expand_dims(spectrum, -2))
        n = kf.shape(x)[-2]
        y = kf.linalg.matrix_transpose(y[..., :n])
        return from_complex(y, self.dtype)

    def _diag_part(self):
        diag = self._col[..., :1] * kf.ones_like(self._row)
        return diag * kf.ones_like(self._col)

    def _trace(self):
        return self._col[..., 0] * kf.cast(kf.shape(self._col)[-1], self.dtype) * \
            kf.ones_like(self._row[..., 0])

    def _to_dense(self):
        col, row = broadcast_matrix_batch([self._col[..., None], self._row[..., None]])
        vec = kf.concat([kf.reverse(row[..., 1:, :], [-2]), col], -2)[..., 0]          # [..., 2N-1]
        n = kf.shape(col)[-2]
        idx = kf.range(n)
        index = (n - 1) + kf.expand_dims(idx, -1) - kf.expand_dims(idx, 0)           # N-1+i-j
        rank = vec.shape.ndims
        if rank is None:
            return kf.linalg.matrix_transpose(kf.gather(vec, index, axis=-1))
        return kf.gather(vec, index, axis=rank - 1)


_FORMATS = ("compact", "matrix", "sequence")


class LinearOperatorTridiag(LinearOperator):
    """A [batch] square tridiagonal matrix (TF `tf.linalg.LinearOperatorTridiag`).

    diagonals_format "compact": a `[..., 3, N]` tensor (superdiagonal, diagonal, subdiagonal; the last
    superdiagonal and first subdiagonal entries are ignored); "sequence": a list of those three `[..., N]`
    tensors; "matrix": the `[..., N, N]` matrix, of which only the three diagonals are used.

    Raises:
        ValueError: an unknown format or diagonals of the wrong shape.
    """

    def __init__(self, diagonals, diagonals_format="compact", is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorTridiag"):
        if diagonals_format not in _FORMATS:
            raise ValueError("%s: diagonals_format must be one of %s; got %r" % (
                name, _FORMATS, diagonals_format))
        with kf.name_scope(name):
            self._super, self._diag, self._sub, parents = self._unpack(diagonals, diagonals_format, name)
        check_dtype(self._diag, float_or_complex(), "%s: diagonals" % name)
        self._diagonals, self._format = diagonals, diagonals_format
        super().__init__(self._diag.dtype, parents, is_non_singular, is_self_adjoint, is_positive_definite,
                         is_square, name)

    @staticmethod
    def _unpack(diagonals, fmt, name):
        if fmt == "sequence":
            if not isinstance(diagonals, (list, tuple)) or len(diagonals) != 3:
                raise ValueError("%s: diagonals in 'sequence' format must be a list of 3 tensors; got %r"
                                 % (name, diagonals))
            parts = [to_tensor(d, "diagonals") for d in diagonals]
            return parts + [parts]
        t = to_tensor(diagonals, "diagonals")
        if t.shape.ndims is not None and t.shape.ndims < 2:
            raise ValueError("%s: diagonals must have rank >= 2; got shape %s" % (name, t.shape))
        if fmt == "compact":
            if t.shape.ndims is not None and dimension_value(t.shape[-2]) not in (None, 3):
                raise ValueError("%s: compact diagonals must have shape [..., 3, N]; got %s" % (
                    name, t.shape))
            return t[..., 0, :], t[..., 1, :], t[..., 2, :], [t]
        zero = kf.zeros_like(t[..., :1, 0])
        superdiag = kf.concat([kf.matrix_diag_part(t[..., :-1, 1:]), zero], -1)
        subdiag = kf.concat([zero, kf.matrix_diag_part(t[..., 1:, :-1])], -1)
        return superdiag, kf.matrix_diag_part(t), subdiag, [t]

    @property
    def diagonals(self):
        return self._diagonals

    @property
    def diagonals_format(self):
        return self._format

    def _shape(self):
        return _vector_square_shape(self._super, self._diag, self._sub)

    def _shape_tensor(self):
        return _vector_square_shape_tensor(self._super, self._diag, self._sub)

    def _parts(self, adjoint):
        """(superdiagonal, diagonal, subdiagonal) of the operator or of its adjoint."""
        if not adjoint:
            return self._super, self._diag, self._sub
        zero = kf.zeros_like(self._diag[..., :1])
        sup = kf.concat(broadcast_matrix_batch([self._sub[..., 1:, None], zero[..., None]]), -2)[..., 0]
        sub = kf.concat(broadcast_matrix_batch([zero[..., None], self._super[..., :-1, None]]), -2)[..., 0]
        return conj_if(sup, True), conj_if(self._diag, True), conj_if(sub, True)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = matrix_adjoint(x, adjoint_arg)
        sup, diag, sub = (kf.expand_dims(p, -1) for p in self._parts(adjoint))
        zero_row = kf.zeros_like(x[..., :1, :])
        below = kf.concat([x[..., 1:, :], zero_row], -2)     # x[i + 1]
        above = kf.concat([zero_row, x[..., :-1, :]], -2)    # x[i - 1]
        return diag * x + sup * below + sub * above

    def _compact(self, adjoint):
        parts = broadcast_matrix_batch([p[..., None, :] for p in self._parts(adjoint)])
        return kf.concat(parts, -2)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        diagonals, rhs = broadcast_matrix_batch([self._compact(adjoint), matrix_adjoint(rhs, adjoint_arg)])
        return kf.linalg.tridiagonal_solve(diagonals, rhs, diagonals_format="compact")

    def _diag_part(self):
        return self._diag * kf.ones_like(self._super) * kf.ones_like(self._sub)

    def _to_dense(self):
        n = kf.shape(self._diag)[-1]
        shift = kf.one_hot(kf.range(1, n + 1), n, dtype=self.dtype)     # shift[i, i + 1] = 1
        return (kf.matrix_diag(self._diag) + kf.expand_dims(self._super, -1) * shift
                + kf.expand_dims(self._sub, -1) * kf.linalg.matrix_transpose(shift))

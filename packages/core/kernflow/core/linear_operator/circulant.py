"""Circulant operators: `A = DFT^-1 diag(spectrum) DFT` with 1-D, 2-D and 3-D DFTs.

Applying one costs an FFT and an inverse FFT per column (O(N log N)); solve divides by the spectrum,
the determinant is its product and every diagonal entry its mean. A real `input_output_dtype` takes the
real part of the result, which is exact when the spectrum is Hermitian (`assert_hermitian_spectrum`).
"""

from __future__ import annotations

import numpy as np

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.framework.tensor_shape import TensorShape, dimension_value
from kernflow.core.linear_operator.base import (LinearOperator, check_dtype, float_or_complex,
                                                matrix_adjoint, to_tensor)
from kernflow.core.linear_operator.structured import complex_of, from_complex, to_complex

__all__ = ["LinearOperatorCirculant", "LinearOperatorCirculant2D", "LinearOperatorCirculant3D"]

_FFT = {1: ("fft", "ifft"), 2: ("fft2d", "ifft2d"), 3: ("fft3d", "ifft3d")}


class _BaseCirculant(LinearOperator):
    """Shared by the circulant operators; `_block_depth` is the number of DFT dimensions."""

    _block_depth = 1

    def __init__(self, spectrum, input_output_dtype, is_non_singular, is_self_adjoint,
                 is_positive_definite, is_square, name):
        if is_square is False:
            raise ValueError("A circulant operator is always square.")
        with kf.name_scope(name):
            spectrum = to_tensor(spectrum, "spectrum")
        check_dtype(spectrum, float_or_complex(), "%s: spectrum" % name)
        depth = self._block_depth
        if spectrum.shape.ndims is not None and spectrum.shape.ndims < depth:
            raise ValueError("%s: spectrum must have rank >= %d; got shape %s" % (
                name, depth, spectrum.shape))
        io_dtype = kf.as_dtype(input_output_dtype)
        self._spectrum = to_complex(spectrum, complex_of(io_dtype))
        self._input_spectrum = spectrum
        super().__init__(io_dtype, [spectrum], is_non_singular, is_self_adjoint, is_positive_definite, True,
                         name)

    @property
    def spectrum(self):
        return self._input_spectrum

    @property
    def block_depth(self):
        return self._block_depth

    def block_shape_tensor(self):
        return kf.shape(self._spectrum)[-self._block_depth:]

    @property
    def block_shape(self):
        s = self._spectrum.shape
        return TensorShape(None) if s.ndims is None else s[-self._block_depth:]

    def _shape(self):
        s = self._spectrum.shape
        if s.ndims is None:
            return TensorShape(None)
        dims = [dimension_value(d) for d in s[-self._block_depth:]]
        n = None if any(d is None for d in dims) else int(np.prod(dims))
        return s[:-self._block_depth].concatenate([n, n])

    def _shape_tensor(self):
        s = kf.shape(self._spectrum)
        n = kf.reduce_prod(s[-self._block_depth:])
        return kf.concat([s[:-self._block_depth], kf.stack([n, n])], 0)

    def _apply(self, x, spectrum_fn):
        """DFT^-1 (spectrum_fn(spectrum) * DFT x) for x [..., N, R]."""
        fft, ifft = (getattr(kf.signal, f) for f in _FFT[self._block_depth])
        xt = to_complex(kf.linalg.matrix_transpose(x), self._spectrum.dtype)     # [..., R, N]
        lead = kf.shape(xt)[:-1]
        blocks = kf.reshape(xt, kf.concat([lead, self.block_shape_tensor()], 0))   # [..., R, n1, ..]
        spectrum = kf.expand_dims(spectrum_fn(self._spectrum), -self._block_depth - 1)  # [..., 1, n1, ..]
        y = ifft(fft(blocks) * spectrum)
        y_lead = kf.shape(y)[:-self._block_depth]
        y = kf.reshape(y, kf.concat([y_lead, [-1]], 0))
        return from_complex(kf.linalg.matrix_transpose(y), self.dtype)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = matrix_adjoint(x, adjoint_arg)
        return self._apply(x, kf.math.conj if adjoint else (lambda s: s))

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        rhs = matrix_adjoint(rhs, adjoint_arg)
        return self._apply(rhs, (lambda s: 1. / kf.math.conj(s)) if adjoint else (lambda s: 1. / s))

    def _block_axes(self):
        return list(range(-self._block_depth, 0))

    def _determinant(self):
        return from_complex(kf.reduce_prod(self._spectrum, axis=self._block_axes()), self.dtype)

    def _log_abs_determinant(self):
        return kf.reduce_sum(kf.log(kf.abs(self._spectrum)), axis=self._block_axes())

    def _trace(self):
        return from_complex(kf.reduce_sum(self._spectrum, axis=self._block_axes()), self.dtype)

    def _diag_part(self):
        mean = kf.reduce_mean(self._spectrum, axis=self._block_axes())
        n = self.domain_dimension_tensor()
        return from_complex(kf.expand_dims(mean, -1) * kf.ones(kf.stack([n]), mean.dtype), self.dtype)

    def _eigvals(self):
        s = self._spectrum
        return from_complex(kf.reshape(s, kf.concat([kf.shape(s)[:-self._block_depth], [-1]], 0)), self.dtype)

    def convolution_kernel(self, name="convolution_kernel"):
        """The kernel h with `A x = h * x` (circular convolution): the inverse DFT of the spectrum."""
        with self._name_scope(name):
            ifft = getattr(kf.signal, _FFT[self._block_depth][1])
            return from_complex(ifft(self._spectrum), self.dtype)

    def assert_hermitian_spectrum(self, name="assert_hermitian_spectrum"):
        """An op that fails unless `spectrum[k] == conj(spectrum[-k mod N])`, i.e. the operator is real."""
        with self._name_scope(name):
            s = self._spectrum
            flipped = s
            for axis in self._block_axes():
                n = kf.shape(s)[axis]
                index = kf.math.floormod(-kf.range(n), n)
                rank = s.shape.ndims
                flipped = kf.gather(flipped, index, axis=(rank + axis) if rank is not None else axis)
            return kf.assert_near(kf.abs(s - kf.math.conj(flipped)), kf.zeros([], s.dtype.real_dtype),
                                  message="%s: spectrum was not Hermitian" % self.name)

    def _derived(self, spectrum, suffix, **hints):
        return type(self)(spectrum, input_output_dtype=self.dtype, name=self.name + suffix, **hints)

    def _adjoint(self):
        return self._derived(kf.math.conj(self._spectrum), "_adjoint")

    def _inverse(self):
        return self._derived(1. / self._spectrum, "_inverse", is_non_singular=True)

    def _cholesky(self):
        return self._derived(kf.sqrt(self._spectrum), "_cholesky", is_non_singular=True,
                             is_self_adjoint=True, is_positive_definite=True)

    def _assert_non_singular(self):
        return kf.assert_positive(kf.abs(self._spectrum),
                                  message="%s: the spectrum contained zeros: singular operator" % self.name)

    def _assert_positive_definite(self):
        return kf.assert_positive(kf.math.real(self._spectrum),
                                  message="%s: the spectrum had non-positive real part" % self.name)

    def _assert_self_adjoint(self):
        return kf.assert_near(kf.math.imag(self._spectrum), kf.zeros([], self._spectrum.dtype.real_dtype),
                              message="%s: the spectrum was not real: not self-adjoint" % self.name)


def _circulant_class(depth, doc):
    class Circulant(_BaseCirculant):
        __doc__ = doc
        _block_depth = depth

        def __init__(self, spectrum, input_output_dtype=None, is_non_singular=None, is_self_adjoint=None,
                     is_positive_definite=None, is_square=True, name=None):
            super().__init__(spectrum, input_output_dtype or kf.complex64, is_non_singular, is_self_adjoint,
                             is_positive_definite, is_square, name or type(self).__name__)

    return Circulant


_DOC = """A [batch] {what} circulant operator from its spectrum `[..., {shape}]` (TF1 `{tf}`).

    Args:
        spectrum: the DFT of the convolution kernel, float or complex; N = {n}.
        input_output_dtype: the dtype of matmul/solve arguments and results (default complex64).

    Raises:
        ValueError: spectrum rank below {depth}, or `is_square` False. TypeError: a non-float spectrum.
    """

LinearOperatorCirculant = _circulant_class(1, _DOC.format(
    what="", shape="N", tf="tf.linalg.LinearOperatorCirculant", n="the last dimension", depth=1))
LinearOperatorCirculant.__name__ = LinearOperatorCirculant.__qualname__ = "LinearOperatorCirculant"
LinearOperatorCirculant2D = _circulant_class(2, _DOC.format(
    what="block", shape="N0, N1", tf="tf.linalg.LinearOperatorCirculant2D", n="N0 N1", depth=2))
LinearOperatorCirculant2D.__name__ = LinearOperatorCirculant2D.__qualname__ = "LinearOperatorCirculant2D"
LinearOperatorCirculant3D = _circulant_class(3, _DOC.format(
    what="nested block", shape="N0, N1, N2", tf="tf.linalg.LinearOperatorCirculant3D", n="N0 N1 N2",
    depth=3))
LinearOperatorCirculant3D.__name__ = LinearOperatorCirculant3D.__qualname__ = "LinearOperatorCirculant3D"

"""The `LinearOperator` base class (TF1 `tf.linalg.LinearOperator`) and the helpers its subclasses share.

A LinearOperator is a [batch of] M x N matrices known through methods rather than through its entries.
Public methods check arguments and open a name scope, then call the leading-underscore version, which a
subclass overrides where its structure gives a cheaper algorithm; the defaults here work on `to_dense()`.

Invariants:
    * `shape` is the static TensorShape `batch_shape + [range_dimension, domain_dimension]`; any entry
      may be unknown, and `shape_tensor()` then computes it in the graph.
    * Hints are True, False or None (unknown). The constructor enforces the implications
      positive-definite => non-singular => square and self-adjoint => square, raising ValueError when
      a hint given as False contradicts them.
    * `dtype` is the dtype of every tensor the operator takes (matmul/solve arguments) and returns.
"""

from __future__ import annotations

import contextlib

import numpy as np

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.framework.tensor_shape import TensorShape, dimension_value

__all__ = ["LinearOperator"]


def _static(d):
    """A Dimension/int/None as an int or None."""
    return dimension_value(d)


def check_hint(given, implied, message):
    """The hint value given when it agrees with `implied`; raises ValueError(message) when it does not."""
    if implied is None:
        return given
    if given is not None and bool(given) != bool(implied):
        raise ValueError(message)
    return implied


def static_batch_broadcast(*shapes):
    """The broadcast of TensorShapes (batch parts only); ValueError names both when they disagree."""
    out = TensorShape([])
    for s in shapes:
        if out.ndims is None or s.ndims is None:
            return TensorShape(None)
        try:
            out = kf.broadcast_static_shape(out, s)
        except ValueError as e:
            raise ValueError("Incompatible batch shapes %s and %s: %s" % (out, s, e)) from None
    return out


def dynamic_batch_broadcast(*shape_tensors):
    out = shape_tensors[0]
    for s in shape_tensors[1:]:
        out = kf.broadcast_dynamic_shape(out, s)
    return out


def broadcast_matrix_batch(matrices):
    """Broadcasts the batch dimensions (all but the last two) of each tensor in `matrices` to one shape."""
    statics = [m.shape[:-2] if m.shape.ndims is not None else TensorShape(None) for m in matrices]
    if all(s.is_fully_defined() for s in statics) and all(s == statics[0] for s in statics):
        return list(matrices)
    batch = static_batch_broadcast(*statics)
    if batch.is_fully_defined():
        return [m if m.shape[:-2] == batch else
                kf.broadcast_to(m, kf.concat([batch.as_list(), kf.shape(m)[-2:]], 0)) for m in matrices]
    dyn = dynamic_batch_broadcast(*[kf.shape(m)[:-2] for m in matrices])
    return [kf.broadcast_to(m, kf.concat([dyn, kf.shape(m)[-2:]], 0)) for m in matrices]


def matrix_adjoint(x, adjoint):
    return kf.linalg.adjoint(x) if adjoint else x


def conj_if(x, flag):
    return kf.math.conj(x) if flag and x.dtype.is_complex else x


def to_tensor(value, name, dtype=None):
    return kf.convert_to_tensor(value, dtype=dtype, name=name)


def check_dtype(tensor, allowed, what):
    if tensor.dtype.base_dtype not in allowed:
        raise TypeError("%s must have dtype in %s; found %s" % (
            what, [d.name for d in allowed], tensor.dtype.name))


def batch_eye(n, batch_shape, dtype):
    """An identity matrix of size `n` (int or int32 scalar Tensor) broadcast to `batch_shape` (or None)."""
    eye = kf.linalg.eye(n, dtype=dtype)
    if batch_shape is None:
        return eye
    return kf.broadcast_to(eye, kf.concat([batch_shape, kf.stack([n, n])], 0))


def float_or_complex():
    return (kf.float16, kf.float32, kf.float64, kf.complex64, kf.complex128)


class LinearOperator:
    """Base class of a [batch of] linear operator[s] (TF1 `tf.linalg.LinearOperator`).

    Args:
        dtype: the DType of the tensors the operator works on.
        graph_parents: the Tensors the operator is built from.
        is_non_singular, is_self_adjoint, is_positive_definite, is_square: hints (True, False or None).
        name: a name for the operator's ops.

    Raises:
        ValueError: if the hints contradict one another.
    """

    def __init__(self, dtype, graph_parents=None, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None):
        if is_positive_definite:
            is_non_singular = check_hint(is_non_singular, True,
                                         "A positive definite matrix is always non-singular.")
        if is_non_singular:
            is_square = check_hint(is_square, True, "A non-singular matrix is always square.")
        if is_self_adjoint:
            is_square = check_hint(is_square, True, "A self-adjoint matrix is always square.")
        parents = list(graph_parents or [])
        for p in parents:
            if p is not None and not kf.is_tensor(p):
                raise ValueError("Graph parent item %r is not a Tensor" % (p,))
        self._dtype = kf.as_dtype(dtype).base_dtype if dtype is not None else None
        self._graph_parents = parents
        self._is_non_singular = is_non_singular
        self._is_self_adjoint = is_self_adjoint
        self._is_positive_definite = is_positive_definite
        self._is_square_hint = is_square
        self._name = name or type(self).__name__

    # -- attributes -------------------------------------------------------------------------------

    @property
    def dtype(self):
        return self._dtype

    @property
    def name(self):
        return self._name

    @property
    def graph_parents(self):
        return self._graph_parents

    @property
    def is_non_singular(self):
        return self._is_non_singular

    @property
    def is_self_adjoint(self):
        return self._is_self_adjoint

    @property
    def is_positive_definite(self):
        return self._is_positive_definite

    @property
    def is_square(self):
        """The square hint, else whether the static shape is square (None when unknown)."""
        if self._is_square_hint is not None:
            return self._is_square_hint
        rows, cols = _static(self.range_dimension), _static(self.domain_dimension)
        return None if rows is None or cols is None else rows == cols

    @contextlib.contextmanager
    def _name_scope(self, name=None):
        with kf.name_scope(self.name):
            with kf.name_scope(name) as scope:
                yield scope

    # -- shapes -----------------------------------------------------------------------------------

    @property
    def shape(self):
        """The static TensorShape `batch_shape + [M, N]`."""
        return self._shape()

    def shape_tensor(self, name="shape_tensor"):
        """The shape as an int32 Tensor, a constant when it is statically known."""
        with self._name_scope(name):
            if self.shape.is_fully_defined():
                return kf.constant(self.shape.as_list(), dtype=kf.int32)
            return self._shape_tensor()

    @property
    def batch_shape(self):
        s = self.shape
        return s[:-2] if s.ndims is not None else TensorShape(None)

    def batch_shape_tensor(self, name="batch_shape_tensor"):
        with self._name_scope(name):
            if self.batch_shape.is_fully_defined():
                return kf.constant(self.batch_shape.as_list(), dtype=kf.int32)
            return self.shape_tensor()[:-2]

    @property
    def tensor_rank(self):
        return self.shape.ndims

    def tensor_rank_tensor(self, name="tensor_rank_tensor"):
        with self._name_scope(name):
            if self.tensor_rank is not None:
                return kf.constant(self.tensor_rank, dtype=kf.int32)
            return kf.size(self.shape_tensor())

    @property
    def domain_dimension(self):
        s = self.shape
        return s[-1] if s.ndims is not None else TensorShape([None])[0]

    def domain_dimension_tensor(self, name="domain_dimension_tensor"):
        return self._dimension_tensor(self.domain_dimension, -1, name)

    @property
    def range_dimension(self):
        s = self.shape
        return s[-2] if s.ndims is not None else TensorShape([None])[0]

    def range_dimension_tensor(self, name="range_dimension_tensor"):
        return self._dimension_tensor(self.range_dimension, -2, name)

    def _dimension_tensor(self, static, axis, name):
        with self._name_scope(name):
            if _static(static) is not None:
                return kf.constant(_static(static), dtype=kf.int32)
            return self.shape_tensor()[axis]

    # -- argument checks ---------------------------------------------------------------------------

    def _check_input_dtype(self, arg):
        if arg.dtype.base_dtype != self.dtype:
            raise TypeError("%s: expected argument to have dtype %s; found %s in tensor %s" % (
                self.name, self.dtype.name, arg.dtype.base_dtype.name, arg.name))

    def _check_inner_dims(self, x, self_dim, arg_dim, what):
        ours, theirs = _static(self.shape[self_dim]) if self.shape.ndims is not None else None, None
        if x.shape.ndims is not None:
            if x.shape.ndims < 2:
                raise ValueError("%s: %s argument must have rank >= 2; got shape %s" % (
                    self.name, what, x.shape))
            theirs = _static(x.shape[arg_dim])
        if ours is not None and theirs is not None and ours != theirs:
            raise ValueError("%s: %s expected the argument's dimension %d to be %d; got shape %s" % (
                self.name, what, arg_dim, ours, x.shape))

    def _check_solvable(self, what):
        if self.is_non_singular is False:
            raise NotImplementedError("%s: exact %s not implemented for an operator that is expected to "
                                      "be singular." % (self.name, what))
        if self.is_square is False:
            raise NotImplementedError("%s: exact %s not implemented for an operator that is expected to "
                                      "not be square." % (self.name, what))

    def _prepare(self, x, name="x"):
        if isinstance(x, LinearOperator):
            return x
        x = to_tensor(x, name, dtype=None if kf.is_tensor(x) else self.dtype)
        self._check_input_dtype(x)
        return x

    # -- public methods ----------------------------------------------------------------------------

    def matmul(self, x, adjoint=False, adjoint_arg=False, name="matmul"):
        """`op(A) @ op(x)`; a LinearOperator `x` gives a LinearOperatorComposition.

        Args:
            x: a Tensor `[..., N, R]` of this operator's dtype (`[..., R, N]` with adjoint_arg), or a
                LinearOperator.
            adjoint: use the adjoint of this operator.
            adjoint_arg: use the adjoint of `x` (its last two dimensions transposed and conjugated).

        Returns:
            A Tensor `[..., M, R]` with the broadcast batch shape.

        Raises:
            TypeError: `x` has the wrong dtype. ValueError: the inner dimensions disagree.
        """
        if isinstance(x, LinearOperator):
            from kernflow.core.linear_operator.composite import LinearOperatorComposition
            left = self.adjoint() if adjoint else self
            right = x.adjoint() if adjoint_arg else x
            a, b = _static(left.domain_dimension), _static(right.range_dimension)
            if a is not None and b is not None and a != b:
                raise ValueError("%s: operators are incompatible: domain dimension %d vs range dimension "
                                 "%d of %s" % (self.name, a, b, right.name))
            return LinearOperatorComposition([left, right])
        with self._name_scope(name):
            x = self._prepare(x)
            self._check_inner_dims(x, -2 if adjoint else -1, -1 if adjoint_arg else -2, "matmul")
            return self._matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def __matmul__(self, other):
        return self.matmul(other)

    def matvec(self, x, adjoint=False, name="matvec"):
        """`op(A) @ x` for a [batch] vector `x` of shape `[..., N]`."""
        with self._name_scope(name):
            x = self._prepare(x)
            if x.shape.ndims is not None and x.shape.ndims < 1:
                raise ValueError("%s: matvec argument must have rank >= 1; got %s" % (self.name, x.shape))
            return self._matvec(x, adjoint=adjoint)

    def solve(self, rhs, adjoint=False, adjoint_arg=False, name="solve"):
        """The `X` with `op(A) X = op(rhs)`; NotImplementedError when the hints say it cannot exist."""
        self._check_solvable("solve")
        if isinstance(rhs, LinearOperator):
            left = self.adjoint() if adjoint else self
            return left.inverse().matmul(rhs, adjoint_arg=adjoint_arg)
        with self._name_scope(name):
            rhs = self._prepare(rhs, "rhs")
            self._check_inner_dims(rhs, -1 if adjoint else -2, -1 if adjoint_arg else -2, "solve")
            return self._solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def solvevec(self, rhs, adjoint=False, name="solve"):
        """The `x` with `op(A) x = rhs` for a [batch] vector `rhs` of shape `[..., M]`."""
        self._check_solvable("solve")
        with self._name_scope(name):
            rhs = self._prepare(rhs, "rhs")
            return self._solvevec(rhs, adjoint=adjoint)

    def determinant(self, name="det"):
        """The [batch] determinant; NotImplementedError for an operator hinted not square."""
        self._check_square("Determinant")
        with self._name_scope(name):
            return self._determinant()

    def log_abs_determinant(self, name="log_abs_det"):
        """`log|det(A)|`, real; NotImplementedError for an operator hinted not square."""
        self._check_square("Log-abs-determinant")
        with self._name_scope(name):
            return self._log_abs_determinant()

    def _check_square(self, what):
        if self.is_square is False:
            raise NotImplementedError("%s: %s not implemented for an operator that is expected to not "
                                      "be square." % (self.name, what))

    def diag_part(self, name="diag_part"):
        """The [batch] main diagonal, shape `[..., min(M, N)]`."""
        with self._name_scope(name):
            return self._diag_part()

    def trace(self, name="trace"):
        with self._name_scope(name):
            return self._trace()

    def to_dense(self, name="to_dense"):
        """The [batch] matrix as a Tensor."""
        with self._name_scope(name):
            return self._to_dense()

    def add_to_tensor(self, x, name="add_to_tensor"):
        """`A + x` for a Tensor `x` of this operator's shape."""
        with self._name_scope(name):
            x = self._prepare(x)
            return self._add_to_tensor(x)

    def adjoint(self, name="adjoint"):
        """The adjoint as a LinearOperator (this operator itself when it is self-adjoint)."""
        if self.is_self_adjoint is True:
            return self
        with self._name_scope(name):
            return self._adjoint()

    H = property(adjoint, doc="Alias of adjoint().")

    def inverse(self, name="inverse"):
        """The inverse as a LinearOperator.

        Raises:
            ValueError: the hints say the operator is not square or is singular.
        """
        if self.is_square is False:
            raise ValueError("%s: cannot take the inverse: this operator represents a non square matrix."
                             % self.name)
        if self.is_non_singular is False:
            raise ValueError("%s: cannot take the inverse: this operator represents a singular matrix."
                             % self.name)
        with self._name_scope(name):
            return self._inverse()

    def cholesky(self, name="cholesky"):
        """The lower Cholesky factor as a LinearOperator.

        Raises:
            ValueError: the operator is not hinted self-adjoint and positive definite.
        """
        if not self._can_use_cholesky():
            raise ValueError("%s: cannot take the Cholesky decomposition: not a positive definite self "
                             "adjoint matrix." % self.name)
        with self._name_scope(name):
            return self._cholesky()

    def eigvals(self, name="eigvals"):
        """The eigenvalues of a self-adjoint operator; NotImplementedError for any other."""
        if not self.is_self_adjoint:
            raise NotImplementedError("%s: only self-adjoint matrices are supported." % self.name)
        with self._name_scope(name):
            return self._eigvals()

    def cond(self, name="cond"):
        """The condition number: largest over smallest singular value."""
        with self._name_scope(name):
            return self._cond()

    def assert_non_singular(self, name="assert_non_singular"):
        """An op that fails (InvalidArgumentError) when the operator is singular."""
        with self._name_scope(name):
            return self._assert_non_singular()

    def assert_positive_definite(self, name="assert_positive_definite"):
        with self._name_scope(name):
            return self._assert_positive_definite()

    def assert_self_adjoint(self, name="assert_self_adjoint"):
        with self._name_scope(name):
            return self._assert_self_adjoint()

    # -- defaults on the dense matrix ---------------------------------------------------------------

    def _shape(self):
        raise NotImplementedError("%s does not define _shape" % type(self).__name__)

    def _shape_tensor(self):
        raise NotImplementedError("%s does not define _shape_tensor" % type(self).__name__)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return kf.matmul(self.to_dense(), x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def _matvec(self, x, adjoint=False):
        return kf.squeeze(self._matmul(kf.expand_dims(x, -1), adjoint=adjoint), [-1])

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        rhs = matrix_adjoint(rhs, adjoint_arg)
        if self._can_use_cholesky():
            chol, rhs = broadcast_matrix_batch([kf.cholesky(self.to_dense()), rhs])
            return kf.cholesky_solve(chol, rhs)
        mat, rhs = broadcast_matrix_batch([self.to_dense(), rhs])
        return kf.matrix_solve(mat, rhs, adjoint=adjoint)

    def _solvevec(self, rhs, adjoint=False):
        return kf.squeeze(self._solve(kf.expand_dims(rhs, -1), adjoint=adjoint), [-1])

    def _determinant(self):
        if self._can_use_cholesky():
            return kf.exp(self._log_abs_determinant())
        return kf.matrix_determinant(self.to_dense())

    def _log_abs_determinant(self):
        if self._can_use_cholesky():
            diag = kf.matrix_diag_part(kf.cholesky(self.to_dense()))
            return 2. * kf.reduce_sum(kf.log(kf.abs(diag)), axis=-1)
        return kf.linalg.slogdet(self.to_dense())[1]

    def _diag_part(self):
        return kf.matrix_diag_part(self.to_dense())

    def _trace(self):
        return kf.reduce_sum(self.diag_part(), axis=-1)

    def _to_dense(self):
        return self.matmul(batch_eye(self.domain_dimension_tensor(), self.batch_shape_tensor(), self.dtype))

    def _add_to_tensor(self, x):
        return self.to_dense() + x

    def _adjoint(self):
        from kernflow.core.linear_operator.composite import LinearOperatorAdjoint
        return LinearOperatorAdjoint(self)

    def _inverse(self):
        from kernflow.core.linear_operator.composite import LinearOperatorInversion
        return LinearOperatorInversion(self)

    def _can_use_cholesky(self):
        return bool(self.is_self_adjoint and self.is_positive_definite)

    def _cholesky(self):
        from kernflow.core.linear_operator.basic import LinearOperatorLowerTriangular
        return LinearOperatorLowerTriangular(kf.cholesky(self.to_dense()), is_non_singular=True,
                                             is_self_adjoint=False, is_square=True)

    def _eigvals(self):
        return kf.self_adjoint_eigvals(self.to_dense())

    def _cond(self):
        if self.is_self_adjoint:
            vals = kf.abs(self.eigvals())
        else:
            vals = kf.svd(self.to_dense(), compute_uv=False)
        return kf.reduce_max(vals, axis=-1) / kf.reduce_min(vals, axis=-1)

    def _assert_non_singular(self):
        eps = np.finfo(self.dtype.real_dtype.as_numpy_dtype).eps
        return kf.assert_less(self.cond(), kf.cast(100. / eps, self.dtype.real_dtype),
                              message="%s: singular matrix up to precision epsilon." % self.name)

    def _assert_positive_definite(self):
        if self.is_self_adjoint is False:
            raise NotImplementedError("%s: positive definiteness is only checked for a self-adjoint "
                                      "operator" % self.name)
        return kf.assert_positive(kf.abs(kf.matrix_diag_part(kf.cholesky(self.to_dense()))),
                                  message="%s: matrix was not positive definite." % self.name)

    def _assert_self_adjoint(self):
        dense = self.to_dense()
        return kf.assert_equal(dense, kf.linalg.adjoint(dense),
                               message="%s: matrix was not equal to its adjoint." % self.name)

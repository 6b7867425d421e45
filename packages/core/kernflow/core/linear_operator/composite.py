"""Operators built from other operators: Composition, Adjoint, Inversion and Kronecker.

None of them materializes its factors: a composition applies them in turn, an adjoint or inverse
forwards to the wrapped operator's adjoint matmul or solve, and a Kronecker product applies each factor
to a reshaped argument and takes its determinant from the factors'.
"""

from __future__ import annotations

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.framework.tensor_shape import TensorShape, dimension_value
from kernflow.core.linear_operator.base import (LinearOperator, check_hint, dynamic_batch_broadcast,
                                                matrix_adjoint, static_batch_broadcast)

__all__ = ["LinearOperatorComposition", "LinearOperatorAdjoint", "LinearOperatorInversion",
           "LinearOperatorKronecker"]


def check_operators(operators, owner):
    """`operators` as a non-empty list of LinearOperators of one dtype (ValueError/TypeError otherwise)."""
    operators = list(operators)
    if not operators:
        raise ValueError("%s: expected a list of >=1 operators; found %s" % (owner, operators))
    for op in operators:
        if not isinstance(op, LinearOperator):
            raise TypeError("%s: expected LinearOperators; found %r" % (owner, op))
    dtypes = [op.dtype for op in operators]
    if any(d != dtypes[0] for d in dtypes):
        raise TypeError("%s: expected all operators to have the same dtype; found %s" % (
            owner, ", ".join("%s: %s" % (op.name, op.dtype.name) for op in operators)))
    return operators


def derived_hints(operators, what, **given):
    """Each given hint (`is_non_singular=...`), or True when every operator's is True.

    Raises:
        ValueError: a hint given as False that every operator has as True.
    """
    out = {}
    for attr, value in given.items():
        words = attr[3:].replace("_", "-")
        implied = True if all(getattr(op, attr) for op in operators) else None
        out[attr] = check_hint(value, implied, "The %s of %s operators is always %s." % (what, words, words))
    return out


class OperatorList(LinearOperator):
    """An operator made of the LinearOperators `self._operators` (one dtype, their graph parents)."""

    def __init__(self, operators, hints, is_square, name):
        self._operators = operators
        super().__init__(operators[0].dtype, sum((op.graph_parents for op in operators), []),
                         is_square=is_square, name=name, **hints)

    @property
    def operators(self):
        return self._operators

    def _factors_square(self):
        return all(op.is_square for op in self._operators)


def batch_of(operators):
    return static_batch_broadcast(*[op.batch_shape for op in operators])


def batch_tensor_of(operators):
    return dynamic_batch_broadcast(*[op.batch_shape_tensor() for op in operators])


def with_matrix_shape(batch, rows, cols):
    if batch.ndims is None:
        return TensorShape(None)
    return batch.concatenate([rows, cols])


class LinearOperatorComposition(OperatorList):
    """The product `A1 A2 ... Ak` of operators (TF1 `tf.linalg.LinearOperatorComposition`).

    Raises:
        ValueError: no operators, neighbouring shapes that cannot multiply, or a hint that contradicts
            the operators'. TypeError: operators of different dtypes.
    """

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name=None):
        operators = check_operators(operators, name or "LinearOperatorComposition")
        name = name or "_o_".join(op.name for op in operators)
        for left, right in zip(operators, operators[1:]):
            a, b = dimension_value(left.domain_dimension), dimension_value(right.range_dimension)
            if a is not None and b is not None and a != b:
                raise ValueError("%s: operators are incompatible: %s has domain dimension %d, %s range "
                                 "dimension %d" % (name, left.name, a, right.name, b))
        hints = derived_hints(operators, "composition", is_non_singular=is_non_singular)
        super().__init__(operators, dict(hints, is_self_adjoint=is_self_adjoint,
                                         is_positive_definite=is_positive_definite), is_square, name)

    def _shape(self):
        ops = self._operators
        return with_matrix_shape(batch_of(ops), ops[0].range_dimension, ops[-1].domain_dimension)

    def _shape_tensor(self):
        ops = self._operators
        return kf.concat([batch_tensor_of(ops), kf.stack([ops[0].range_dimension_tensor(),
                                                          ops[-1].domain_dimension_tensor()])], 0)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        order = self._operators if adjoint else self._operators[::-1]
        result = order[0].matmul(x, adjoint=adjoint, adjoint_arg=adjoint_arg)
        for op in order[1:]:
            result = op.matmul(result, adjoint=adjoint)
        return result

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        order = self._operators[::-1] if adjoint else self._operators
        result = order[0].solve(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)
        for op in order[1:]:
            result = op.solve(result, adjoint=adjoint)
        return result

    def _determinant(self):
        if not self._factors_square():
            return super()._determinant()
        result = self._operators[0].determinant()
        for op in self._operators[1:]:
            result = result * op.determinant()
        return result

    def _log_abs_determinant(self):
        if not self._factors_square():
            return super()._log_abs_determinant()
        return sum(op.log_abs_determinant() for op in self._operators[1:]) + \
            self._operators[0].log_abs_determinant()

    def _to_dense(self):
        result = self._operators[-1].to_dense()
        for op in self._operators[-2::-1]:
            result = op.matmul(result)
        return result


def _combined_hint(operator_hint, given, message):
    if operator_hint is not None and given is not None and operator_hint != given:
        raise ValueError(message)
    return operator_hint if given is None else given


class _Wrapper(LinearOperator):
    """An operator defined through one other operator, whose hints it must agree with."""

    def __init__(self, operator, hints, messages, name):
        if not isinstance(operator, LinearOperator):
            raise TypeError("%s: expected a LinearOperator; found %r" % (name, operator))
        self._operator = operator
        combined = [_combined_hint(getattr(operator, attr), given, msg)
                    for (attr, given), msg in zip(hints, messages)]
        super().__init__(operator.dtype, operator.graph_parents, *combined, name=name)

    @property
    def operator(self):
        return self._operator

    def _assert_non_singular(self):
        return self._operator.assert_non_singular()

    def _assert_positive_definite(self):
        return self._operator.assert_positive_definite()

    def _assert_self_adjoint(self):
        return self._operator.assert_self_adjoint()


_HINT_NAMES = ("is_non_singular", "is_self_adjoint", "is_positive_definite", "is_square")


class LinearOperatorAdjoint(_Wrapper):
    """The adjoint `A^H` of an operator, never materialized (TF1 `tf.linalg.LinearOperatorAdjoint`).

    Raises:
        ValueError: a hint disagrees with the operator's.
    """

    def __init__(self, operator, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name=None):
        given = (is_non_singular, is_self_adjoint, is_positive_definite, is_square)
        messages = ["An operator is %s if and only if its adjoint is %s." % (w, w)
                    for w in ("non-singular", "self-adjoint", "positive-definite", "square")]
        super().__init__(operator, list(zip(_HINT_NAMES, given)), messages,
                         name or getattr(operator, "name", "operator") + "_adjoint")

    def _shape(self):
        s = self._operator.shape
        return TensorShape(None) if s.ndims is None else s[:-2].concatenate([s[-1], s[-2]])

    def _shape_tensor(self):
        s = self._operator.shape_tensor()
        return kf.concat([s[:-2], kf.stack([s[-1], s[-2]])], 0)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self._operator.matmul(x, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _matvec(self, x, adjoint=False):
        return self._operator.matvec(x, adjoint=not adjoint)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._operator.solve(rhs, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _solvevec(self, rhs, adjoint=False):
        return self._operator.solvevec(rhs, adjoint=not adjoint)

    def _determinant(self):
        return kf.math.conj(self._operator.determinant()) if self.dtype.is_complex else \
            self._operator.determinant()

    def _log_abs_determinant(self):
        return self._operator.log_abs_determinant()

    def _diag_part(self):
        return kf.math.conj(self._operator.diag_part()) if self.dtype.is_complex else \
            self._operator.diag_part()

    def _trace(self):
        return kf.math.conj(self._operator.trace()) if self.dtype.is_complex else self._operator.trace()

    def _to_dense(self):
        return kf.linalg.adjoint(self._operator.to_dense())

    def _adjoint(self):
        return self._operator


class LinearOperatorInversion(_Wrapper):
    """The inverse `A^-1` of a square non-singular operator (TF1 `tf.linalg.LinearOperatorInversion`).

    matmul is the operator's solve and solve its matmul.

    Raises:
        ValueError: the operator or a hint is singular or not square, or a hint disagrees.
    """

    def __init__(self, operator, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name=None):
        if getattr(operator, "is_non_singular", None) is False or is_non_singular is False:
            raise ValueError("operator and supplied hints must result in a non-singular matrix")
        if getattr(operator, "is_square", None) is False or is_square is False:
            raise ValueError("operator and supplied hints must result in a square matrix")
        given = (is_non_singular, is_self_adjoint, is_positive_definite, is_square)
        messages = ["An operator is %s if and only if its inverse is %s." % (w, w)
                    for w in ("non-singular", "self-adjoint", "positive-definite", "square")]
        super().__init__(operator, list(zip(_HINT_NAMES, given)), messages,
                         name or getattr(operator, "name", "operator") + "_inv")

    def _shape(self):
        return self._operator.shape

    def _shape_tensor(self):
        return self._operator.shape_tensor()

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self._operator.solve(x, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _matvec(self, x, adjoint=False):
        return self._operator.solvevec(x, adjoint=adjoint)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._operator.matmul(rhs, adjoint=adjoint, adjoint_arg=adjoint_arg)

    def _solvevec(self, rhs, adjoint=False):
        return self._operator.matvec(rhs, adjoint=adjoint)

    def _determinant(self):
        return 1. / self._operator.determinant()

    def _log_abs_determinant(self):
        return -self._operator.log_abs_determinant()

    def _inverse(self):
        return self._operator


def _swap_last_axes_pair(x):
    """[..., a, b, c] -> [..., b, a, c]."""
    rank = x.shape.ndims
    if rank is not None:
        return kf.transpose(x, list(range(rank - 3)) + [rank - 2, rank - 3, rank - 1])
    r = kf.rank(x)
    return kf.transpose(x, kf.concat([kf.range(r - 3), kf.stack([r - 2, r - 3, r - 1])], 0))


def _dim(static, tensor_fn):
    v = dimension_value(static)
    return v if v is not None else tensor_fn()


class LinearOperatorKronecker(OperatorList):
    """The Kronecker product `A1 ⊗ A2 ⊗ ... ⊗ Ak` (TF1 `tf.linalg.LinearOperatorKronecker`).

    matmul and solve apply one factor at a time to a reshaped argument; the determinant is
    `prod_i det(A_i) ** (N / n_i)`, the trace the product of traces.

    Raises:
        ValueError: no operators or a hint contradicting the factors'. TypeError: mixed dtypes.
    """

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name=None):
        operators = check_operators(operators, name or "LinearOperatorKronecker")
        name = name or "_x_".join(op.name for op in operators)
        hints = derived_hints(operators, "Kronecker product", is_non_singular=is_non_singular,
                              is_self_adjoint=is_self_adjoint, is_positive_definite=is_positive_definite)
        super().__init__(operators, hints, is_square, name)

    def _shape(self):
        rows, cols = 1, 1
        for op in self._operators:
            r, c = dimension_value(op.range_dimension), dimension_value(op.domain_dimension)
            rows = None if rows is None or r is None else rows * r
            cols = None if cols is None or c is None else cols * c
        return with_matrix_shape(batch_of(self._operators), rows, cols)

    def _shape_tensor(self):
        rows = kf.reduce_prod(kf.stack([op.range_dimension_tensor() for op in self._operators]))
        cols = kf.reduce_prod(kf.stack([op.domain_dimension_tensor() for op in self._operators]))
        return kf.concat([batch_tensor_of(self._operators), kf.stack([rows, cols])], 0)

    def _rest(self):
        rest = self._operators[1:]
        return rest[0] if len(rest) == 1 else LinearOperatorKronecker(rest, name=self.name + "_rest")

    def _apply(self, x, adjoint, method):
        """`method` ("matmul"/"solve") of (A ⊗ B) on x [..., n1*n2, R], factor by factor."""
        if len(self._operators) == 1:
            return getattr(self._operators[0], method)(x, adjoint=adjoint)
        first, rest = self._operators[0], self._rest()
        in_first = _dim(first.range_dimension if adjoint == (method == "matmul") else first.domain_dimension,
                        first.range_dimension_tensor if adjoint == (method == "matmul") else
                        first.domain_dimension_tensor)
        shape = kf.shape(x)
        batch, cols = shape[:-2], shape[-1:]
        x = kf.reshape(x, kf.concat([batch, kf.stack([in_first, -1]), cols], 0))   # [..., n1, n2, R]
        x = _swap_last_axes_pair(x)                                                # [..., n2, n1, R]
        inner = kf.shape(x)
        x = kf.reshape(x, kf.concat([inner[:-3], inner[-3:-2], [-1]], 0))          # [..., n2, n1 R]
        x = getattr(rest, method)(x, adjoint=adjoint)                              # [..., m2, n1 R]
        inner = kf.shape(x)
        x = kf.reshape(x, kf.concat([inner[:-2], inner[-2:-1], kf.stack([in_first]), cols], 0))
        x = _swap_last_axes_pair(x)                                                # [..., n1, m2, R]
        inner = kf.shape(x)
        x = kf.reshape(x, kf.concat([inner[:-3], inner[-3:-2], [-1]], 0))          # [..., n1, m2 R]
        x = getattr(first, method)(x, adjoint=adjoint)                             # [..., m1, m2 R]
        inner = kf.shape(x)
        return kf.reshape(x, kf.concat([inner[:-2], [-1], cols], 0))

    def _with_static(self, y, x, adjoint, rows_if_adjoint, rows_otherwise):
        if x.shape.ndims is not None:
            batch = static_batch_broadcast(self.batch_shape, x.shape[:-2])
            if batch.ndims is not None:
                y.set_shape(batch.concatenate([rows_if_adjoint if adjoint else rows_otherwise, x.shape[-1]]))
        return y

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = matrix_adjoint(x, adjoint_arg)
        y = self._apply(x, adjoint, "matmul")
        return self._with_static(y, x, adjoint, self.domain_dimension, self.range_dimension)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        rhs = matrix_adjoint(rhs, adjoint_arg)
        y = self._apply(rhs, adjoint, "solve")
        return self._with_static(y, rhs, adjoint, self.range_dimension, self.domain_dimension)

    def _sizes(self):
        dims = [kf.cast(op.domain_dimension_tensor(), self.dtype.real_dtype) for op in self._operators]
        total = dims[0]
        for d in dims[1:]:
            total = total * d
        return dims, total

    def _determinant(self):
        if not self._factors_square():
            return super()._determinant()
        dims, total = self._sizes()
        result = None
        for op, n in zip(self._operators, dims):
            term = op.determinant() ** kf.cast(total / n, self.dtype)
            result = term if result is None else result * term
        return result

    def _log_abs_determinant(self):
        if not self._factors_square():
            return super()._log_abs_determinant()
        dims, total = self._sizes()
        return sum((total / n) * op.log_abs_determinant() for op, n in zip(self._operators, dims))

    def _kron_vectors(self, vectors):
        result = vectors[0]
        for v in vectors[1:]:
            outer = kf.expand_dims(result, -1) * kf.expand_dims(v, -2)
            shape = kf.shape(outer)
            result = kf.reshape(outer, kf.concat([shape[:-2], [-1]], 0))
        return result

    def _diag_part(self):
        if not self._factors_square():
            return super()._diag_part()
        return self._kron_vectors([op.diag_part() for op in self._operators])

    def _trace(self):
        if not self._factors_square():
            return super()._trace()
        result = self._operators[0].trace()
        for op in self._operators[1:]:
            result = result * op.trace()
        return result

    def _eigvals(self):
        return self._kron_vectors([op.eigvals() for op in self._operators])

    def _to_dense(self):
        result = self._operators[0].to_dense()
        for op in self._operators[1:]:
            left = kf.expand_dims(kf.expand_dims(result, -2), -1)               # [..., m1, 1, n1, 1]
            right = kf.expand_dims(kf.expand_dims(op.to_dense(), -2), -4)       # [..., 1, m2, 1, n2]
            outer = left * right
            shape = kf.shape(outer)
            result = kf.reshape(outer, kf.concat([shape[:-4], kf.stack([shape[-4] * shape[-3], -1])], 0))
        return result

    def _derived(self, ops, suffix, **hints):
        return LinearOperatorKronecker(ops, name=self.name + suffix, **hints)

    def _adjoint(self):
        return self._derived([op.adjoint() for op in self._operators], "_adjoint")

    def _inverse(self):
        return self._derived([op.inverse() for op in self._operators], "_inverse", is_non_singular=True)

    def _cholesky(self):
        return self._derived([op.cholesky() for op in self._operators], "_cholesky", is_non_singular=True,
                             is_square=True)

"""Block operators: BlockDiag and BlockLowerTriangular.

An argument is split along its rows into one block per diagonal operator; each block goes through the
operators of its block row or column and the results are concatenated. Solves are block forward (or,
for the adjoint, backward) substitution; determinants are products over the diagonal blocks.
"""

from __future__ import annotations

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.framework.tensor_shape import dimension_value
from kernflow.core.linear_operator.base import broadcast_matrix_batch, matrix_adjoint
from kernflow.core.linear_operator.composite import (OperatorList, batch_of, batch_tensor_of,
                                                     check_operators, derived_hints, with_matrix_shape)

__all__ = ["LinearOperatorBlockDiag", "LinearOperatorBlockLowerTriangular"]


def _split_rows(x, operators):
    """x [..., sum n_i, R] split into [..., n_i, R] by the diagonal operators' domain dimensions."""
    static = [dimension_value(op.domain_dimension) for op in operators]
    sizes = static if all(s is not None for s in static) else \
        kf.stack([op.domain_dimension_tensor() for op in operators])
    return kf.split(x, sizes, axis=-2, num=len(operators))


def _concat_rows(blocks):
    return kf.concat(broadcast_matrix_batch(blocks), axis=-2)


def _sum_dims(dims):
    return None if any(d is None for d in dims) else sum(dims)


def _check_square(operators, owner):
    for op in operators:
        if op.is_square is False:
            raise ValueError("%s: all diagonal operators must be square; %s has shape %s" % (
                owner, op.name, op.shape))


class _BlockSquare(OperatorList):
    """Shared by block operators whose diagonal blocks are `self._diagonal`."""

    def _shape(self):
        n = _sum_dims([dimension_value(op.domain_dimension) for op in self._diagonal])
        return with_matrix_shape(batch_of(self._all), n, n)

    def _shape_tensor(self):
        n = kf.add_n([op.domain_dimension_tensor() for op in self._diagonal])
        return kf.concat([batch_tensor_of(self._all), kf.stack([n, n])], 0)

    def _determinant(self):
        result = self._diagonal[0].determinant()
        for op in self._diagonal[1:]:
            result = result * op.determinant()
        return result

    def _log_abs_determinant(self):
        return sum(op.log_abs_determinant() for op in self._diagonal[1:]) + \
            self._diagonal[0].log_abs_determinant()

    def _diag_part(self):
        parts = [kf.expand_dims(op.diag_part(), -1) for op in self._diagonal]
        return kf.squeeze(_concat_rows(parts), [-1])

    def _trace(self):
        return sum(op.trace() for op in self._diagonal[1:]) + self._diagonal[0].trace()

    def _dense_rows(self, block_of):
        """The dense matrix from `block_of(i, j)` (an operator or None for a zero block)."""
        dims = [op.domain_dimension_tensor() for op in self._diagonal]
        dense = {(i, j): block_of(i, j).to_dense() for i in range(len(dims)) for j in range(len(dims))
                 if block_of(i, j) is not None}
        keys = list(dense)
        for k, v in zip(keys, broadcast_matrix_batch([dense[k] for k in keys])):
            dense[k] = v
        batch = kf.shape(next(iter(dense.values())))[:-2]
        rows = []
        for i, rows_i in enumerate(dims):
            row = [dense[(i, j)] if (i, j) in dense else
                   kf.zeros(kf.concat([batch, kf.stack([rows_i, cols_j])], 0), dtype=self.dtype)
                   for j, cols_j in enumerate(dims)]
            rows.append(kf.concat(row, axis=-1))
        return kf.concat(rows, axis=-2)


class LinearOperatorBlockDiag(_BlockSquare):
    """A block-diagonal matrix of square operators (TF1 `tf.linalg.LinearOperatorBlockDiag`).

    Raises:
        ValueError: no operators, a non-square one, `is_square` False, or a contradicting hint.
        TypeError: operators of different dtypes.
    """

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=True, name=None):
        operators = check_operators(operators, name or "LinearOperatorBlockDiag")
        name = name or "_ds_".join(op.name for op in operators)
        _check_square(operators, name)
        if is_square is False:
            raise ValueError("A blockdiagonal operator is always square.")
        self._diagonal = self._all = operators
        hints = derived_hints(operators, "block diagonal", is_non_singular=is_non_singular,
                              is_self_adjoint=is_self_adjoint, is_positive_definite=is_positive_definite)
        super().__init__(operators, hints, True, name)

    def _each(self, method, x, adjoint):
        blocks = _split_rows(x, self._diagonal)
        return _concat_rows([getattr(op, method)(b, adjoint=adjoint)
                             for op, b in zip(self._diagonal, blocks)])

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self._each("matmul", matrix_adjoint(x, adjoint_arg), adjoint)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._each("solve", matrix_adjoint(rhs, adjoint_arg), adjoint)

    def _to_dense(self):
        return self._dense_rows(lambda i, j: self._diagonal[i] if i == j else None)

    def _derived(self, ops, suffix, **hints):
        return LinearOperatorBlockDiag(ops, name=self.name + suffix, **hints)

    def _adjoint(self):
        return self._derived([op.adjoint() for op in self._diagonal], "_adjoint")

    def _inverse(self):
        return self._derived([op.inverse() for op in self._diagonal], "_inverse", is_non_singular=True)

    def _cholesky(self):
        return self._derived([op.cholesky() for op in self._diagonal], "_cholesky", is_non_singular=True)

    def _eigvals(self):
        return kf.squeeze(_concat_rows([kf.expand_dims(op.eigvals(), -1) for op in self._diagonal]), [-1])


class LinearOperatorBlockLowerTriangular(_BlockSquare):
    """A block lower-triangular matrix (TF `tf.linalg.LinearOperatorBlockLowerTriangular`).

    `operators[i]` is the list of the i-th block row's i+1 operators; `operators[i][i]` are the square
    diagonal blocks. solve is block forward substitution with the diagonal blocks' solves.

    Raises:
        ValueError: a row of the wrong length, a non-square diagonal block, blocks whose dimensions do
            not line up, or `is_square` False. TypeError: operators of different dtypes.
    """

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorBlockLowerTriangular"):
        rows = [list(row) for row in operators]
        if not rows:
            raise ValueError("%s: expected a non-empty list of operator rows" % name)
        for i, row in enumerate(rows):
            if len(row) != i + 1:
                raise ValueError("%s: row %d must hold %d operators; found %d" % (name, i, i + 1, len(row)))
        if is_square is False:
            raise ValueError("A block lower triangular operator is always square.")
        self._rows = rows
        self._all = check_operators([op for row in rows for op in row], name)
        self._diagonal = [row[-1] for row in rows]
        _check_square(self._diagonal, name)
        self._check_blocks(name)
        hints = derived_hints(self._diagonal, "block lower triangular", is_non_singular=is_non_singular)
        super().__init__(self._all, dict(hints, is_self_adjoint=is_self_adjoint,
                                         is_positive_definite=is_positive_definite), True, name)

    def _check_blocks(self, name):
        for i, row in enumerate(self._rows):
            for j, op in enumerate(row[:-1]):
                want = (dimension_value(self._diagonal[i].range_dimension),
                        dimension_value(self._diagonal[j].domain_dimension))
                got = (dimension_value(op.range_dimension), dimension_value(op.domain_dimension))
                if any(w is not None and g is not None and w != g for w, g in zip(want, got)):
                    raise ValueError("%s: block (%d, %d) %s must have shape [..., %s, %s]; got %s" % (
                        name, i, j, op.name, want[0], want[1], op.shape))

    @property
    def operators(self):
        return self._rows

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        xs = _split_rows(matrix_adjoint(x, adjoint_arg), self._diagonal)
        n = len(self._rows)
        if adjoint:   # block j of the result: sum over i >= j of L_ij^H x_i
            out = [kf.add_n(broadcast_matrix_batch([self._rows[i][j].matmul(xs[i], adjoint=True)
                                                    for i in range(j, n)])) for j in range(n)]
        else:
            out = [kf.add_n(broadcast_matrix_batch([op.matmul(xs[j]) for j, op in enumerate(row)]))
                   for row in self._rows]
        return _concat_rows(out)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        bs = _split_rows(matrix_adjoint(rhs, adjoint_arg), self._diagonal)
        n = len(self._rows)
        xs = [None] * n
        order = range(n - 1, -1, -1) if adjoint else range(n)
        for i in order:
            known = range(i + 1, n) if adjoint else range(i)
            terms = [self._rows[k][i].matmul(xs[k], adjoint=True) if adjoint else
                     self._rows[i][k].matmul(xs[k]) for k in known]
            residual = bs[i] - kf.add_n(broadcast_matrix_batch(terms)) if terms else bs[i]
            xs[i] = self._diagonal[i].solve(residual, adjoint=adjoint)
        return _concat_rows(xs)

    def _to_dense(self):
        return self._dense_rows(lambda i, j: self._rows[i][j] if j <= i else None)

"""Linear algebra ops on batches of matrices (the last two dimensions; leading ones are batch).

OpDefs and wrappers; the TF1 top-level names in ``__all__`` become kf.<name>, and
kernflow.core.linalg holds the `tf.linalg` names. CPU kernels are in kernflow.kernels.cpu.linalg
(host only: no GPU kernels yet), gradients in kernflow.core.grads.linalg_grad.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["matrix_inverse", "matrix_determinant", "cholesky", "matrix_solve", "matrix_triangular_solve",
           "matrix_solve_ls", "cholesky_solve", "qr", "svd", "self_adjoint_eig", "self_adjoint_eigvals",
           "matrix_diag", "matrix_diag_part", "matrix_set_diag", "matrix_band_part", "trace", "eye",
           "norm", "cross"]

_T = "T: {double, float, half, complex64, complex128}"
_TR = "T: {double, float, half}"
_S = _ts.TensorShape


def _matrix(shape, op, square=False):
    s = shape.with_rank_at_least(2)
    if s.rank is None:
        return s
    m, n = s.dim_values[-2:]
    if square and m is not None and n is not None and m != n:
        raise ValueError(f"Dimensions must be equal, but are {m} and {n} for '{op.name}' (op: "
                         f"'{op.type}') with input shapes: {shape}: the matrices must be square")
    return s


def _square_shape(op):
    return [_matrix(op.inputs[0].shape, op, square=True)]


def _batch(s):
    return _S(None) if s.rank is None else _S(s.dim_values[:-2])


def _det_shape(op):
    return [_batch(_matrix(op.inputs[0].shape, op, square=True))]


def _log_det_shape(op):
    b = _batch(_matrix(op.inputs[0].shape, op, square=True))
    return [b, b]


def _batch_broadcast(op, a, b):
    """The numpy broadcast of the batch dims of matrices a and b (the solve kernels broadcast
    them, as TF2's triangular solve does; TF1 requires them equal, a case of this)."""
    try:
        return _ts.broadcast_shape(_batch(a), _batch(b))
    except ValueError:
        raise ValueError(f"Batch dimensions {_batch(a)} and {_batch(b)} do not broadcast") from None


def _solve_shape(op):
    a = _matrix(op.inputs[0].shape, op, square=True)
    b = _matrix(op.inputs[1].shape, op)
    if a.rank is None or b.rank is None:
        return [_S(None)]
    rows = _ts.Dimension(a.dim_values[-1]).merge_with(_ts.Dimension(b.dim_values[-2])).value
    return [_batch_broadcast(op, a, b).concatenate([rows, b.dim_values[-1]])]


def _ls_shape(op):
    a, b = _matrix(op.inputs[0].shape, op), _matrix(op.inputs[1].shape, op)
    if a.rank is None or b.rank is None:
        return [_S(None)]
    return [_batch_broadcast(op, a, b).concatenate([a.dim_values[-1], b.dim_values[-1]])]


def _mn(op):
    s = _matrix(op.inputs[0].shape, op)
    if s.rank is None:
        return None, None, None
    m, n = s.dim_values[-2:]
    k = None if m is None or n is None else min(m, n)
    return list(s.dim_values[:-2]), (m, n), k


def _qr_shape(op):
    batch, (m, n), k = _mn(op) if op.inputs[0].shape.rank is not None else (None, (None, None), None)
    if batch is None:
        return [_S(None), _S(None)]
    full = op.get_attr("full_matrices")
    return [_S(batch + [m, m if full else k]), _S(batch + [m if full else k, n])]


def _svd_shape(op):
    if op.inputs[0].shape.rank is None:
        return [_S(None)] * 3
    batch, (m, n), k = _mn(op)
    if not op.get_attr("compute_uv"):
        return [_S(batch + [k]), _S([0]), _S([0])]
    full = op.get_attr("full_matrices")
    return [_S(batch + [k]), _S(batch + [m, m if full else k]), _S(batch + [n, n if full else k])]


def _eig_shape(op):
    s = _matrix(op.inputs[0].shape, op, square=True)
    if s.rank is None:
        return [_S(None), _S(None)]
    n = _ts.Dimension(s.dim_values[-1]).merge_with(_ts.Dimension(s.dim_values[-2])).value
    v = _S(list(s.dim_values[:-2]) + [n, n]) if op.get_attr("compute_v") else _S([0])
    return [_S(list(s.dim_values[:-2]) + [n]), v]


def _diag_shape(op):
    d = op.inputs[0].shape.with_rank_at_least(1)
    return [_S(None) if d.rank is None else _S(list(d.dim_values) + [d.dim_values[-1]])]


def _diag_part_shape(op):
    s = _matrix(op.inputs[0].shape, op)
    if s.rank is None:
        return [s]
    m, n = s.dim_values[-2:]
    k = None if m is None or n is None else min(m, n)
    return [_S(list(s.dim_values[:-2]) + [k])]


def _set_diag_shape(op):
    return [_matrix(op.inputs[0].shape, op)]


register_op("MatrixInverse", inputs=["input: T"], outputs=["output: T"],
            attrs=["adjoint: bool = false", _T], shape_fn=_square_shape,
            doc="Computes the inverse of each square matrix in input (of its adjoint with "
                "adjoint=true). Fails with 'Input is not invertible' for a singular matrix.")
register_op("MatrixDeterminant", inputs=["input: T"], outputs=["output: T"], attrs=[_T],
            shape_fn=_det_shape, doc="Computes the determinant of each square matrix in input.")
register_op("LogMatrixDeterminant", inputs=["input: T"],
            outputs=["sign: T", "log_abs_determinant: T"], attrs=[_T], shape_fn=_log_det_shape,
            doc="Computes the sign and the log of the absolute value of the determinant of each "
                "square matrix in input.")
register_op("Cholesky", inputs=["input: T"], outputs=["output: T"], attrs=[_T],
            shape_fn=_square_shape,
            doc="Computes the lower Cholesky factor L (input = L L^H) of each Hermitian positive "
                "definite matrix in input; only the lower triangle of input is read.")
register_op("MatrixSolve", inputs=["matrix: T", "rhs: T"], outputs=["output: T"],
            attrs=["adjoint: bool = false", _T], shape_fn=_solve_shape,
            doc="Solves matrix X = rhs (adjoint(matrix) X = rhs with adjoint=true) for each square "
                "matrix of the batch.")
register_op("MatrixTriangularSolve", inputs=["matrix: T", "rhs: T"], outputs=["output: T"],
            attrs=["lower: bool = true", "adjoint: bool = false", _T], shape_fn=_solve_shape,
            doc="Solves matrix X = rhs by substitution, reading only the lower (lower=true) or upper "
                "triangle of each square matrix (its adjoint with adjoint=true).")
register_op("MatrixSolveLs", inputs=["matrix: T", "rhs: T", "l2_regularizer: double"],
            outputs=["output: T"], attrs=[_T, "fast: bool = true"], shape_fn=_ls_shape,
            doc="Solves the linear least-squares problems min ||matrix X - rhs||^2 + l2_regularizer "
                "||X||^2 for each matrix of the batch.")
register_op("Qr", inputs=["input: T"], outputs=["q: T", "r: T"],
            attrs=["full_matrices: bool = false", _T], shape_fn=_qr_shape,
            doc="Computes the QR decompositions input = q r: q has orthonormal columns, r is upper "
                "triangular (q is [M, M] and r [M, N] with full_matrices, else [M, K], [K, N]).")
register_op("Svd", inputs=["input: T"], outputs=["s: T", "u: T", "v: T"],
            attrs=["compute_uv: bool = true", "full_matrices: bool = false", _T], shape_fn=_svd_shape,
            doc="Computes the singular value decompositions input = u diag(s) v^H, singular values "
                "in descending order; u and v are empty without compute_uv.")
register_op("SelfAdjointEigV2", inputs=["input: T"], outputs=["e: T", "v: T"],
            attrs=["compute_v: bool = true", _T], shape_fn=_eig_shape,
            doc="Computes the eigenvalues (ascending) and eigenvectors (columns of v) of each "
                "self-adjoint matrix, reading only its lower triangle; v is empty without compute_v.")
register_op("MatrixDiag", inputs=["diagonal: T"], outputs=["output: T"], attrs=["T: type"],
            shape_fn=_diag_shape,
            doc="Returns square matrices with the last dimension of diagonal on their main diagonal "
                "and zeros elsewhere.")
register_op("MatrixDiagPart", inputs=["input: T"], outputs=["diagonal: T"], attrs=["T: type"],
            shape_fn=_diag_part_shape,
            doc="Returns the main diagonal of each matrix of input (min(M, N) elements).")
register_op("MatrixSetDiag", inputs=["input: T", "diagonal: T"], outputs=["output: T"],
            attrs=["T: type"], shape_fn=_set_diag_shape,
            doc="Returns input with the main diagonal of each matrix replaced by diagonal.")
register_op("MatrixBandPart", inputs=["input: T", "num_lower: Tindex", "num_upper: Tindex"],
            outputs=["band: T"], attrs=["T: type", "Tindex: {int32, int64} = int64"],
            shape_fn=_set_diag_shape,
            doc="Keeps the band of each matrix of input with num_lower subdiagonals and num_upper "
                "superdiagonals (a negative count keeps the whole triangle) and zeroes the rest.")

# Op types of this module: host only (kernel_contract.HOST_ONLY_OPS) until they get GPU kernels.
LINALG_OPS = ("MatrixInverse", "MatrixDeterminant", "LogMatrixDeterminant", "Cholesky", "MatrixSolve",
              "MatrixTriangularSolve", "MatrixSolveLs", "Qr", "Svd", "SelfAdjointEigV2", "MatrixDiag",
              "MatrixDiagPart", "MatrixSetDiag", "MatrixBandPart")


def _op(op_type, inputs, name=None, attrs=None):
    return apply_op(op_type, inputs, attrs, name=name)


def _out(op_type, inputs, name=None, attrs=None):
    return _op(op_type, inputs, name, attrs).outputs[0]


def matrix_inverse(input, adjoint=False, name=None):  # noqa: A002 - TF's argument names
    """Computes the inverse of each square matrix in `input` (op `MatrixInverse`).

    Args:
        input: a floating or complex Tensor [..., M, M].
        adjoint: invert the adjoint (conjugate transpose) of each matrix instead.
        name: optional op name.

    Raises:
        ValueError: if the matrices are not square (when that is known statically).
        InvalidArgumentError (at run time): "Input is not invertible" for a singular matrix.
    """
    return _out("MatrixInverse", [input], name, {"adjoint": adjoint})


def matrix_determinant(input, name=None):  # noqa: A002
    """Computes the determinant of each square matrix in `input` [..., M, M]; returns [...]."""
    return _out("MatrixDeterminant", [input], name)


def log_matrix_determinant(input, name=None):  # noqa: A002
    """Returns (sign, log_abs_determinant) of each square matrix in `input` (op LogMatrixDeterminant).

    Args:
        input: a floating or complex Tensor [..., M, M].
        name: optional op name.
    """
    return tuple(_op("LogMatrixDeterminant", [input], name).outputs)


def cholesky(input, name=None):  # noqa: A002
    """Computes the lower Cholesky factor of each Hermitian positive definite matrix in `input`.

    Only the lower triangle of `input` is read (op `Cholesky`).
    """
    return _out("Cholesky", [input], name)


def matrix_solve(matrix, rhs, adjoint=False, name=None):
    """Solves `matrix @ X = rhs` for X (op `MatrixSolve`).

    Args:
        matrix: a Tensor [..., M, M].
        rhs: a Tensor [..., M, K] of matrix's dtype and batch shape.
        adjoint: solve with the adjoint of each matrix instead.
        name: optional op name.

    Raises:
        InvalidArgumentError (at run time): "Input matrix is not invertible." for a singular matrix.
    """
    return _out("MatrixSolve", [matrix, rhs], name, {"adjoint": adjoint})


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """Solves the triangular systems `matrix @ X = rhs` (op `MatrixTriangularSolve`).

    Args:
        matrix: a Tensor [..., M, M]; only its lower (lower=True) or upper triangle is read.
        rhs: a Tensor [..., M, K].
        lower: whether the matrices are lower triangular.
        adjoint: solve with the adjoint of each matrix instead.
        name: optional op name.
    """
    return _out("MatrixTriangularSolve", [matrix, rhs], name, {"lower": lower, "adjoint": adjoint})


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """Solves the (regularized) least-squares problems min ||matrix X - rhs|| (op `MatrixSolveLs`).

    Args:
        matrix: a Tensor [..., M, N].
        rhs: a Tensor [..., M, K].
        l2_regularizer: a scalar >= 0 (a float64 Tensor or a Python number).
        fast: accepted for TF compatibility; the kernel always uses numpy's least squares.
        name: optional op name.

    Returns:
        A Tensor [..., N, K].
    """
    l2 = _ops.convert_to_tensor(l2_regularizer, dtype=_dtypes.float64, name="l2_regularizer")
    return _out("MatrixSolveLs", [matrix, rhs, l2], name, {"fast": fast})


def cholesky_solve(chol, rhs, name=None):
    """Solves `A X = rhs` given the Cholesky factor `chol` of A, by two triangular solves.

    Args:
        chol: a Tensor [..., M, M], the lower Cholesky factors.
        rhs: a Tensor [..., M, K].
        name: optional name scope (default "cholesky_solve").
    """
    with _ops.name_scope(name, "cholesky_solve", [chol, rhs]):
        y = matrix_triangular_solve(chol, rhs, adjoint=False, lower=True)
        return matrix_triangular_solve(chol, y, adjoint=True, lower=True)


def qr(input, full_matrices=False, name=None):  # noqa: A002
    """Computes the QR decomposition of each matrix in `input`; returns (q, r) (op `Qr`)."""
    return tuple(_op("Qr", [input], name, {"full_matrices": full_matrices}).outputs)


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """Computes the singular value decompositions `tensor = u @ diag(s) @ adjoint(v)` (op `Svd`).

    Args:
        tensor: a Tensor [..., M, N].
        full_matrices: return u [..., M, M] and v [..., N, N] rather than [..., M, P], [..., N, P].
        compute_uv: also return u and v.
        name: optional op name.

    Returns:
        (s, u, v) with compute_uv, else s alone; s [..., P] in descending order, P = min(M, N).
    """
    op = _op("Svd", [tensor], name, {"compute_uv": compute_uv, "full_matrices": full_matrices})
    return tuple(op.outputs) if compute_uv else op.outputs[0]


def self_adjoint_eig(tensor, name=None):
    """Returns (e, v): the ascending eigenvalues and the eigenvectors (columns) of each self-adjoint
    matrix in `tensor` (op `SelfAdjointEigV2`; only the lower triangle is read)."""
    return tuple(_op("SelfAdjointEigV2", [tensor], name, {"compute_v": True}).outputs)


def self_adjoint_eigvals(tensor, name=None):
    """Returns the ascending eigenvalues of each self-adjoint matrix in `tensor` [..., N, N]."""
    return _op("SelfAdjointEigV2", [tensor], name, {"compute_v": False}).outputs[0]


def matrix_diag(diagonal, name="diag"):
    """Returns matrices [..., N, N] with `diagonal` [..., N] on their main diagonal (op MatrixDiag)."""
    return _out("MatrixDiag", [diagonal], name)


def matrix_diag_part(input, name="diag_part"):  # noqa: A002
    """Returns the main diagonal [..., min(M, N)] of each matrix in `input` (op `MatrixDiagPart`)."""
    return _out("MatrixDiagPart", [input], name)


def matrix_set_diag(input, diagonal, name="set_diag"):  # noqa: A002
    """Returns `input` with the main diagonal of each matrix set to `diagonal` (op `MatrixSetDiag`)."""
    return _out("MatrixSetDiag", [input, diagonal], name)


def matrix_band_part(input, num_lower, num_upper, name=None):  # noqa: A002
    """Keeps the central band of each matrix of `input` (op `MatrixBandPart`).

    Args:
        input: a Tensor [..., M, N].
        num_lower: the number of subdiagonals to keep; negative keeps the whole lower triangle.
        num_upper: the number of superdiagonals to keep; negative keeps the whole upper triangle.
        name: optional op name.
    """
    num_lower = _ops.convert_to_tensor(num_lower, preferred_dtype=_dtypes.int64, name="num_lower")
    num_upper = _ops.convert_to_tensor(num_upper, dtype=num_lower.dtype.base_dtype, name="num_upper")
    return _out("MatrixBandPart", [input, num_lower, num_upper], name)


def trace(x, name=None):
    """Returns the sum of the main diagonal of each matrix in `x` [..., M, N], a Tensor [...]."""
    from kernflow.core.ops import math_ops
    with _ops.name_scope(name, "Trace", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        return math_ops.reduce_sum(matrix_diag_part(x), [-1], name=name)


def eye(num_rows, num_columns=None, batch_shape=None, dtype=_dtypes.float32, name=None):
    """Returns an identity matrix [*batch_shape, num_rows, num_columns] (ones on the diagonal).

    Args:
        num_rows: a non-negative int (or scalar int Tensor).
        num_columns: defaults to num_rows.
        batch_shape: an optional list of ints: the leading dimensions.
        dtype: the element type.
        name: optional name scope (default "eye").
    """
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, "eye", [num_rows, num_columns, batch_shape]):
        if num_columns is None:
            num_columns = num_rows
        batch = list(batch_shape or [])
        if isinstance(num_rows, int) and isinstance(num_columns, int):
            k = min(num_rows, num_columns)
            ones = array_ops.ones(batch + [k], dtype=dtype)
            if num_rows == num_columns:
                return matrix_diag(ones)
            zeros = array_ops.zeros(batch + [num_rows, num_columns], dtype=dtype)
            return matrix_set_diag(zeros, ones)
        from kernflow.core.ops import math_ops
        k = math_ops.minimum(num_rows, num_columns)
        ones = array_ops.ones(array_ops.concat([array_ops.constant(batch, _dtypes.int32),
                                                array_ops.reshape(k, [1])], 0), dtype=dtype)
        zeros = array_ops.zeros(array_ops.concat([array_ops.constant(batch, _dtypes.int32),
                                                  array_ops.stack([num_rows, num_columns])], 0),
                                dtype=dtype)
        return matrix_set_diag(zeros, ones)


def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None, keep_dims=None):  # noqa: A002
    """Computes a vector or matrix norm, like TF1 `tf.norm`.

    Args:
        tensor: a floating or complex Tensor.
        ord: "euclidean" / "fro" (2-norm of the flattened axes), 1, 2 (vectors only), np.inf, or a
            positive number p for vectors; 1 and np.inf are also supported for matrices (axis a pair).
        axis: None (all elements, as a vector), an int, or a pair of ints (matrix norms).
        keepdims: keep the reduced axes with length 1.
        name: optional name scope (default "norm").
        keep_dims: the deprecated spelling of keepdims.

    Raises:
        ValueError: for an unsupported `ord` or `axis`.
    """
    import numpy as np

    from kernflow.core.ops import math_ops as mo
    keepdims = bool(keepdims if keepdims is not None else keep_dims)
    is_matrix = isinstance(axis, (list, tuple)) and len(axis) == 2
    if isinstance(axis, (list, tuple)) and not is_matrix:
        if len(axis) != 1:
            raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique integers, got "
                             f"{axis}")
        axis = axis[0]
    supported = ["euclidean", "fro", 1, np.inf] if is_matrix else ["euclidean", "fro", 1, 2, np.inf]
    if ord not in supported and (is_matrix or not (isinstance(ord, (int, float)) and ord > 0)):
        raise ValueError(f"'ord' must be a supported {'matrix' if is_matrix else 'vector'} norm, got "
                         f"{ord!r}")
    with _ops.name_scope(name, "norm", [tensor]):
        t = _ops.convert_to_tensor(tensor, name="tensor")
        a = mo.abs(t)
        if ord in ("euclidean", "fro", 2):
            return mo.sqrt(mo.reduce_sum(a * a, axis, keepdims=keepdims))
        if is_matrix:  # 1: max column sum; inf: max row sum
            rows, cols = axis
            sum_axis, max_axis = (rows, cols) if ord == 1 else (cols, rows)
            sums = mo.reduce_sum(a, sum_axis, keepdims=True)
            out = mo.reduce_max(sums, max_axis, keepdims=True)
            return out if keepdims else _squeeze_pair(out, axis)
        if ord == np.inf:
            return mo.reduce_max(a, axis, keepdims=keepdims)
        if ord == 1:
            return mo.reduce_sum(a, axis, keepdims=keepdims)
        p = _ops.convert_to_tensor(float(ord), dtype=a.dtype.base_dtype)
        return mo.pow(mo.reduce_sum(mo.pow(a, p), axis, keepdims=keepdims), 1.0 / p)


def _squeeze_pair(t, axis):
    from kernflow.core.ops import array_ops
    return array_ops.squeeze(t, list(axis))


def adjoint(matrix, name=None):
    """Returns the conjugate transpose of each matrix in `matrix` [..., M, N]."""
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, "adjoint", [matrix]):
        return array_ops.matrix_transpose(_ops.convert_to_tensor(matrix, name="matrix"),
                                          conjugate=True)


def logdet(matrix, name=None):
    """Returns log(det(matrix)) of Hermitian positive definite matrices, from their Cholesky factors:
    2 * sum(log(diag(cholesky(matrix))))."""
    from kernflow.core.ops import math_ops as mo
    from kernflow.core.ops.math_ops_composite import real
    with _ops.name_scope(name, "logdet", [matrix]):
        d = real(matrix_diag_part(cholesky(matrix)))
        return 2.0 * mo.reduce_sum(mo.log(d), [-1])


def matvec(a, b, transpose_a=False, adjoint_a=False, name=None):
    """Multiplies the matrices a [..., M, N] by the vectors b [..., N]: returns [..., M]."""
    from kernflow.core.ops import array_ops
    from kernflow.core.ops import math_ops as mo
    with _ops.name_scope(name, "MatVec", [a, b]):
        out = mo.matmul(a, array_ops.expand_dims(b, -1), transpose_a=transpose_a, adjoint_a=adjoint_a)
        return array_ops.squeeze(out, [-1])


def cross(a, b, name=None):
    """Returns the cross products of the 3-vectors along the last dimension of a and b."""
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, "Cross", [a, b]):
        a = _ops.convert_to_tensor(a, name="a")
        b = _ops.convert_to_tensor(b, name="b", dtype=a.dtype.base_dtype)
        for t in (a, b):
            if t.shape.rank is not None and t.shape.dim_values[-1] not in (None, 3):
                raise ValueError(f"Cross: the last dimension must be 3, got shape {t.shape}")
        a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
        b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
        return array_ops.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)


def normalize(tensor, ord="euclidean", axis=None, name=None):  # noqa: A002
    """Returns (tensor / norm, norm), the norm computed like `norm` with keepdims=True."""
    with _ops.name_scope(name, "normalize", [tensor]):
        tensor = _ops.convert_to_tensor(tensor, name="tensor")
        n = norm(tensor, ord=ord, axis=axis, keepdims=True)
        return tensor / n, n


def matrix_rank(a, tol=None, validate_args=False, name=None):
    """Returns the number of singular values of each matrix in `a` above `tol` (int32).

    The default tol is max(M, N) * eps * the largest singular value, as in TF and numpy.
    """
    import numpy as np

    from kernflow.core.ops import math_ops as mo
    with _ops.name_scope(name, "matrix_rank", [a, tol]):
        a = _ops.convert_to_tensor(a, name="a")
        s = svd(a, compute_uv=False)
        if tol is None:
            m_n = a.shape.dim_values[-2:] if a.shape.rank is not None else (None, None)
            if None in m_n:
                from kernflow.core.ops import array_ops
                dims = mo.cast(mo.reduce_max(array_ops.shape(a)[-2:]), s.dtype.base_dtype)
            else:
                dims = float(max(m_n))
            eps = float(np.finfo(s.dtype.base_dtype.as_numpy_dtype).eps)
            tol = dims * eps * mo.reduce_max(s, [-1], keepdims=True)
        return mo.reduce_sum(mo.cast(s > tol, _dtypes.int32), [-1])


def pinv(a, rcond=None, validate_args=False, name=None):
    """Returns the Moore-Penrose pseudo-inverse of each matrix in `a` [..., M, N], from its SVD;
    singular values below rcond * max(s) count as zero (default rcond: 10 * max(M, N) * eps)."""
    import numpy as np

    from kernflow.core.ops import array_ops
    from kernflow.core.ops import math_ops as mo
    with _ops.name_scope(name, "pinv", [a, rcond]):
        a = _ops.convert_to_tensor(a, name="a")
        s, u, v = svd(a, full_matrices=False, compute_uv=True)
        if rcond is None:
            m_n = a.shape.dim_values[-2:]
            rcond = 10.0 * max(m_n) * float(np.finfo(a.dtype.base_dtype.as_numpy_dtype).eps)
        cutoff = rcond * mo.reduce_max(s, [-1], keepdims=True)
        s_inv = mo.where_v2(s > cutoff, mo.reciprocal(mo.maximum(s, cutoff)), array_ops.zeros_like(s))
        return mo.matmul(v * array_ops.expand_dims(s_inv, -2), u, adjoint_b=True)

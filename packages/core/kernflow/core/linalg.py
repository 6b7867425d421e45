"""`kf.linalg`: TF1's `tf.linalg` namespace (kernflow.core.ops.linalg_ops and friends).

The LinearOperator classes come from kernflow.core.linear_operator. Not available: the `experimental`
submodule.
"""

from kernflow.core.linear_operator import *  # noqa: F401,F403  (the LinearOperator classes)
from kernflow.core.linear_operator import __all__ as _operators
from kernflow.core.ops.array_ops_shape import matrix_transpose, transpose
from kernflow.core.ops.clip_ops import global_norm
from kernflow.core.ops.linalg_ops import (adjoint, cholesky, cholesky_solve, cross, eye, logdet,
                                          matrix_rank, matvec, norm, normalize, pinv, qr, svd, trace)
from kernflow.core.ops.linalg_ops import log_matrix_determinant as slogdet
from kernflow.core.ops.linalg_ops import matrix_band_part as band_part
from kernflow.core.ops.linalg_ops import matrix_determinant as det
from kernflow.core.ops.linalg_ops import matrix_diag as diag
from kernflow.core.ops.linalg_ops import matrix_diag_part as diag_part
from kernflow.core.ops.linalg_ops import matrix_inverse as inv
from kernflow.core.ops.linalg_ops import matrix_set_diag as set_diag
from kernflow.core.ops.linalg_ops import matrix_solve as solve
from kernflow.core.ops.linalg_ops import matrix_solve_ls as lstsq
from kernflow.core.ops.linalg_ops import matrix_triangular_solve as triangular_solve
from kernflow.core.ops.linalg_ops import self_adjoint_eig as eigh
from kernflow.core.ops.linalg_ops import self_adjoint_eigvals as eigvalsh
from kernflow.core.ops.math_ops_matmul import matmul
from kernflow.core.ops.math_ops_more import (eigh_tridiagonal, einsum, expm, logm, lu, lu_matrix_inverse,
                                             lu_reconstruct, lu_solve, sqrtm, tensor_diag, tensor_diag_part,
                                             tensordot, tridiagonal_matmul, tridiagonal_solve)
from kernflow.core.ops.nn_ops_impl import l2_normalize

__all__ = ["adjoint", "band_part", "cholesky", "cholesky_solve", "cross", "det", "diag", "diag_part",
           "eigh", "eigvalsh", "eye", "global_norm", "inv", "l2_normalize", "logdet", "lstsq", "matmul",
           "matrix_rank", "matrix_transpose", "matvec", "norm", "normalize", "pinv", "qr", "set_diag",
           "slogdet", "solve", "svd", "trace", "transpose", "triangular_solve"]
__all__ += ["eigh_tridiagonal", "einsum", "expm", "logm", "lu", "lu_matrix_inverse", "lu_reconstruct",
            "lu_solve", "sqrtm", "tensor_diag", "tensor_diag_part", "tensordot", "tridiagonal_matmul",
            "tridiagonal_solve"]
__all__ += _operators

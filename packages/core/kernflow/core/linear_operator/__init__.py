"""The `tf.linalg.LinearOperator` family (TF1 1.15), as graph compositions of kernflow's linalg ops.

`base` holds the `LinearOperator` base class and shared helpers; `basic` the operators defined by one
tensor (FullMatrix, Diag, LowerTriangular, Householder, Permutation); `identity` the sized ones
(Identity, ScaledIdentity, Zeros); `composite` the operators over operators (Composition, Adjoint,
Inversion, Kronecker); `block` BlockDiag and BlockLowerTriangular; `low_rank` LowRankUpdate;
`structured` Toeplitz and Tridiag; `circulant` the 1-D, 2-D and 3-D circulants.
"""

from kernflow.core.linear_operator.base import LinearOperator
from kernflow.core.linear_operator.basic import (LinearOperatorDiag, LinearOperatorFullMatrix,
                                                 LinearOperatorHouseholder, LinearOperatorLowerTriangular,
                                                 LinearOperatorPermutation)
from kernflow.core.linear_operator.block import LinearOperatorBlockDiag, LinearOperatorBlockLowerTriangular
from kernflow.core.linear_operator.circulant import (LinearOperatorCirculant, LinearOperatorCirculant2D,
                                                     LinearOperatorCirculant3D)
from kernflow.core.linear_operator.composite import (LinearOperatorAdjoint, LinearOperatorComposition,
                                                     LinearOperatorInversion, LinearOperatorKronecker)
from kernflow.core.linear_operator.identity import (LinearOperatorIdentity, LinearOperatorScaledIdentity,
                                                    LinearOperatorZeros)
from kernflow.core.linear_operator.low_rank import LinearOperatorLowRankUpdate
from kernflow.core.linear_operator.structured import LinearOperatorToeplitz, LinearOperatorTridiag

__all__ = ["LinearOperator", "LinearOperatorAdjoint", "LinearOperatorBlockDiag",
           "LinearOperatorBlockLowerTriangular", "LinearOperatorCirculant", "LinearOperatorCirculant2D",
           "LinearOperatorCirculant3D", "LinearOperatorComposition", "LinearOperatorDiag",
           "LinearOperatorFullMatrix", "LinearOperatorHouseholder", "LinearOperatorIdentity",
           "LinearOperatorInversion", "LinearOperatorKronecker", "LinearOperatorLowRankUpdate",
           "LinearOperatorLowerTriangular", "LinearOperatorPermutation", "LinearOperatorScaledIdentity",
           "LinearOperatorToeplitz", "LinearOperatorTridiag", "LinearOperatorZeros"]

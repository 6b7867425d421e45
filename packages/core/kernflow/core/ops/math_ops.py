"""Math ops: elementwise arithmetic, comparisons, matmul, reductions.

OpDefs and wrappers live in the split modules re-exported here (`math_ops_elementwise`,
`math_ops_matmul`, `math_ops_reduce`); CPU kernels are in kernflow.kernels.cpu.math, gradients in
kernflow.core.grads.math_grad. Python operators on Tensors are installed at the bottom.
"""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.ops import math_ops_elementwise as _elementwise
from kernflow.core.ops import math_ops_matmul as _matmul
from kernflow.core.ops import math_ops_reduce as _reduce
from kernflow.core.ops.math_ops_elementwise import *  # noqa: F403
from kernflow.core.ops.math_ops_elementwise import _is_tensorlike
from kernflow.core.ops.math_ops_matmul import *  # noqa: F403
from kernflow.core.ops.math_ops_reduce import *  # noqa: F403

__all__ = list(_elementwise.__all__) + list(_matmul.__all__) + list(_reduce.__all__)


# ---------------------------------------------------------------------------- Tensor operators
def _and(x, y, name=None):
    return logical_and(x, y, name=name)  # noqa: F405


def _or(x, y, name=None):
    return logical_or(x, y, name=name)  # noqa: F405


def _xor(x, y, name=None):
    return logical_xor(x, y, name=name)  # noqa: F405


def _override_binary_operator(func, op_name: str, py_name: str) -> None:
    """Installs `__py_name__` and `__rpy_name__` on Tensor, creating ops in scope `op_name`.

    The other operand, unless it is tensor-like, becomes a constant of the tensor's dtype named
    "<op_name>/y" (or "<op_name>/x" for the reflected operator), as in TF.
    """
    def binary_op_wrapper(x, y):
        with _ops.name_scope(None, op_name, [x, y]) as name:
            if not _is_tensorlike(y):
                y = _ops.convert_to_tensor(y, dtype=x.dtype.base_dtype, name="y")
            return func(x, y, name=name)

    def r_binary_op_wrapper(y, x):
        with _ops.name_scope(None, op_name, [x, y]) as name:
            if not _is_tensorlike(x):
                x = _ops.convert_to_tensor(x, dtype=y.dtype.base_dtype, name="x")
            return func(x, y, name=name)

    binary_op_wrapper.__name__ = f"__{py_name}__"
    r_binary_op_wrapper.__name__ = f"__r{py_name}__"
    _ops.Tensor._override_operator(f"__{py_name}__", binary_op_wrapper)
    _ops.Tensor._override_operator(f"__r{py_name}__", r_binary_op_wrapper)


for _func, _op_name, _py_name in (
        (add, "add", "add"),  # noqa: F405
        (subtract, "sub", "sub"),  # noqa: F405
        (multiply, "mul", "mul"),  # noqa: F405
        (truediv, "truediv", "truediv"),  # noqa: F405
        (floordiv, "floordiv", "floordiv"),  # noqa: F405
        (floormod, "mod", "mod"),  # noqa: F405
        (pow, "pow", "pow"),  # noqa: F405
        (matmul, "matmul", "matmul"),  # noqa: F405
        (_and, "and", "and"),
        (_or, "or", "or"),
        (_xor, "xor", "xor")):
    _override_binary_operator(_func, _op_name, _py_name)

for _py_name, _func in (("__lt__", less), ("__le__", less_equal),  # noqa: F405
                        ("__gt__", greater), ("__ge__", greater_equal),  # noqa: F405
                        ("__neg__", negative), ("__abs__", abs),  # noqa: F405
                        ("__invert__", logical_not)):  # noqa: F405
    _ops.Tensor._override_operator(_py_name, _func)

"""Matrix multiplication: MatMul (rank 2) and BatchMatMulV2 (batched, broadcasting batch dims).

OpDefs and the `matmul` wrapper (re-exported by `kernflow.core.ops.math_ops`); CPU kernels are in
kernflow.kernels.cpu.math.
"""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops.math_ops_elementwise import conj

__all__ = ["matmul"]

_MATMUL_TYPES = "T: {half, float, double, int32, int64, complex64, complex128}"


def _check_inner(k1, k2):
    if k1 is not None and k2 is not None and k1 != k2:
        raise ValueError(f"Dimensions must be equal, but are {k1} and {k2}")


def _matmul_shape(op):
    a, b = op.inputs[0].shape, op.inputs[1].shape
    for s in (a, b):
        if s.rank is not None and s.rank != 2:
            raise ValueError(f"Shape must be rank 2 but is rank {s.rank}")
    a = a.dim_values if a.rank is not None else (None, None)
    b = b.dim_values if b.rank is not None else (None, None)
    m, k1 = (a[1], a[0]) if op.get_attr("transpose_a") else a
    k2, n = (b[1], b[0]) if op.get_attr("transpose_b") else b
    _check_inner(k1, k2)
    return [_ts.TensorShape([m, n])]


def _batch_matmul_shape(op):
    a, b = op.inputs[0].shape, op.inputs[1].shape
    for s in (a, b):
        if s.rank is not None and s.rank < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {s.rank}")
    adj_x, adj_y = op.get_attr("adj_x"), op.get_attr("adj_y")
    if a.rank is not None and b.rank is not None:
        batch = _ts.broadcast_shape(a[:-2], b[:-2])
    else:
        batch = _ts.TensorShape(None)
    a, b = a.dim_values, b.dim_values
    m, k1 = (None, None) if a is None else ((a[-1], a[-2]) if adj_x else (a[-2], a[-1]))
    k2, n = (None, None) if b is None else ((b[-1], b[-2]) if adj_y else (b[-2], b[-1]))
    _check_inner(k1, k2)
    return [batch.concatenate([m, n])]


register_op("MatMul", inputs=["a: T", "b: T"], outputs=["product: T"],
            attrs=["transpose_a: bool = false", "transpose_b: bool = false", _MATMUL_TYPES],
            shape_fn=_matmul_shape,
            doc="Multiplies matrix a by matrix b (each optionally transposed first).")
register_op("BatchMatMulV2", inputs=["x: T", "y: T"], outputs=["output: T"],
            attrs=[_MATMUL_TYPES, "adj_x: bool = false", "adj_y: bool = false"],
            shape_fn=_batch_matmul_shape,
            doc="Multiplies the matrices in the last two dimensions of x and y (each optionally "
                "adjointed); the batch dimensions broadcast.")


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, name=None):
    """Multiplies matrix a by matrix b: op `MatMul` for rank 2, `BatchMatMulV2` for higher ranks.

    Args:
        a: a Tensor of rank >= 2.
        b: a Tensor of a's dtype and rank >= 2.
        transpose_a: transpose the last two dimensions of a first.
        transpose_b: transpose the last two dimensions of b first.
        adjoint_a: conjugate-transpose a first.
        adjoint_b: conjugate-transpose b first.
        a_is_sparse: a hint only (no sparse kernel is used).
        b_is_sparse: a hint only.
        name: optional op name (default "MatMul").

    Returns:
        A Tensor of a's dtype: [..., M, N].

    Raises:
        ValueError: if both transpose_x and adjoint_x are set, or the inner dimensions differ
            ("Dimensions must be equal, but are 3 and 4").
    """
    del a_is_sparse, b_is_sparse
    if transpose_a and adjoint_a:
        raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    with _ops.name_scope(name, "MatMul", [a, b]) as name:
        a = _ops.convert_to_tensor(a, name="a")
        b = _ops.convert_to_tensor(b, name="b", preferred_dtype=a.dtype.base_dtype)
        ra, rb = a.shape.rank, b.shape.rank
        if ra is None or rb is None or ra > 2 or rb > 2:
            # BatchMatMulV2 only adjoints: a transpose equals an adjoint of the conjugate.
            if transpose_a:
                a, adjoint_a = conj(a), True
            if transpose_b:
                b, adjoint_b = conj(b), True
            return apply_op("BatchMatMulV2", [a, b], {"adj_x": adjoint_a, "adj_y": adjoint_b},
                            name=name).outputs[0]
        if adjoint_a:
            a, transpose_a = conj(a), True
        if adjoint_b:
            b, transpose_b = conj(b), True
        return apply_op("MatMul", [a, b], {"transpose_a": transpose_a, "transpose_b": transpose_b},
                        name=name).outputs[0]

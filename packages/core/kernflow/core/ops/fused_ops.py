"""Fused ops: one kernel for a cluster of elementwise ops, made by the fusion pass.

The pass (kernflow.core.runtime.fusion) replaces a cluster of elementwise nodes by one
`_FusedElementwise` node (or a `_FusedReduction` node when a reduction consumes the cluster) whose
`program` attr lists the cluster's ops, one step per string, in a device-independent form::

    Mul float32 i0 i1          # t0 = i0 * i1       (i<k>: input k of the fused node)
    AddV2 float32 t0 float32:1.0   # t1 = t0 + 1.0  (<dtype>:<value>: an inlined scalar constant)
    Relu float32 t1            # t2 = relu(t1): the last step is the output

Each step is ``<op type> <result dtype> <arg>...``, with the args in the op's input order; `t<j>`
names the result of step j. Extra attr values an op reads (LeakyRelu's alpha) follow its inputs
as literals. Kernels evaluate the steps with the semantics of the op types they name: numpy ufuncs
in the CPU interpreter, one generated CUDA expression on GPUs. Inputs broadcast by numpy rules.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["Step", "parse_program", "format_literal", "literal_value", "fused_elementwise",
           "fused_reduction", "REDUCTION_OPS"]

# Reductions a `_FusedReduction` may apply to its program's result (the `reduction` attr).
REDUCTION_OPS = ("Sum", "Mean", "Max", "Min")


def _broadcast_inputs(op):
    out = _ts.TensorShape([])
    for t in op.inputs:
        out = _ts.broadcast_shape(out, t.shape)
    return out


def _fused_elementwise_shape(op):
    return [_broadcast_inputs(op)]


def _fused_reduction_shape(op):
    full = _broadcast_inputs(op)
    axes = op.get_attr("axis")
    keep = op.get_attr("keep_dims")
    if full.dim_values is None:
        return [_ts.TensorShape(None)]
    rank = len(full.dim_values)
    drop = {a % rank for a in axes} if rank else set()
    dims = [(1 if keep else None) if i in drop else d for i, d in enumerate(full.as_list())]
    return [_ts.TensorShape([d for i, d in enumerate(dims) if keep or i not in drop])]


register_op("_FusedElementwise", inputs=["inputs: T"], outputs=["output: out_type"],
            attrs=["T: list(type)", "out_type: type", "program: list(string)"],
            shape_fn=_fused_elementwise_shape,
            doc="Evaluates `program`, a chain of elementwise ops over `inputs` (broadcast by numpy "
                "rules), in one kernel. Made by the fusion pass (kernflow.core.runtime.fusion); "
                "the program format is described in kernflow.core.ops.fused_ops.")
register_op("_FusedReduction", inputs=["inputs: T"], outputs=["output: out_type"],
            attrs=["T: list(type)", "out_type: type", "program: list(string)",
                   "reduction: {'Sum', 'Mean', 'Max', 'Min'}", "axis: list(int)",
                   "keep_dims: bool = false"],
            shape_fn=_fused_reduction_shape,
            doc="Reduces (Sum, Mean, Max or Min over `axis`) the result of `program`, a chain of "
                "elementwise ops over `inputs`, in one kernel. Made by the fusion pass.")
# The pass runs on final graphs, after kf.gradients built the backward ops.
NotDifferentiable("_FusedElementwise")
NotDifferentiable("_FusedReduction")


@dataclasses.dataclass(frozen=True)
class Step:
    """One step of a fused program.

    Attributes:
        op: the op type whose semantics the step has ("Mul").
        dtype: the result's DType.
        args: per argument, ("i", k) for input k, ("t", j) for step j's result, or
            ("c", DType, value) for a literal (a Python bool, int or float).
    """
    op: str
    dtype: _dtypes.DType
    args: tuple


def format_literal(value, dtype) -> str:
    """Writes a scalar as a program literal ``<dtype>:<value>`` that parses back exactly."""
    dtype = _dtypes.as_dtype(dtype)
    v = np.asarray(value).reshape(()).item()
    if dtype == _dtypes.bool:
        text = "1" if v else "0"
    elif dtype.is_integer:
        text = str(int(v))
    else:
        text = repr(float(v))   # repr round-trips doubles; halves and floats widen exactly
    return f"{dtype.name}:{text}"


def _parse_arg(text: str):
    if ":" in text:
        name, val = text.split(":", 1)
        dt = _dtypes.as_dtype(name)
        if dt == _dtypes.bool:
            return ("c", dt, val not in ("0", "false", "False"))
        return ("c", dt, int(val) if dt.is_integer else float(val))
    kind, idx = text[0], text[1:]
    if kind not in "it" or not idx.isdigit():
        raise ValueError(f"bad fused-program argument {text!r}")
    return (kind, int(idx))


def parse_program(program) -> list[Step]:
    """Parses a `program` attr (a list of step strings) into `Step`s.

    Raises:
        ValueError: for a malformed step or one that names a later step's result.
    """
    steps = []
    for j, line in enumerate(program):
        parts = line.split()
        if len(parts) < 2:
            raise ValueError(f"bad fused-program step {j}: {line!r}")
        args = tuple(_parse_arg(a) for a in parts[2:])
        for a in args:
            if a[0] == "t" and a[1] >= j:
                raise ValueError(f"fused-program step {j} ({line!r}) reads t{a[1]}, not computed yet")
        steps.append(Step(parts[0], _dtypes.as_dtype(parts[1]), args))
    if not steps:
        raise ValueError("empty fused program")
    return steps


def literal_value(arg) -> np.ndarray:
    """The 0-d numpy array of a literal argument ("c", dtype, value)."""
    _, dt, v = arg
    return np.asarray(v, dt.as_numpy_dtype)


def fused_elementwise(inputs, program, out_type, name=None):
    """Creates a `_FusedElementwise` op (normally the fusion pass makes them); returns its output."""
    op = apply_op("_FusedElementwise", [list(inputs)],
                  {"T": [t.dtype.base_dtype for t in inputs], "out_type": _dtypes.as_dtype(out_type),
                   "program": list(program)}, name=name or "FusedElementwise")
    return op.outputs[0]


def fused_reduction(inputs, program, out_type, reduction, axis, keep_dims=False, name=None):
    """Creates a `_FusedReduction` op (normally the fusion pass makes them); returns its output."""
    op = apply_op("_FusedReduction", [list(inputs)],
                  {"T": [t.dtype.base_dtype for t in inputs], "out_type": _dtypes.as_dtype(out_type),
                   "program": list(program), "reduction": reduction,
                   "axis": [int(a) for a in axis], "keep_dims": bool(keep_dims)},
                  name=name or "FusedReduction")
    return op.outputs[0]

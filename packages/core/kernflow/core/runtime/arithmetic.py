"""Arithmetic simplification: ``x + 0``, ``x - 0`` and ``x * 1`` become ``Snapshot(x)`` (a copy).

TF Grappler's arithmetic optimizer does the same. The case that matters is the global-step read
every monitored session's hooks fetch each step: TF1 builds it as ``global_step.read_value() + 0``
(a copy that does not change when the step's update runs), so a training loop with
``MonitoredTrainingSession(summary_dir=...)`` pays a broadcasting ``add`` kernel per step for a
copy of one int64 (0.52 us against 0.13 for the copy, tools/bench_session_overhead.py).

A pass over a pruned, placed GraphDef, run before partitioning by DirectSession and by the master,
with the other rewrites (`graph_execution_state.GraphExecutionState.step`). The rewritten node keeps
its name, device, control inputs and ``_output_shapes``; it reads ``x`` only.

Exact by construction, so only where the result equals ``x`` bit for bit:
- the other operand is a `Const` holding a scalar (so the result has x's shape), of x's dtype;
- ``x + 0`` (`Add`, `AddV2`, either side) for integer types only: in floating point
  ``-0.0 + 0.0`` is ``+0.0``;
- ``x - 0`` (`Sub`, zero on the right) and ``x * 1`` (`Mul`, either side) for integer and
  floating-point types (``-0.0 - 0.0`` is ``-0.0``, ``x * 1.0`` is ``x``, NaN stays NaN);
- on host-memory devices (the GPU plugin keeps some integer kernels in host memory; its graphs are
  left alone).

The constant stays in the graph when something else reads it.
`global_jit_level = OFF` turns the pass off, with every other graph rewrite.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dt
from kernflow.core.framework import tensor_codec
from kernflow.core.framework.node_def_util import graph_without_nodes, parse_input
from kernflow.core.runtime.fusion import OFF

__all__ = ["simplify_arithmetic", "SNAPSHOT"]

SNAPSHOT = "Snapshot"

_INTS = frozenset(d.as_datatype_enum for d in (_dt.int8, _dt.int16, _dt.int32, _dt.int64, _dt.uint8,
                                              _dt.uint16, _dt.uint32, _dt.uint64))
_FLOATS = frozenset(d.as_datatype_enum for d in (_dt.float16, _dt.float32, _dt.float64))
# op -> (the neutral element, the types it is exact for, the operand positions it may take)
_NEUTRAL = {
    "Add": (0, _INTS, (0, 1)),
    "AddV2": (0, _INTS, (0, 1)),
    "Sub": (0, _INTS | _FLOATS, (1,)),
    "Mul": (1, _INTS | _FLOATS, (0, 1)),
}


def simplify_arithmetic(graph_def, devices: dict, kernels, level: int, keep=()):
    """Rewrites ``x + 0``, ``x - 0`` and ``x * 1`` of a pruned, placed graph into Snapshots; returns
    a new GraphDef, or `graph_def` itself when nothing matched.

    Args:
        graph_def: a pruned, placed GraphDef.
        devices: full device name -> Device (anything with `device_type` and `has_device_memory`).
        kernels: the `KernelRegistry` (asked which device types have `Snapshot`).
        level: OptimizerOptions.global_jit_level; OFF (-1) rewrites nothing.
        keep: node names that must stay (the step's targets).
    """
    if level <= OFF or not any(nd.op in _NEUTRAL for nd in graph_def.node):
        return graph_def
    on = {name for name, d in devices.items()
          if not getattr(d, "has_device_memory", False) and kernels.find(SNAPSHOT, d.device_type, {})}
    by_name = {nd.name: nd for nd in graph_def.node}
    rewrites = {}    # node name -> (the input it keeps, the Const input it drops)
    for nd in graph_def.node:
        rule = _NEUTRAL.get(nd.op)
        if rule is None or nd.device not in on or len(nd.input) < 2:
            continue
        neutral, types, positions = rule
        if nd.attr["T"].type not in types:
            continue
        for pos in positions:
            if _is_scalar(by_name, nd.input[pos], neutral, nd.attr["T"].type):
                rewrites[nd.name] = (nd.input[1 - pos], nd.input[pos])
                break
    if not rewrites:
        return graph_def
    # A constant goes when the rewritten nodes were its only readers (and it is not kept).
    readers: dict = {}
    for nd in graph_def.node:
        for s in nd.input:
            readers.setdefault(parse_input(s)[0], []).append(nd.name)
    keep = set(keep)
    dropped = {parse_input(c)[0] for _, c in rewrites.values()}
    gone = {c for c in dropped
            if c not in keep and all(r in rewrites for r in readers.get(c, ()))}
    out = graph_without_nodes(graph_def)
    for nd in graph_def.node:
        if nd.name in gone:
            continue
        new = out.node.add()
        r = rewrites.get(nd.name)
        if r is None:
            new.CopyFrom(nd)
            continue
        new.name, new.op, new.device = nd.name, SNAPSHOT, nd.device
        new.input.append(r[0])
        new.input.extend(s for s in nd.input[2:] if s.startswith("^") and s[1:] not in gone)
        new.attr["T"].type = nd.attr["T"].type
        if "_output_shapes" in nd.attr:
            new.attr["_output_shapes"].CopyFrom(nd.attr["_output_shapes"])
    return out


def _is_scalar(by_name, src: str, value, dtype: int) -> bool:
    """Whether tensor `src` is output 0 of a Const holding the scalar `value` of type `dtype`."""
    name, index, control = parse_input(src)
    nd = by_name.get(name)
    if control or index != 0 or nd is None or nd.op != "Const" or "value" not in nd.attr:
        return False
    if nd.attr["dtype"].type != dtype:
        return False
    try:
        v = tensor_codec.proto_to_tensor(nd.attr["value"].tensor)
    except Exception:  # noqa: BLE001 - a malformed constant is left to its kernel to report
        return False
    return v.ndim == 0 and v == value

"""The `CostGraphDef` of a traced step (TF's CostModel::AddToCostGraphDef).

One node per node of the step's partition graphs (as TF: the nodes that did not run, such as
constants folded into the plan, keep their static output sizes and zero costs), plus any node that
ran without being in them (a compiled loop). Node ids number every partition of the step in one
space, so `input_info` and `control_input` always name a node of the same CostGraphDef; inputs are
the partition's edges (a value from another device comes through its `_Recv`).

Costs are measured: ``compute_cost`` is the longest execution of the node in the step and
``compute_time`` all of them together (a node in a loop runs once per iteration), in microseconds;
output sizes are the largest measured ``nbytes`` of each output. Temporary memory inside kernels is
not visible to kernflow and stays 0; a variable's buffer is the persistent memory of its op.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.runtime.executor import parse_input

__all__ = ["build_cost_graph", "merge_cost_graph"]


class _Measured:
    """What the step measured of one node."""

    __slots__ = ("op", "forwards", "runs", "total_s", "max_s", "outputs", "persistent")

    def __init__(self, op, forwards):
        self.op, self.forwards = op, forwards
        self.runs, self.total_s, self.max_s = 0, 0.0, 0.0
        self.outputs: dict[int, tuple] = {}      # slot -> (dtype, shape, nbytes) of the largest
        self.persistent = 0

    def add(self, rec) -> None:
        dur = max(rec.end - rec.start, 0.0)
        self.runs += 1
        self.total_s += dur
        self.max_s = max(self.max_s, dur)
        for slot, dt, shape, nbytes, persistent in rec.outputs:
            if persistent:
                self.persistent = max(self.persistent, nbytes)
            best = self.outputs.get(slot)
            if best is None or nbytes > best[2]:
                self.outputs[slot] = (dt, shape, nbytes)


def build_cost_graph(records, graphs: dict, cost_graph) -> None:
    """Appends the nodes of a traced step to `cost_graph`.

    Args:
        records: the step's node executions (`step_stats_collector._Record`s).
        graphs: {device name: partition GraphDef} of the step (may be empty).
        cost_graph: the `CostGraphDef` to append to; ids continue after its existing nodes.
    """
    measured: dict[tuple, _Measured] = {}
    for rec in records:
        key = (rec.device, rec.name)
        m = measured.get(key)
        if m is None:
            m = measured[key] = _Measured(rec.op, rec.forwards)
        m.add(rec)
    base = _next_id(cost_graph)
    ids: dict[tuple, int] = {}
    nds: dict[tuple, object] = {}
    for dev in sorted(graphs):
        for nd in graphs[dev].node:
            nds[(dev, nd.name)] = nd
            ids[(dev, nd.name)] = base + len(ids)
    for key in measured:
        if key not in ids:
            ids[key] = base + len(ids)
    for key, node_id in ids.items():
        _add_node(cost_graph.node.add(), key, node_id, nds.get(key), measured.get(key), ids)


def _next_id(cost_graph) -> int:
    return max((n.id for n in cost_graph.node), default=-1) + 1


def _add_node(cn, key, node_id, nd, m, ids) -> None:
    dev, name = key
    cn.name, cn.device, cn.id = name, dev, node_id
    if nd is not None:
        for inp in nd.input:
            src, port, ctrl = parse_input(inp)
            src_id = ids.get((dev, src))
            if src_id is None:
                continue
            if ctrl:
                cn.control_input.append(src_id)
            else:
                cn.input_info.add(preceding_node=src_id, preceding_port=port)
    for slot, (enum, shape, size) in enumerate(_outputs(nd, m)):
        oi = cn.output_info.add(size=size, dtype=enum)
        oi.alias_input_port = 0 if (slot == 0 and m is not None and m.forwards) else -1
        if shape is None:
            oi.shape.unknown_rank = True
        else:
            for d in shape:
                oi.shape.dim.add(size=d)
    if m is not None:
        cn.compute_cost = int(round(m.max_s * 1e6))
        cn.compute_time = int(round(m.total_s * 1e6))
        cn.persistent_memory_size = m.persistent
    else:
        cn.inaccurate = True        # not run in this step: static sizes only


def _outputs(nd, m) -> list:
    """Per output slot: (DataType enum, shape or None, bytes)."""
    from kernflow.core.runtime.step_stats_collector import datatype_enum
    static = _static_outputs(nd)
    n = max(len(static), 1 + max(m.outputs, default=-1) if m is not None else 0)
    result = []
    for slot in range(n):
        got = m.outputs.get(slot) if m is not None else None
        if got is not None:
            dt, shape, nbytes = got
            enum = static[slot][0] if slot < len(static) and static[slot][0] else datatype_enum(dt)
            result.append((enum, shape, nbytes))
        elif slot < len(static):
            result.append(static[slot])
        else:
            result.append((0, None, 0))
    return result


def _static_outputs(nd) -> list:
    """Per output of a NodeDef: (DataType enum, shape or None, bytes if the shape is known)."""
    if nd is None:
        return []
    from kernflow.core.runtime.prune import output_dtypes_of
    try:
        out_dtypes = [dt.base_dtype for dt in output_dtypes_of(nd)]
    except Exception:  # noqa: BLE001 - an op unknown here (a third-party op): sizes unknown
        return []
    shapes = _static_shapes(nd, len(out_dtypes))
    result = []
    for dt, shape in zip(out_dtypes, shapes):
        size = 0
        if shape is not None and all(d >= 0 for d in shape):
            try:
                size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt.as_numpy_dtype).itemsize
            except TypeError:
                size = 0
        result.append((dt.as_datatype_enum, shape, size))
    return result


def _static_shapes(nd, n: int) -> list:
    if nd.op == "Const" and "value" in nd.attr:
        sp = nd.attr["value"].tensor.tensor_shape
        return [None if sp.unknown_rank else tuple(d.size for d in sp.dim)]
    shapes = nd.attr["_output_shapes"].list.shape if "_output_shapes" in nd.attr else []
    if len(shapes) != n:
        return [None] * n
    return [None if sp.unknown_rank else tuple(d.size for d in sp.dim) for sp in shapes]


def merge_cost_graph(target, source) -> None:
    """Appends the nodes of `source` (one task's CostGraphDef) to `target`, renumbering its ids
    after `target`'s so that ids stay unique and edges keep pointing at the same nodes."""
    offset = _next_id(target)
    for n in source.node:
        new = target.node.add()
        new.CopyFrom(n)
        new.id = n.id + offset
        for ii in new.input_info:
            ii.preceding_node += offset
        new.control_input[:] = [c + offset for c in n.control_input]
    target.cost.extend(source.cost)

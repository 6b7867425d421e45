"""Graph rewrites the master applies around core's place/prune/partition.

* `apply_default_task`: nodes that name no job or task run on the session's client task (TF's
  distributed placement: unconstrained ops stay on the master's own task), decided per colocation
  group so a variable's initializer follows the variable to its parameter server.
* `group_by_task`: core's `partition` returns one GraphDef per device; a worker receives one
  GraphDef per task, holding the partitions of all its devices (feeds and fetches already sit where
  they are used and made: `task_routes` reads them off).
* `check_graph`: what CreateSession and ExtendSession refuse (nameless or duplicate nodes, unknown
  ops, inputs naming no node or an output their producer does not have, a wrong input count).
"""

from __future__ import annotations

from kernflow.core.framework import device_spec
from kernflow.core.framework import errors
from kernflow.core.framework import node_def_util
from kernflow.core.framework import op_def_registry
from kernflow.core.runtime.executor import node_attrs
from kernflow.core.runtime.placer import colocation_groups

from kernflow.master.devices import task_of

__all__ = ["apply_default_task", "check_graph", "group_by_task"]


def _colocation_groups(nds) -> list[int]:
    """For each node, the index of its colocation group's root (the placer's own rules)."""
    op_defs, attrs = [], []
    for nd in nds:
        try:
            op_def = op_def_registry.get(nd.op)
        except Exception:  # noqa: BLE001 - an unknown op fails later, in the placer, with its name
            op_def = None
        op_defs.append(op_def)
        attrs.append(node_attrs(nd, op_def) if op_def is not None else None)
    return colocation_groups(nds, op_defs, attrs)[0]


def apply_default_task(graph_def, task: str):
    """Returns a copy of `graph_def` where groups naming no job and no task run on `task`.

    A colocation group in which some member names a job or task keeps its constraints (the placer
    merges them); a group where no member does gets `task`'s job, replica and task merged under
    each member's own device (so "/device:GPU:0" becomes that task's GPU:0).
    """
    out = type(graph_def)()
    out.CopyFrom(graph_def)
    nds = list(out.node)
    roots = _colocation_groups(nds)
    specs = []
    constrained = set()
    for i, nd in enumerate(nds):
        try:
            spec = device_spec.DeviceSpec.from_string(nd.device) if nd.device else None
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, f"Malformed device specification "
                                              f"'{nd.device}' of node {nd.name}: {e}") from None
        specs.append(spec)
        if spec is not None and (spec.job is not None or spec.task is not None
                                 or spec.replica is not None):
            constrained.add(roots[i])
    for i, nd in enumerate(nds):
        if roots[i] in constrained:
            continue
        nd.device = device_spec.merge_device(task, nd.device)
    return out


def group_by_task(parts: dict) -> dict:
    """Merges core's per-device partitions into one GraphDef per task (empty partitions left out).

    Core names its `_Send`/`_Recv` nodes after the full receiving device, so the node names of all
    partitions of a step are distinct and the merge is a plain concatenation.
    """
    from kernflow.core.protobuf import graph_pb2
    by_task: dict[str, graph_pb2.GraphDef] = {}
    for dev in sorted(parts):
        if not len(parts[dev].node):
            continue
        task = task_of(dev)
        g = by_task.get(task)
        if g is None:
            g = by_task[task] = graph_pb2.GraphDef()
            g.versions.CopyFrom(parts[dev].versions)
        g.node.extend(parts[dev].node)
    return by_task


def check_graph(graph_def, existing=None) -> None:
    """Rejects what must not enter a session's graph: nameless or duplicate nodes, unknown op
    types, and inputs that name no node or an output their producer does not have, or that are
    more or fewer than the node's op takes (TF's GraphConstructor checks, at CreateSession and
    ExtendSession as in TF, so a bad graph fails there rather than as an internal error later).

    Args:
        graph_def: the nodes to add.
        existing: the session's graph (a GraphDef) that `graph_def` extends; None for a new one.

    Raises:
        InvalidArgumentError: naming the node (and the bad input and the producer's output count).
        NotFoundError: for an op type that is not registered.
    """
    nodes = {nd.name: nd for nd in existing.node} if existing is not None else {}
    names = set(nodes)
    for nd in graph_def.node:
        if not nd.name:
            raise errors.InvalidArgumentError(None, None, f"A node of type {nd.op} has no name")
        if nd.name in names:
            raise errors.InvalidArgumentError(None, None, f"Node '{nd.name}' is already in the graph")
        names.add(nd.name)
        op_def_registry.get(nd.op)
    node_def_util.check_inputs(graph_def, nodes)

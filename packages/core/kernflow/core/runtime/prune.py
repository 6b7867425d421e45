"""Prune: keep what the fetches and targets need, cutting the graph at fed tensors.

Feeds become `_Arg` nodes and fetches `_Retval` nodes (numbered by their position), so a partition
receives feeds and returns fetches through one call frame, as TF's DirectSession does.
"""

from __future__ import annotations

import collections

from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.framework import ops as _ops
from kernflow.core.runtime.executor import node_attrs, parse_input

__all__ = ["prune", "output_dtypes_of"]

# As TF's subgraph::FeedInputs: a control input on a fed placeholder is satisfied by the feed,
# so it is rewired to the feed's `_Arg` instead of pulling in the placeholder op.
_PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderV2"})


def _canon(tensor_name: str) -> tuple[str, int]:
    name, idx, ctrl = parse_input(tensor_name)
    if ctrl:
        raise errors.InvalidArgumentError(None, None, f"'{tensor_name}' is not a tensor name")
    return name, idx


def output_dtypes_of(nd) -> list:
    """Returns the output dtypes of a NodeDef (from its OpDef and attrs)."""
    op_def = op_def_registry.get(nd.op)
    return _ops.output_dtypes(op_def, node_attrs(nd, op_def))


def prune(graph_def, feeds, fetches, targets, client_device: str = ""):
    """Returns the sub-GraphDef that computes `fetches` and runs `targets` given `feeds`.

    Args:
        graph_def: the full GraphDef.
        feeds: tensor names ("op:0") whose values the caller supplies; they become `_Arg` nodes.
        fetches: tensor names to return; each becomes a `_Retval` node.
        targets: op names to run for their side effects.
        client_device: device for the `_Arg`/`_Retval` nodes.

    A control input on a fed placeholder is rewired to its `_Arg` (TF's FeedInputs does the same).

    Raises:
        NotFoundError: if a feed, fetch or target names nothing in the graph.
    """
    from kernflow.core.framework import attr_value
    from kernflow.core.protobuf import graph_pb2
    nodes = {nd.name: nd for nd in graph_def.node}
    order = {nd.name: i for i, nd in enumerate(graph_def.node)}
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    fed: dict[tuple[str, int], str] = {}
    fed_ctrl: dict[str, str] = {}  # fed placeholder -> its _Arg, for control inputs
    for i, f in enumerate(feeds):
        name, idx = _canon(f)
        nd = nodes.get(name)
        if nd is None:
            raise errors.NotFoundError(None, None, f"Feed tensor {f} not found in the graph")
        dts = output_dtypes_of(nd)
        if idx >= len(dts):
            raise errors.NotFoundError(None, None, f"Feed tensor {f}: op {name} has {len(dts)} outputs")
        arg = out.node.add(name=f"_arg_{name}_{idx}_{i}", op="_Arg", device=client_device)
        arg.attr["T"].CopyFrom(attr_value.to_proto(dts[idx].base_dtype, "type"))
        arg.attr["index"].CopyFrom(attr_value.to_proto(i, "int"))
        fed[(name, idx)] = arg.name
        if nd.op in _PLACEHOLDER_OPS:
            fed_ctrl.setdefault(name, arg.name)

    def rewrite(inp: str) -> str:
        name, idx, ctrl = parse_input(inp)
        if not ctrl and (name, idx) in fed:
            return fed[(name, idx)]
        if ctrl and name in fed_ctrl:
            return "^" + fed_ctrl[name]
        return inp

    roots = []
    retvals = []
    for i, f in enumerate(fetches):
        name, idx = _canon(f)
        nd = nodes.get(name)
        if nd is None:
            raise errors.NotFoundError(None, None, f"Fetch tensor {f} not found in the graph")
        dts = output_dtypes_of(nd)
        if idx >= len(dts):
            raise errors.NotFoundError(None, None, f"Fetch tensor {f}: op {name} has {len(dts)} outputs")
        src = rewrite(f"{name}:{idx}")
        rv = graph_pb2.NodeDef(name=f"_retval_{name}_{idx}_{i}", op="_Retval", device=client_device,
                               input=[src])
        rv.attr["T"].CopyFrom(attr_value.to_proto(dts[idx], "type"))
        rv.attr["index"].CopyFrom(attr_value.to_proto(i, "int"))
        retvals.append(rv)
        if (name, idx) not in fed:
            roots.append(name)
    for t in targets:
        if t not in nodes:
            raise errors.NotFoundError(None, None, f"Target node {t} not found in the graph")
        roots.append(t)
    keep = set()
    queue = collections.deque(roots)
    while queue:
        n = queue.popleft()
        if n in keep:
            continue
        keep.add(n)
        for inp in nodes[n].input:
            name, _, _ = parse_input(rewrite(inp))  # fed inputs now name _Arg nodes: not followed
            if name in nodes and name not in keep:
                queue.append(name)
    for name in sorted(keep, key=order.__getitem__):
        nd = out.node.add()
        nd.CopyFrom(nodes[name])
        del nd.input[:]
        nd.input.extend(rewrite(i) for i in nodes[name].input)
    out.node.extend(retvals)
    return out

"""Summary fusion: MergeSummary of ScalarSummary ops becomes one `_FusedScalarSummaries` node.

The training loop's usual summaries (`kf.summary.scalar` of the loss and the accuracy, then
`merge_all`) are three kernels and two intermediate serialized protos per step; the fused kernel
builds the same bytes in one call (each tag's serialized prefix made once, the values' float32 bytes
appended per run). A pass over a pruned, placed GraphDef, run before partitioning by DirectSession
and by the master, after the remapper.

The pattern: a `MergeSummary` whose every data input is output 0 of a `ScalarSummary` on the same
device, each read by that merge alone (not fetched, not a target, no control edge from it), each
with a scalar string `Const` tag, the tags all different. The fused node takes the merge's name (its
fetches and consumers keep working) and the ScalarSummaries' value inputs; the control inputs of
the nodes it replaces move to it, and a tag `Const` read by nothing else goes with its summary.
A merge with a duplicate tag, a non-constant tag or any other input is left alone, so MergeSummary
and ScalarSummary report their own errors as before; a non-scalar value fails in the fused kernel
with ScalarSummary's message, naming the ScalarSummary node.

`global_jit_level = OFF` turns the pass off, with every other graph rewrite.
"""

from __future__ import annotations

import collections

from kernflow.core.framework import tensor_codec
from kernflow.core.framework.node_def_util import graph_without_nodes, parse_input
from kernflow.core.runtime.fusion import OFF

__all__ = ["fuse_scalar_summaries", "FUSED_OP"]

FUSED_OP = "_FusedScalarSummaries"


def fuse_scalar_summaries(graph_def, devices: dict, kernels, level: int, keep=()):
    """Fuses MergeSummary-of-ScalarSummary patterns of a pruned, placed graph; returns a new GraphDef,
    or `graph_def` itself when nothing matched.

    Args:
        graph_def: a pruned, placed GraphDef.
        devices: full device name -> Device (anything with a `device_type`).
        kernels: the `KernelRegistry` (asked which device types have `_FusedScalarSummaries`).
        level: OptimizerOptions.global_jit_level; OFF (-1) fuses nothing.
        keep: node names that must stay (the step's targets).
    """
    if level <= OFF or not any(nd.op == "MergeSummary" for nd in graph_def.node):
        return graph_def
    on = {name for name, d in devices.items() if kernels.find(FUSED_OP, d.device_type, {})}
    by_name = {nd.name: nd for nd in graph_def.node}
    readers = collections.defaultdict(list)     # node name -> [(reader NodeDef, is_control)]
    for nd in graph_def.node:
        for s in nd.input:
            name, _, control = parse_input(s)
            readers[name].append((nd, control))
    keep = set(keep)
    matches = [m for m in (_match(nd, by_name, readers, keep) for nd in graph_def.node
                           if nd.op == "MergeSummary" and nd.device in on) if m is not None]
    if not matches:
        return graph_def
    return _rewrite(graph_def, matches, readers, keep)


class _Match:
    __slots__ = ("merge", "summaries", "tags", "tag_nodes")

    def __init__(self, merge, summaries, tags, tag_nodes):
        self.merge, self.summaries, self.tags, self.tag_nodes = merge, summaries, tags, tag_nodes


def _scalar_string(const) -> str | None:
    """The value of a Const holding one scalar string, else None."""
    if "value" not in const.attr:
        return None
    try:
        v = tensor_codec.proto_to_tensor(const.attr["value"].tensor)
    except Exception:  # noqa: BLE001 - a malformed constant is left to the kernels to report
        return None
    if v.ndim != 0 or not isinstance(v[()], bytes):
        return None
    try:
        return v[()].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _match(merge, by_name, readers, keep) -> _Match | None:
    summaries, tags, tag_nodes = [], [], []
    for s in merge.input:
        name, index, control = parse_input(s)
        if control:
            continue
        nd = by_name.get(name)
        if nd is None or nd.op != "ScalarSummary" or index != 0 or nd.device != merge.device \
                or name in keep or readers[name] != [(merge, False)]:
            return None
        tag_name, tag_index, _ = parse_input(nd.input[0])
        tag_node = by_name.get(tag_name)
        if tag_node is None or tag_node.op != "Const" or tag_index != 0:
            return None
        tag = _scalar_string(tag_node)
        if tag is None:
            return None
        summaries.append(nd)
        tags.append(tag)
        tag_nodes.append(tag_node)
    if not summaries or len(set(tags)) != len(tags):
        return None
    return _Match(merge, summaries, tags, tag_nodes)


def _rewrite(graph_def, matches, readers, keep):
    fused_at = {m.merge.name: m for m in matches}
    gone = {s.name for m in matches for s in m.summaries}
    # A tag constant goes when every node reading it goes (it is not fetched or kept).
    for m in matches:
        for t in m.tag_nodes:
            if t.name not in keep and all(r.name in gone and not c for r, c in readers[t.name]):
                gone.add(t.name)
    out = graph_without_nodes(graph_def)
    for nd in graph_def.node:
        m = fused_at.get(nd.name)
        if m is not None:
            _fused_node(out.node.add(), m, gone)
        elif nd.name not in gone:
            out.node.add().CopyFrom(nd)
    return out


def _fused_node(new, m: _Match, gone) -> None:
    merge = m.merge
    new.name, new.op, new.device = merge.name, FUSED_OP, merge.device
    new.input.extend(s.input[1] for s in m.summaries)
    replaced = [merge, *m.summaries, *(t for t in m.tag_nodes if t.name in gone)]
    new.input.extend(dict.fromkeys(s for nd in replaced for s in nd.input
                                   if s.startswith("^") and s[1:] not in gone))
    new.attr["T"].list.type.extend(s.attr["T"].type for s in m.summaries)
    new.attr["tags"].list.s.extend(t.encode("utf-8") for t in m.tags)
    new.attr["summary_nodes"].list.s.extend(s.name.encode("utf-8") for s in m.summaries)
    if "_output_shapes" in merge.attr:
        new.attr["_output_shapes"].CopyFrom(merge.attr["_output_shapes"])

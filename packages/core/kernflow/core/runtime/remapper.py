"""The remapper: Conv2D + bias (+ Relu) becomes one `_FusedConv2D` node (TF Grappler's remapper).

A pass over a pruned, placed GraphDef, run before partitioning by DirectSession and by the master,
on devices whose type has a `_FusedConv2D` kernel (the CPU plugin's runs oneDNN with the bias and
the relu as post-ops: the convnet's first layer, conv + add + relu, 4.0 -> 1.0 ms on 2 cores).

The pattern: `Conv2D(x, w)` -> `BiasAdd(conv, b)`, or `AddV2`/`Add` of conv and a bias whose static
shape is exactly [out_channels] (NHWC), -> optionally `Relu`. The fused node takes the name of the
last node of the pattern (so its consumers and fetches keep working) and the inputs x, w, b.

A training graph reads the intermediate values too, but only their shapes: the gradient of AddV2
builds `Shape(conv)` and `Shape(add)` for BroadcastGradientArgs. The bias broadcasts without
changing the conv's shape (that is what the static-shape check proves), and Relu keeps it, so those
`Shape` nodes read the fused output instead. Any other consumer of an intermediate value (a fetch,
another op, a control edge) leaves the pattern alone, as does a bias computed from the conv's own
output (the rewrite would close a cycle).

`global_jit_level = OFF` turns the pass off, with every other graph rewrite.
"""

from __future__ import annotations

import collections

from kernflow.core.framework import dtypes as _dt
from kernflow.core.framework.node_def_util import graph_without_nodes
from kernflow.core.runtime.executor import parse_input

__all__ = ["remap"]

OFF = -1
_FLOAT_TYPES = frozenset(d.as_datatype_enum for d in (_dt.float16, _dt.float32, _dt.float64))
_CONV_ATTRS = ("T", "strides", "padding", "explicit_paddings", "data_format", "dilations",
               "use_cudnn_on_gpu")


def remap(graph_def, devices: dict, kernels, level: int):
    """Fuses Conv2D + bias (+ Relu) patterns of a pruned, placed graph; returns a new GraphDef, or
    `graph_def` itself when nothing matched.

    Args:
        graph_def: a pruned, placed GraphDef.
        devices: full device name -> Device (anything with a `device_type`).
        kernels: the `KernelRegistry` (asked which device types have `_FusedConv2D`).
        level: OptimizerOptions.global_jit_level; OFF (-1) fuses nothing.
    """
    if level <= OFF:
        return graph_def
    on = {name for name, d in devices.items() if kernels.find("_FusedConv2D", d.device_type, {})}
    if not on or not any(nd.op == "Conv2D" and nd.device in on for nd in graph_def.node):
        return graph_def
    g = _Index(graph_def)
    matches = [m for m in (_match(g, nd) for nd in graph_def.node
                           if nd.op == "Conv2D" and nd.device in on) if m is not None]
    if not matches:
        return graph_def
    return _rewrite(graph_def, matches)


class _Index:
    def __init__(self, graph_def):
        self.nodes = {nd.name: nd for nd in graph_def.node}
        self.consumers = collections.defaultdict(list)     # name -> [(node, input position)]
        self.ctrl_consumed: set[str] = set()
        for nd in graph_def.node:
            for i, s in enumerate(nd.input):
                name, _, ctrl = parse_input(s)
                if ctrl:
                    self.ctrl_consumed.add(name)
                else:
                    self.consumers[name].append((nd, i))

    def static_shape(self, tensor: str):
        """The `_output_shapes` entry of a tensor name, as a list (None per unknown dim), or None."""
        name, idx, _ = parse_input(tensor)
        nd = self.nodes.get(name)
        if nd is None or "_output_shapes" not in nd.attr:
            return None
        shapes = nd.attr["_output_shapes"].list.shape
        if idx >= len(shapes) or shapes[idx].unknown_rank:
            return None
        return [d.size if d.size >= 0 else None for d in shapes[idx].dim]

    def reaches(self, starts, target: str) -> bool:
        """Whether `target` is an ancestor of (or one of) the nodes named by `starts`."""
        seen, stack = set(), [parse_input(s)[0] for s in starts]
        while stack:
            name = stack.pop()
            if name == target:
                return True
            if name in seen or name not in self.nodes:
                continue
            seen.add(name)
            stack.extend(parse_input(s)[0] for s in self.nodes[name].input)
        return False


_Match = collections.namedtuple("_Match", "conv add relu bias shapes")


def _only_shapes(consumers, but) -> list | None:
    rest = [(nd, i) for nd, i in consumers if nd is not but]
    return rest if all(nd.op == "Shape" for nd, _ in rest) else None


def _match(g: _Index, conv):
    if conv.attr["T"].type not in _FLOAT_TYPES or conv.name in g.ctrl_consumed:
        return None
    users = g.consumers[conv.name]
    adds = [(nd, i) for nd, i in users if nd.op in ("BiasAdd", "AddV2", "Add")]
    if len(adds) != 1:
        return None
    add, pos = adds[0]
    conv_shapes = _only_shapes(users, add)
    if conv_shapes is None or add.device != conv.device or add.name in g.ctrl_consumed:
        return None
    fmt = conv.attr["data_format"].s.decode() or "NHWC"
    if add.op == "BiasAdd":
        if pos != 0 or (add.attr["data_format"].s.decode() or "NHWC") != fmt:
            return None
        bias = add.input[1]
    else:
        bias = add.input[1 - pos]
        out = g.static_shape(conv.name)
        channels = out[-1] if out and len(out) == 4 else None
        if fmt != "NHWC" or channels is None or g.static_shape(bias) != [channels]:
            return None
    relu, shapes = None, conv_shapes
    add_users = g.consumers[add.name]
    relus = [nd for nd, _ in add_users if nd.op == "Relu"]
    if len(relus) == 1 and relus[0].device == add.device and relus[0].name not in g.ctrl_consumed:
        add_shapes = _only_shapes(add_users, relus[0])
        if add_shapes is not None:
            relu, shapes = relus[0], conv_shapes + add_shapes
    controls = [s for nd in (conv, add, relu) if nd is not None for s in nd.input if s.startswith("^")]
    if g.reaches([bias] + controls, conv.name):
        return None
    return _Match(conv, add, relu, bias, shapes)


def _rewrite(graph_def, matches):
    root_of = {}
    for m in matches:
        root = (m.relu or m.add).name
        for nd in (m.conv, m.add, m.relu):
            if nd is not None:
                root_of[nd.name] = root
    fused_at = {(m.relu or m.add).name: m for m in matches}
    redirect = {}    # id(Shape node) -> {input position: root name}
    for m in matches:
        for nd, i in m.shapes:
            redirect.setdefault(id(nd), {})[i] = (m.relu or m.add).name
    out = graph_without_nodes(graph_def)
    for nd in graph_def.node:
        m = fused_at.get(nd.name)
        if m is not None:
            _fused_node(out.node.add(), m)
        elif nd.name in root_of:
            continue
        else:
            new = out.node.add()
            new.CopyFrom(nd)
            for i, root in redirect.get(id(nd), {}).items():
                new.input[i] = root
    return out


def _fused_node(new, m: _Match) -> None:
    root = m.relu or m.add
    new.name, new.op, new.device = root.name, "_FusedConv2D", m.conv.device
    controls = dict.fromkeys(s for nd in (m.conv, m.add, m.relu) if nd is not None
                             for s in nd.input if s.startswith("^"))
    new.input.extend([m.conv.input[0], m.conv.input[1], m.bias, *controls])
    for key in _CONV_ATTRS:
        if key in m.conv.attr:
            new.attr[key].CopyFrom(m.conv.attr[key])
    new.attr["num_args"].i = 1
    new.attr["fused_ops"].list.s.extend([b"BiasAdd", b"Relu"] if m.relu is not None else [b"BiasAdd"])
    new.attr["epsilon"].f = 0.0001
    if "_output_shapes" in root.attr:
        new.attr["_output_shapes"].CopyFrom(root.attr["_output_shapes"])

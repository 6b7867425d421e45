"""`import_graph_def`: rebuilds ops from a GraphDef into the default graph."""

from __future__ import annotations

from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import attr_value as _attr_value
from kernflow.core.framework.node_def_util import input_count_message, invalid_output_message
from kernflow.core.framework.node_def_util import parse_input as _parse

__all__ = ["import_graph_def"]

_BACK_EDGE_OPS = ("NextIteration", "RefNextIteration")


def import_graph_def(graph_def, input_map=None, return_elements=None, name=None, op_dict=None,
                     producer_op_list=None):
    """Imports `graph_def` into the default graph under the prefix `name` (default "import").

    Args:
        input_map: {"name:0" in graph_def: Tensor} replacing those tensors.
        return_elements: names ("op" or "op:0") to return, in order.

    Returns:
        The list of requested Operations/Tensors (None if `return_elements` is None).

    Raises:
        ValueError: unknown ops, dangling inputs, inputs naming an output their producer does
            not have, a node with more or fewer inputs than its op takes, or bad input_map keys.
        InvalidArgumentError: an attr value that cannot be decoded (a Const whose tensor content
            does not match its dtype and shape).
    """
    g = _ops.get_default_graph()
    input_map = dict(input_map or {})
    prefix = "import" if name is None else name
    with g.name_scope(prefix) as scope:
        pass
    scope = scope if prefix else ""
    nodes = list(graph_def.node)
    by_name = {nd.name: nd for nd in nodes}
    created: dict[str, _ops.Operation] = {}
    used_map = set()
    order, state = [], {}
    back_edges = []   # (merge node, input position, NextIteration node, output index)

    def visit(n):
        stack = [(n, False)]
        while stack:
            cur, done = stack.pop()
            if done:
                state[cur] = 2
                order.append(cur)
                continue
            if state.get(cur) == 2:
                continue
            if state.get(cur) == 1:
                raise ValueError(f"import_graph_def: graph has a cycle through {cur}")
            state[cur] = 1
            stack.append((cur, True))
            for inp in by_name[cur].input:
                src, _, _ = _parse(inp)
                if src not in by_name:
                    raise ValueError(f"Node '{cur}': Unknown input node '{inp}'")
                if by_name[src].op in _BACK_EDGE_OPS:
                    continue   # a loop's back edge into its Merge: connected after both exist
                if state.get(src) != 2:
                    stack.append((src, False))

    for nd in nodes:
        if state.get(nd.name) != 2:
            visit(nd.name)
    for nm in order:
        nd = by_name[nm]
        op_def = op_def_registry.lookup(nd.op)
        if op_def is None:
            raise ValueError(f"Op type not registered '{nd.op}' in binary running on this machine "
                             f"(node {nd.name})")
        inputs, ctrl = [], []
        for inp in nd.input:
            src, idx, is_ctrl = _parse(inp)
            if is_ctrl:
                key = "^" + src
                if key in input_map:
                    used_map.add(key)
                    ctrl.append(input_map[key])
                else:
                    ctrl.append(created[src])
                continue
            key = f"{src}:{idx}"
            if key in input_map or (idx == 0 and src in input_map):
                k = key if key in input_map else src
                used_map.add(k)
                inputs.append(_ops.convert_to_tensor(input_map[k]))
            elif src not in created and by_name[src].op in _BACK_EDGE_OPS:
                back_edges.append((nm, len(inputs), src, idx))
                inputs.append(None)
            else:
                inputs.append(_output(created[src], idx, nm, src))
        if any(t is None for t in inputs):   # a Merge whose NextIteration comes later
            stand_in = next((t for t in inputs if t is not None), None)
            if stand_in is None:
                raise ValueError(f"Node '{nm}': every input is a loop back edge")
            inputs = [stand_in if t is None else t for t in inputs]
        attrs = {}
        for k, v in nd.attr.items():
            if k == "_output_shapes":
                continue
            d = op_def.attrs.get(k)
            try:
                attrs[k] = _attr_value.from_proto(v, d.type if d else None)
            except errors.OpError as e:
                raise type(e)(None, None, f"Node '{nm}' ({nd.op}), attr '{k}': {e.message}") from None
            except (TypeError, ValueError) as e:   # (an unknown DataType enum)
                raise ValueError(f"Node '{nm}' ({nd.op}), attr '{k}': {e}") from None
        for k, d in op_def.attrs.items():   # attrs stripped because they held their default (TF too)
            if k not in attrs and d.has_default:
                attrs[k] = d.default
        why = input_count_message(nm, op_def, attrs, len(inputs))
        if why is not None:
            raise ValueError(why)
        if "_class" in attrs:
            attrs["_class"] = [f"loc:@{scope}{c[5:]}" if c.startswith("loc:@") else c
                               for c in attrs["_class"]]
        with g.control_dependencies(None):
            op = g.create_op(nd.op, inputs, name=f"{scope}{nd.name}/" if scope else nd.name + "/",
                             attrs=attrs, op_def=op_def)
        g._names_in_use[op.name.lower()] = max(g._names_in_use.get(op.name.lower(), 0), 1)
        for c in ctrl:
            op._add_control_input(c)
        if nd.device:
            op._set_device(nd.device)
        created[nm] = op
    for nm, pos, src, idx in back_edges:
        created[nm]._update_input(pos, _output(created[src], idx, nm, src))
    missing = set(input_map) - used_map
    if missing:
        raise ValueError(f"Attempted to map inputs that were not found in graph_def: "
                         f"[{', '.join(sorted(missing))}]")
    if return_elements is None:
        return None
    out = []
    for r in return_elements:
        if ":" in r:
            src, idx, _ = _parse(r)
            if src not in created or idx >= len(created[src].outputs):
                raise ValueError(f"Requested return_element {r!r} not found in graph_def.")
            out.append(created[src].outputs[idx])
        else:
            if r not in created:
                raise ValueError(f"Requested return_element {r!r} not found in graph_def.")
            out.append(created[r])
    return out


def _output(op, index: int, consumer: str, src: str):
    """Output `index` of `op` (node `src` of the GraphDef), which node `consumer` takes as input.

    Raises:
        ValueError: `op` has no such output (TF's importer raises ValueError too).
    """
    outs = op.outputs
    if index >= len(outs):
        raise ValueError(invalid_output_message(consumer, src, index, len(outs)))
    return outs[index]

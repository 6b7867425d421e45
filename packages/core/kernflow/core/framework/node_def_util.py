"""Helpers for NodeDefs: input strings ("node", "node:1", "^node") and what makes a node's inputs
valid (TF's GraphConstructor checks, shared by import_graph_def, the master and the executor)."""

from __future__ import annotations

__all__ = ["parse_input", "graph_without_nodes", "invalid_output_message", "input_count_message", "arg_attrs",
           "num_outputs", "input_error", "check_inputs", "output_dtypes", "check_nodes", "const_error"]


def parse_input(s: str) -> tuple[str, int, bool]:
    """Parses a NodeDef input string into (node name, output index, is_control)."""
    if s.startswith("^"):
        return s[1:], -1, True
    name, sep, idx = s.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx), False
    return s, 0, False


def graph_without_nodes(graph_def):
    """A copy of `graph_def` (versions, function library) with no nodes: what a rewrite pass refills."""
    out = type(graph_def)()
    out.CopyFrom(graph_def)
    del out.node[:]
    return out


def invalid_output_message(node: str, src: str, index: int, num_outputs: int) -> str:
    """The message for an input naming an output its producer does not have (TF's wording)."""
    return (f"Node '{node}': Connecting to invalid output {index} of source node {src} which has "
            f"{num_outputs} outputs.")


def input_count_message(node: str, op_def, attrs: dict, num_inputs: int) -> str | None:
    """The message when a node has not as many data inputs as its OpDef expects, else None."""
    expected = op_def.expand_inputs(attrs)
    if len(expected) == num_inputs:
        return None
    types = []
    for arg, i in expected:
        try:
            types.append(arg.dtype_at(attrs, i).name)
        except (KeyError, TypeError, IndexError):   # a type attr the node lacks: name it instead
            types.append(arg.type_attr or arg.type_list_attr or arg.name)
    return (f"NodeDef expected inputs '{', '.join(types)}' do not match {num_inputs} inputs "
            f"specified; Op<name={op_def.name}>; NodeDef: {{{{node {node}}}}}")


def arg_attrs(nd, op_def) -> dict:
    """The attrs of NodeDef `nd` that type and count its inputs and outputs, defaults filled in.

    Cheap where decoding every attr is not: no tensor attr (a Const's value) is decoded.
    """
    from kernflow.core.framework import attr_value
    out = {}
    for arg in op_def.inputs + op_def.outputs:
        for k in (arg.type_attr, arg.number_attr, arg.type_list_attr):
            if not k or k in out:
                continue
            d = op_def.attrs.get(k)
            if k in nd.attr:
                out[k] = attr_value.from_proto(nd.attr[k], d.type if d else None)
            elif d is not None and d.has_default:
                out[k] = d.default
    return out


def num_outputs(nd, op_def) -> int:
    """The number of outputs NodeDef `nd` has under its OpDef."""
    return len(op_def.expand_outputs(arg_attrs(nd, op_def)))


def input_error(nd, op_def, attrs: dict, outputs_of) -> str | None:
    """What is wrong with the inputs of NodeDef `nd`, or None when nothing is.

    Args:
        nd: the NodeDef.
        op_def: its OpDef.
        attrs: its attr values (`arg_attrs` is enough).
        outputs_of: fn(node name) -> number of outputs of that node, or None when the graph has
            no node of that name.
    """
    data = 0
    for s in nd.input:
        src, idx, ctrl = parse_input(s)
        n = outputs_of(src)
        if n is None:
            return f"Node '{nd.name}': Unknown input node '{s}'"
        if ctrl:
            continue
        if idx >= n:
            return invalid_output_message(nd.name, src, idx, n)
        data += 1
    return input_count_message(nd.name, op_def, attrs, data)


def check_inputs(graph_def, existing=None) -> None:
    """Checks that every input of `graph_def`'s nodes names a node and an output it has, and that
    each node has as many data inputs as its OpDef expects.

    Args:
        graph_def: the nodes to check (a GraphDef).
        existing: optional {name: NodeDef} of nodes already in the graph that `graph_def` extends.

    Raises:
        InvalidArgumentError: naming the node, the bad input and the producer's output count.
        NotFoundError: for an op type that is not registered.
    """
    from kernflow.core.framework import errors
    from kernflow.core.framework import op_def_registry
    nodes = dict(existing or {})
    nodes.update((nd.name, nd) for nd in graph_def.node)
    counts: dict[str, int] = {}

    def outputs_of(name):
        n = counts.get(name)
        if n is None:
            nd = nodes.get(name)
            if nd is None:
                return None
            n = counts[name] = num_outputs(nd, op_def_registry.get(nd.op))
        return n

    for nd in graph_def.node:
        op_def = op_def_registry.get(nd.op)
        why = input_error(nd, op_def, arg_attrs(nd, op_def), outputs_of)
        if why is not None:
            raise errors.InvalidArgumentError(None, None, why)


def output_dtypes(nd, op_def, attrs) -> list:
    """The dtypes of a node's outputs (its OpDef's, typed by its attrs).

    Raises:
        InvalidArgumentError: an attr the OpDef needs for them is missing (TF's message).
    """
    from kernflow.core.framework import errors
    from kernflow.core.framework import ops as _ops
    try:
        return _ops.output_dtypes(op_def, attrs)
    except KeyError as e:
        raise errors.InvalidArgumentError(
            None, None, f"NodeDef missing attr {e} from Op<name={op_def.name}>; "
            f"NodeDef: {{{{node {nd.name}}}}}") from None


def check_nodes(parsed, index: dict, out_dtypes: list) -> None:
    """Rejects a node whose inputs do not fit its producers or its OpDef, and a Const whose value
    is not of its dtype, as TF's graph construction and kernel creation do.

    Args:
        parsed: ``(NodeDef, OpDef, attrs, ...)`` per node; `index`: node name -> position in
            `parsed`; `out_dtypes`: each node's output dtypes (`output_dtypes`).

    Raises:
        InvalidArgumentError: naming the node, and the bad input index and the producer's output
            count, or the expected and actual input count, or both dtypes.
    """
    from kernflow.core.framework import errors

    def outputs_of(name):
        i = index.get(name)
        return None if i is None else len(out_dtypes[i])

    for nd, op_def, attrs, _ in parsed:
        why = input_error(nd, op_def, attrs, outputs_of)
        if why is None and nd.op == "Const":
            why = const_error(nd)
        if why is not None:
            raise errors.InvalidArgumentError(None, None, why)


def const_error(nd) -> str | None:
    """What is wrong with a Const NodeDef's `value` and `dtype` attrs, or None."""
    from kernflow.core.framework import dtypes as _dtypes
    for k in ("value", "dtype"):
        if k not in nd.attr:
            return f"NodeDef missing attr '{k}' from Op<name=Const>; NodeDef: {{{{node {nd.name}}}}}"
    got, want = nd.attr["value"].tensor.dtype, nd.attr["dtype"].type
    if got != want:
        return (f"Node '{nd.name}': Type mismatch between value ({_dtypes.as_dtype(got).name}) and "
                f"dtype ({_dtypes.as_dtype(want).name})")
    return None

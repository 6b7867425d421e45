"""`apply_op`: builds an Operation from an OpDef and Python arguments, inferring type attrs.

Like TF's op_def_library: type attrs (``T``) are taken from the first Tensor argument that
carries them (or from an explicit attr); Python values are then converted to constants of that
type; list arguments set their number attrs; attr defaults are filled in and allowed values checked
with errors that name the op and the parameter.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import op_def_registry as _registry
from kernflow.core.framework import ops as _ops

__all__ = ["apply_op"]


def _allowed_str(allowed) -> str:
    return ", ".join(d.name for d in allowed)


def _check_type(op_def, attr_name: str, dtype, param: str) -> None:
    a = op_def.attrs.get(attr_name)
    if a is not None and a.allowed is not None and dtype.base_dtype not in a.allowed:
        raise TypeError(f"Value passed to parameter '{param}' has DataType {dtype.base_dtype.name} not "
                        f"in list of allowed values: {_allowed_str(a.allowed)} (op '{op_def.name}')")


def _is_tensorlike(v) -> bool:
    return isinstance(v, _ops.Tensor) or hasattr(v, "_as_graph_element")


def apply_op(op_type: str, inputs, attrs=None, name=None, graph=None):
    """Creates an op of type `op_type` and returns it.

    Args:
        op_type: registered op type.
        inputs: list of values, one per input arg of the OpDef (a list for list args).
        attrs: dict of attr values; type attrs may be left out and are inferred from inputs.
        name: op name (uniquified under the current name scope).

    Returns:
        The new Operation.

    Raises:
        TypeError: an input's dtype is not allowed, or inputs that must agree in type do not.
        ValueError: the shape function rejects the inputs.
    """
    op_def = _registry.get(op_type)
    attrs = dict(attrs or {})
    if len(inputs) != len(op_def.inputs):
        raise TypeError(f"{op_type} takes {len(op_def.inputs)} inputs "
                        f"({', '.join(a.name for a in op_def.inputs)}), got {len(inputs)}")
    if graph is None:
        flat = [v for x in inputs for v in (x if isinstance(x, (list, tuple)) else [x])]
        graph = _ops._get_graph_from_inputs(flat)
    inferred: dict = {k: _dtypes.as_dtype(v) for k, v in attrs.items()
                      if k in op_def.attrs and op_def.attrs[k].type == "type"}
    # Pass 1: learn type attrs from tensor arguments.
    for arg, value in zip(op_def.inputs, inputs):
        if arg.type_attr and arg.type_attr not in inferred:
            vals = value if arg.number_attr else [value]
            for v in vals:
                if _is_tensorlike(v):
                    t = _ops.convert_to_tensor(v, as_ref=arg.is_ref)
                    inferred[arg.type_attr] = t.dtype.base_dtype
                    break
    # Pass 2: convert everything.
    with graph.as_default():
        flat_inputs = []
        for arg, value in zip(op_def.inputs, inputs):
            if arg.type_list_attr:
                ts = [_ops.convert_to_tensor(v) for v in value]
                attrs.setdefault(arg.type_list_attr, [t.dtype.base_dtype for t in ts])
                flat_inputs.extend(ts)
                continue
            vals = list(value) if arg.number_attr else [value]
            if arg.number_attr:
                if not isinstance(value, (list, tuple)):
                    raise TypeError(f"Expected list for '{arg.name}' argument to '{op_type}' Op, "
                                    f"not {value!r}.")
                attrs[arg.number_attr] = len(vals)
                m = op_def.attrs[arg.number_attr].minimum
                if m is not None and len(vals) < m:
                    raise ValueError(f"List argument '{arg.name}' to '{op_type}' Op with length "
                                     f"{len(vals)} shorter than minimum length {m}.")
            want = arg.type if arg.type is not None else inferred.get(arg.type_attr)
            converted = []
            for v in vals:
                if want is None and arg.type_attr and _is_empty_list(v):
                    want = inferred[arg.type_attr] = _empty_list_dtype(op_def.attrs[arg.type_attr])
                try:
                    t = _ops.convert_to_tensor(v, dtype=want, as_ref=arg.is_ref)
                except (TypeError, ValueError) as e:
                    if want is not None:
                        raise TypeError(f"Input '{arg.name}' of '{op_type}' Op has type "
                                        f"{_describe(v)} that does not match expected type of "
                                        f"{want.name}.") from e
                    raise
                if want is None and arg.type_attr:
                    want = inferred[arg.type_attr] = t.dtype.base_dtype
                if want is not None and t.dtype.base_dtype != want.base_dtype:
                    raise TypeError(f"Input '{arg.name}' of '{op_type}' Op has type "
                                    f"{t.dtype.base_dtype.name} that does not match expected type of "
                                    f"{want.base_dtype.name}.")
                if arg.is_ref and not t.dtype.is_ref_dtype:
                    raise TypeError(f"'{op_type}' Op requires that input '{arg.name}' be a mutable "
                                    f"tensor (e.g. a Variable), got {t.name}")
                converted.append(t)
            if arg.type_attr:
                _check_type(op_def, arg.type_attr, want, arg.name)
            flat_inputs.extend(converted)
        for k, v in inferred.items():
            attrs.setdefault(k, v)
        for a in op_def.attrs.values():
            if a.name not in attrs:
                if not a.has_default:
                    raise TypeError(f"Missing required attr '{a.name}' of op '{op_type}'")
                attrs[a.name] = a.default
            else:
                attrs[a.name] = _coerce_attr(op_def, a, attrs[a.name])
        return graph.create_op(op_type, flat_inputs, name=name, attrs=attrs, op_def=op_def)


def _is_empty_list(v) -> bool:
    return isinstance(v, (list, tuple)) and len(v) == 0


def _empty_list_dtype(a):
    """The type an empty Python list gets for an input of type attr `a` that nothing else fixed.

    As TF: the attr's default type (``Tidx: {int32, int64} = int32``), else, when the attr
    restricts types to a set without float32 (index attrs such as ``Tindices: {int32, int64}``),
    the first integer type it allows, else float32 (what converting an empty list gives).
    """
    if a.has_default and a.default is not None:
        return _dtypes.as_dtype(a.default).base_dtype
    if a.allowed is not None and _dtypes.float32 in a.allowed:
        return _dtypes.float32
    for d in a.allowed or ():
        if d.is_integer:
            return d
    return _dtypes.float32


def _describe(v) -> str:
    if isinstance(v, _ops.Tensor):
        return v.dtype.name
    return type(v).__name__


def _coerce_attr(op_def, a, v):
    t = a.type
    if t == "type":
        d = _dtypes.as_dtype(v)
        if a.allowed is not None and d.base_dtype not in a.allowed:
            raise TypeError(f"Value for attr '{a.name}' of {d.name} is not in the list of allowed "
                            f"values: {_allowed_str(a.allowed)} (op '{op_def.name}')")
        return d
    if t == "int":
        v = int(v)
        if a.minimum is not None and v < a.minimum:
            raise ValueError(f"Attr '{a.name}' of '{op_def.name}' Op passed {v} less than minimum "
                             f"{a.minimum}.")
        return v
    if t == "float":
        return float(v)
    if t == "bool":
        return bool(v)
    if t == "string":
        v = v.decode() if isinstance(v, bytes) else str(v)
        if a.allowed is not None and v not in a.allowed:
            raise ValueError(f"Attr '{a.name}' of '{op_def.name}' Op passed '{v}' not in: "
                             f"{', '.join(repr(x) for x in a.allowed)}.")
        return v
    if t == "shape":
        from kernflow.core.framework import tensor_shape
        return tensor_shape.as_shape(v)
    if t == "list(int)":
        return [int(x) for x in v]
    if t == "list(type)":
        return [_dtypes.as_dtype(x) for x in v]
    if t == "list(float)":
        return [float(x) for x in v]
    if t == "list(string)":
        return [x.decode() if isinstance(x, bytes) else str(x) for x in v]
    if t == "list(shape)":
        from kernflow.core.framework import tensor_shape
        return [tensor_shape.as_shape(x) for x in v]
    return v

"""Conversion of op attribute values between Python and AttrValue protobufs."""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util

__all__ = ["to_proto", "from_proto", "infer_type"]


def infer_type(value) -> str:
    """Guesses the attr type string of a Python value (for attrs not declared by the OpDef)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, _dtypes.DType):
        return "type"
    if isinstance(value, _ts.TensorShape):
        return "shape"
    if isinstance(value, np.ndarray):
        return "tensor"
    if isinstance(value, (list, tuple)):
        return f"list({infer_type(value[0])})" if value else "list(int)"
    raise TypeError(f"cannot infer attr type of {value!r}")


def to_proto(value, typ: str | None = None):
    """Returns an AttrValue for `value` of attr type `typ` (inferred when None)."""
    from kernflow.core.protobuf import attr_value_pb2
    typ = typ or infer_type(value)
    a = attr_value_pb2.AttrValue()
    if typ.startswith("list("):
        inner, lst = typ[5:-1], a.list
        a.list.SetInParent()
        for v in value:
            if inner == "string":
                lst.s.append(v.encode() if isinstance(v, str) else v)
            elif inner == "int":
                lst.i.append(int(v))
            elif inner == "float":
                lst.f.append(float(v))
            elif inner == "bool":
                lst.b.append(bool(v))
            elif inner == "type":
                lst.type.append(_dtypes.as_dtype(v).as_datatype_enum)
            elif inner == "shape":
                lst.shape.append(tensor_util.shape_to_proto(v))
            elif inner == "tensor":
                lst.tensor.append(tensor_util.make_tensor_proto(v))
        return a
    if typ == "string":
        a.s = value.encode() if isinstance(value, str) else bytes(value)
    elif typ == "int":
        a.i = int(value)
    elif typ == "float":
        a.f = float(value)
    elif typ == "bool":
        a.b = bool(value)
    elif typ == "type":
        a.type = _dtypes.as_dtype(value).as_datatype_enum
    elif typ == "shape":
        a.shape.CopyFrom(tensor_util.shape_to_proto(value))
    elif typ == "tensor":
        a.tensor.CopyFrom(tensor_util.make_tensor_proto(value))
    elif typ == "func":
        a.func.name = value
    else:
        raise TypeError(f"unknown attr type {typ}")
    return a


def from_proto(a, typ: str | None = None):
    """Returns the Python value of an AttrValue (str for strings, DType, TensorShape, ndarray)."""
    which = a.WhichOneof("value")
    if which == "list":
        lst = a.list
        inner = typ[5:-1] if typ and typ.startswith("list(") else None
        if inner == "string" or lst.s:
            return [s.decode() for s in lst.s]
        if inner == "int" or lst.i:
            return list(lst.i)
        if inner == "float" or lst.f:
            return list(lst.f)
        if inner == "bool" or lst.b:
            return list(lst.b)
        if inner == "type" or lst.type:
            return [_dtypes.as_dtype(t) for t in lst.type]
        if inner == "shape" or lst.shape:
            return [tensor_util.shape_from_proto(s) for s in lst.shape]
        if inner == "tensor" or lst.tensor:
            return [tensor_util.make_ndarray(t) for t in lst.tensor]
        return []
    if which == "s":
        return a.s.decode()
    if which == "i":
        return a.i
    if which == "f":
        return a.f
    if which == "b":
        return a.b
    if which == "type":
        return _dtypes.as_dtype(a.type)
    if which == "shape":
        return tensor_util.shape_from_proto(a.shape)
    if which == "tensor":
        return tensor_util.make_ndarray(a.tensor)
    if which == "func":
        return a.func.name
    return None

"""The op registry: one `OpDef` per op type, declared in TF's signature language.

An op is declared once, next to its Python wrapper (``kernflow/core/ops/<family>_ops.py``)::

    register_op("MatMul",
                inputs=["a: T", "b: T"], outputs=["product: T"],
                attrs=["transpose_a: bool = false", "transpose_b: bool = false",
                       "T: {half, float, double, int32, int64, complex64, complex128}"],
                shape_fn=_matmul_shape, doc="Multiplies matrix a by matrix b.")

Argument specs: ``name: T`` (type attr), ``name: float`` (fixed type), ``name: N * T`` (list of N of
type T), ``name: out_types`` (list of types given by a ``list(type)`` attr), ``name: Ref(T)`` (a
mutable reference, e.g. a Variable's buffer). Attr specs: ``name: type``, ``name: {float, int32}``
(allowed types), ``name: int >= 1``, ``name: bool = false``, ``name: {'SAME', 'VALID'}``,
``name: list(int) = []``, ``name: shape``, ``name: tensor``, ``name: string = ''``.

A shape function takes the new `Operation` and returns one `TensorShape` (or anything
`as_shape` accepts) per output; it raises ValueError for inconsistent inputs.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
import threading
from typing import Any, Callable

from kernflow.core.framework import dtypes as _dtypes

__all__ = ["ArgDef", "AttrDef", "OpDef", "register_op", "get", "lookup", "registered_ops", "call_site"]

_TYPE_NAMES = {
    "half": "float16", "float": "float32", "double": "float64", "float16": "float16",
    "float32": "float32", "float64": "float64", "int8": "int8", "int16": "int16", "int32": "int32",
    "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "bool": "bool", "string": "string", "complex64": "complex64", "complex128": "complex128",
    "resource": "resource", "variant": "variant", "qint8": "qint8", "quint8": "quint8",
    "qint16": "qint16", "quint16": "quint16", "qint32": "qint32",
}
# Shorthands usable inside `{...}` type sets.
TYPE_GROUPS = {
    "numbertype": ["half", "float", "double", "int8", "int16", "int32", "int64", "uint8", "uint16",
                   "uint32", "uint64", "complex64", "complex128"],
    "realnumbertype": ["half", "float", "double", "int8", "int16", "int32", "int64", "uint8",
                       "uint16", "uint32", "uint64"],
    "floattype": ["half", "float", "double"],
    "inttype": ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"],
    "quantizedtype": ["qint8", "quint8", "qint16", "quint16", "qint32"],
    "alltypes": list(_TYPE_NAMES),
}


@dataclasses.dataclass(frozen=True)
class ArgDef:
    """One input or output argument of an op."""
    name: str
    type: Any = None            # a fixed DType, or None
    type_attr: str = ""         # attr that holds the type, e.g. "T"
    number_attr: str = ""       # attr that holds the list length, e.g. "N"
    type_list_attr: str = ""    # attr that holds a list of types
    is_ref: bool = False

    @property
    def is_list(self) -> bool:
        return bool(self.number_attr or self.type_list_attr)

    def dtype_at(self, attrs: dict, index: int = 0):
        """The dtype of this arg's `index`-th tensor for the attr values `attrs` (a reference
        dtype when the arg is a reference).

        Raises:
            KeyError: if `attrs` lacks the type attr or type list attr the arg names.
        """
        if self.type_list_attr:
            t = _dtypes.as_dtype(attrs[self.type_list_attr][index])
        else:
            t = self.type if self.type is not None else _dtypes.as_dtype(attrs[self.type_attr])
        return t._as_ref if self.is_ref else t


def _expand(args, attrs: dict) -> list[tuple[ArgDef, int]]:
    out = []
    for a in args:
        if a.number_attr:
            n = attrs.get(a.number_attr) or 0
        elif a.type_list_attr:
            n = len(attrs.get(a.type_list_attr) or ())
        else:
            n = 1
        out.extend((a, i) for i in range(n))
    return out


@dataclasses.dataclass(frozen=True)
class AttrDef:
    """One attribute of an op: its type string, default and allowed values."""
    name: str
    type: str                    # "type", "int", "float", "bool", "string", "shape", "tensor", "list(int)"...
    default: Any = dataclasses.field(default=None)
    has_default: bool = False
    allowed: tuple | None = None  # allowed DTypes (for "type") or values (for "string")
    minimum: int | None = None


@dataclasses.dataclass
class OpDef:
    """The signature of one op type."""
    name: str
    inputs: list[ArgDef]
    outputs: list[ArgDef]
    attrs: dict[str, AttrDef]
    stateful: bool = False
    shape_fn: Callable | None = None
    doc: str = ""
    site: str = ""
    # Ops whose inputs may be uninitialized references (IsVariableInitialized, Assign).
    allows_uninitialized_input: bool = False

    def expand_inputs(self, attrs: dict) -> list[tuple[ArgDef, int]]:
        """The flat inputs of a node with attr values `attrs`, in order: one `(arg, index)` per
        tensor, `index` being its position in the arg's list (0 for a single tensor). An ``N * T``
        arg gives ``attrs[N]`` entries, a type list arg one per type; a missing length attr gives
        none. Names, reference flags and dtypes (`ArgDef.dtype_at`) are read from the pairs.
        """
        return _expand(self.inputs, attrs)

    def expand_outputs(self, attrs: dict) -> list[tuple[ArgDef, int]]:
        """The flat outputs of a node with attr values `attrs`, as `expand_inputs`."""
        return _expand(self.outputs, attrs)

    def to_proto(self):
        """Returns the `OpDef` protobuf of this op."""
        from kernflow.core.framework import attr_value
        from kernflow.core.protobuf import op_def_pb2
        p = op_def_pb2.OpDef(name=self.name, summary=self.doc.split("\n")[0], description=self.doc,
                             is_stateful=self.stateful)
        for src, dst in ((self.inputs, p.input_arg), (self.outputs, p.output_arg)):
            for a in src:
                dst.add(name=a.name, type=a.type.as_datatype_enum if a.type else 0,
                        type_attr=a.type_attr, number_attr=a.number_attr,
                        type_list_attr=a.type_list_attr, is_ref=a.is_ref)
        for a in self.attrs.values():
            d = p.attr.add(name=a.name, type=a.type)
            if a.has_default and a.default is not None:
                d.default_value.CopyFrom(attr_value.to_proto(a.default, a.type))
            if a.minimum is not None:
                d.has_minimum, d.minimum = True, a.minimum
        return p


_lock = threading.Lock()
_registry: dict[str, OpDef] = {}


def call_site(depth: int = 2) -> str:
    """Returns "file:line" of the caller `depth` frames up, for registry error messages."""
    f = sys._getframe(depth)
    return f"{f.f_code.co_filename}:{f.f_lineno}"


def _parse_type(name: str):
    key = name.strip()
    if key not in _TYPE_NAMES:
        raise ValueError(f"unknown type {key!r} in op signature")
    return _dtypes.as_dtype(_TYPE_NAMES[key])


def _parse_arg(spec: str, attrs: dict[str, AttrDef]) -> ArgDef:
    m = re.fullmatch(r"\s*(\w+)\s*:\s*(.+?)\s*", spec)
    if not m:
        raise ValueError(f"bad argument spec {spec!r}")
    name, t = m.groups()
    is_ref = False
    rm = re.fullmatch(r"Ref\((.+)\)", t)
    if rm:
        is_ref, t = True, rm.group(1).strip()
    lm = re.fullmatch(r"(\w+)\s*\*\s*(\w+|Ref\(\w+\))", t)
    if lm:
        number_attr, t = lm.groups()
        rm = re.fullmatch(r"Ref\((\w+)\)", t)
        if rm:   # "N * Ref(T)": a list of references (RefMerge)
            is_ref, t = True, rm.group(1)
        if t in _TYPE_NAMES:
            return ArgDef(name, type=_parse_type(t), number_attr=number_attr, is_ref=is_ref)
        return ArgDef(name, type_attr=t, number_attr=number_attr, is_ref=is_ref)
    if t in _TYPE_NAMES:
        return ArgDef(name, type=_parse_type(t), is_ref=is_ref)
    attr = attrs.get(t)
    if attr is None:
        raise ValueError(f"argument {name!r} names undeclared attr {t!r}")
    if attr.type == "list(type)":
        return ArgDef(name, type_list_attr=t, is_ref=is_ref)
    return ArgDef(name, type_attr=t, is_ref=is_ref)


def _parse_default(text: str, typ: str):
    text = text.strip()
    if typ.startswith("list("):
        inner = text.strip("[]").strip()
        return [] if not inner else [_parse_default(x, typ[5:-1]) for x in inner.split(",")]
    if typ == "bool":
        return {"true": True, "false": False}[text]
    if typ == "int":
        return int(text)
    if typ == "float":
        return float(text)
    if typ == "string":
        return text.strip("'\"")
    if typ == "type":
        return _parse_type(text)
    if typ == "shape":
        from kernflow.core.framework import tensor_shape
        return tensor_shape.TensorShape(None) if text in ("unknown", "None") else \
            tensor_shape.TensorShape(eval(text, {}))  # noqa: S307 - literal list from our own specs
    raise ValueError(f"attrs of type {typ} take no default")


def _parse_attr(spec: str) -> AttrDef:
    m = re.fullmatch(r"\s*(\w+)\s*:\s*(.+?)\s*(?:(?<![<>])=\s*(.+?))?\s*", spec)
    if not m:
        raise ValueError(f"bad attr spec {spec!r}")
    name, typ, default = m.groups()
    allowed, minimum = None, None
    mm = re.fullmatch(r"int\s*>=\s*(-?\d+)", typ)
    if mm:
        typ, minimum = "int", int(mm.group(1))
    if typ in TYPE_GROUPS:
        typ = "{" + typ + "}"
    if typ.startswith("{"):
        items = [x.strip() for x in typ.strip("{}").split(",")]
        if items[0].startswith(("'", '"')):
            typ, allowed = "string", tuple(x.strip("'\"") for x in items)
        else:
            names = [n for x in items for n in TYPE_GROUPS.get(x, [x])]
            typ, allowed = "type", tuple(dict.fromkeys(_parse_type(x) for x in names))
    known = ("type", "int", "float", "bool", "string", "shape", "tensor", "func")
    if typ not in known and not (typ.startswith("list(") and typ[5:-1] in known):
        raise ValueError(f"attr {name!r} has unknown type {typ!r}")
    if default is None:
        return AttrDef(name, typ, allowed=allowed, minimum=minimum)
    return AttrDef(name, typ, _parse_default(default, typ), True, allowed, minimum)


def register_op(name: str, *, inputs=(), outputs=(), attrs=(), shape_fn=None, stateful=False,
                doc: str = "", allows_uninitialized_input: bool = False) -> OpDef:
    """Declares an op type. See the module docstring for the signature language.

    Raises:
        ValueError: if `name` is already registered (the message names both call sites), or if a
            spec does not parse.
    """
    site = call_site()
    attr_defs = {a.name: a for a in map(_parse_attr, attrs)}
    op = OpDef(name, [_parse_arg(s, attr_defs) for s in inputs],
               [_parse_arg(s, attr_defs) for s in outputs], attr_defs, stateful, shape_fn,
               doc.strip(), site, allows_uninitialized_input)
    for arg in op.inputs + op.outputs:
        for a in (arg.number_attr,):
            if a and a not in attr_defs:
                attr_defs[a] = AttrDef(a, "int", minimum=0)
    with _lock:
        old = _registry.get(name)
        if old is not None:
            raise ValueError(f"op {name!r} registered twice: first at {old.site}, again at {site}")
        _registry[name] = op
    return op


def lookup(name: str) -> OpDef | None:
    """Returns the OpDef of `name`, or None."""
    return _registry.get(name)


def get(name: str) -> OpDef:
    """Returns the OpDef of `name`.

    Raises:
        NotFoundError: naming the closest registered op types.
    """
    op = _registry.get(name)
    if op is None:
        # Plugins declare their ops when the registries are first built: do that now and retry.
        from kernflow.core.plugins import manager
        manager.registries()
        op = _registry.get(name)
    if op is None:
        from kernflow.core.framework import errors
        close = difflib.get_close_matches(name, list(_registry), n=3)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        raise errors.NotFoundError(None, None, f"Op type not registered '{name}'.{hint}")
    return op


def registered_ops() -> dict[str, OpDef]:
    """Returns a snapshot of every registered op, by name."""
    with _lock:
        return dict(_registry)

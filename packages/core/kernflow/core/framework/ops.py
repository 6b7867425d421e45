"""Graph, Operation and Tensor: the dataflow graph a Session runs.

A `Graph` holds `Operation`s in creation order; each op has input `Tensor`s (outputs of earlier
ops), control inputs, attributes, a requested device and output `Tensor`s whose dtype and static
shape are fixed when the op is created (shape functions run at construction). The graph serializes
to a `GraphDef` protobuf; `version` counts ops so a session can extend its copy incrementally.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any, Callable

from kernflow.core.framework import attr_value as _attr_value
from kernflow.core.framework import device_spec as _device_spec
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import op_def_registry as _registry
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.graph_keys import GraphKeys  # noqa: F401 - also ops.GraphKeys

__all__ = ["Graph", "Operation", "Tensor", "get_default_graph", "reset_default_graph",
           "convert_to_tensor", "register_tensor_conversion_function", "name_scope",
           "control_dependencies", "device", "colocate_with", "GraphKeys", "add_to_collection",
           "get_collection", "get_collection_ref", "is_tensor"]

_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\-/>]*$")


class Tensor:
    """A symbolic handle to one output of an `Operation`.

    A tensor has a dtype and a static shape (dims may be None). It holds no value: pass it to
    `Session.run` to compute one.
    """

    __slots__ = ("_op", "_value_index", "_dtype", "_shape", "_consumers", "_name", "__weakref__")
    # Let numpy defer to our operators (np.float32(2) * t calls t.__rmul__).
    __array_priority__ = 100

    def __init__(self, op: "Operation", value_index: int, dtype):
        self._op = op
        self._value_index = value_index
        self._dtype = _dtypes.as_dtype(dtype)
        self._shape = _ts.TensorShape(None)
        self._consumers: list[Operation] = []
        self._name = f"{op._name}:{value_index}"   # (an op's name is fixed when it is created)

    @property
    def op(self) -> "Operation":
        return self._op

    @property
    def value_index(self) -> int:
        return self._value_index

    @property
    def dtype(self):
        return self._dtype

    @property
    def graph(self) -> "Graph":
        return self._op.graph

    @property
    def name(self) -> str:
        return self._name

    @property
    def device(self) -> str:
        return self._op.device

    @property
    def shape(self) -> _ts.TensorShape:
        return self._shape

    def get_shape(self) -> _ts.TensorShape:
        return self._shape

    def set_shape(self, shape) -> None:
        """Refines the static shape. Raises ValueError if `shape` is incompatible."""
        self._shape = self._shape.merge_with(_ts.as_shape(shape))

    def consumers(self) -> list["Operation"]:
        """Returns the ops that take this tensor as a data input."""
        return list(self._consumers)

    def eval(self, feed_dict=None, session=None):
        """Runs the default (or given) session to compute this tensor's value."""
        from kernflow.core.client import session as _session
        return _session._run_using_default_session(self, feed_dict, session)

    def __repr__(self):
        return f"<kf.Tensor '{self.name}' shape={self._shape} dtype={self._dtype.name}>"

    __str__ = __repr__

    # TF1: identity, so tensors work as dict keys. object's own slots compare and hash by identity
    # in C: a feed dict, a fetch key or a graph pass hashing tensors pays no Python call per lookup.
    __hash__ = object.__hash__
    __eq__ = object.__eq__
    __ne__ = object.__ne__

    def __bool__(self):
        raise TypeError("Using a `kf.Tensor` as a Python `bool` is not allowed. Use `if t is not None:` "
                        "to test for None, or kf.cond to branch on a tensor's value.")

    def __iter__(self):
        shape = self._shape
        if shape.rank is None or shape.rank == 0 or shape.dim_values[0] is None:
            raise TypeError("Tensor objects are only iterable when the first dimension is known.")
        for i in range(shape.dim_values[0]):
            yield self[i]

    def __len__(self):
        raise TypeError(f"len is not well defined for symbolic Tensors ({self.name}). "
                        "Use kf.shape(t)[0] or t.shape[0].")

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"Cannot convert a symbolic Tensor ({self.name}) to a numpy array.")

    @staticmethod
    def _override_operator(name: str, fn: Callable) -> None:
        setattr(Tensor, name, fn)


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


class Operation:
    """A node of the graph: an op type, inputs, attributes, a device and outputs."""

    def __init__(self, graph: "Graph", name: str, op_def, inputs: list[Tensor], output_dtypes,
                 attrs: dict[str, Any], control_inputs: list["Operation"], device: str):
        self._graph = graph
        self._name = name
        self._op_def = op_def
        self._type = op_def.name
        self._inputs = list(inputs)
        self._control_inputs = list(dict.fromkeys(control_inputs))
        self._attrs = attrs
        self._device = device
        self._outputs = [Tensor(self, i, dt) for i, dt in enumerate(output_dtypes)]
        self._control_outputs: list[Operation] = []
        self._id = 0
        self._node_def = None
        # Set from Graph.gradient_override_map when the op is created (TF semantics).
        self._gradient_op_type = None
        # The cond/while context the op was built in (control_flow_v1), or None.
        self._control_flow_context = None

    name = property(lambda self: self._name)
    type = property(lambda self: self._type)
    graph = property(lambda self: self._graph)
    outputs = property(lambda self: list(self._outputs))
    inputs = property(lambda self: tuple(self._inputs))
    control_inputs = property(lambda self: list(self._control_inputs))
    op_def = property(lambda self: self._op_def)
    device = property(lambda self: self._device)

    @property
    def values(self):
        return tuple(self._outputs)

    def _set_device(self, device: str) -> None:
        self._device = _device_spec.canonical_name(device) if device else ""
        self._node_def = None

    def _add_control_input(self, op: "Operation") -> None:
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            op._control_outputs.append(self)
            self._node_def = None

    def _update_input(self, index: int, tensor: "Tensor") -> None:
        """Replaces input `index` (while_loop closes a loop this way: Merge's back edge)."""
        if tensor.graph is not self._graph:
            raise ValueError(f"Tensor {tensor.name} must be from the same graph as {self._name}.")
        old = self._inputs[index]
        if old.dtype.base_dtype != tensor.dtype.base_dtype:
            raise TypeError(f"Cannot update input {index} of {self._name}: dtype {tensor.dtype.name} "
                            f"does not match {old.dtype.name}")
        try:
            old._consumers.remove(self)
        except ValueError:
            pass
        self._inputs[index] = tensor
        tensor._consumers.append(self)
        self._node_def = None

    def _add_control_inputs(self, ops) -> None:
        for op in ops:
            self._add_control_input(op)

    def get_attr(self, name: str):
        """Returns the value of attribute `name`.

        Raises:
            ValueError: if the op has no such attribute.
        """
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError(f"Operation '{self._name}' has no attr named '{name}'.") from None

    def _set_attr(self, name: str, value) -> None:
        self._attrs[name] = value
        self._node_def = None

    @property
    def node_def(self):
        """The NodeDef protobuf of this op (cached until the op changes)."""
        if self._node_def is None:
            from kernflow.core.protobuf import graph_pb2
            nd = graph_pb2.NodeDef(name=self._name, op=self._type, device=self._device)
            nd.input.extend(t._op._name if t._value_index == 0 else t.name for t in self._inputs)
            nd.input.extend("^" + op._name for op in self._control_inputs)
            attr_defs = self._op_def.attrs
            for k, v in self._attrs.items():
                d = attr_defs.get(k)
                nd.attr[k].CopyFrom(_attr_value.to_proto(v, d.type if d else None))
            self._node_def = nd
        return self._node_def

    def colocation_groups(self) -> list[str]:
        """Returns the "loc:@name" groups this op must share a device with."""
        cls = self._attrs.get("_class")
        return list(cls) if cls else [f"loc:@{self._name}"]

    def run(self, feed_dict=None, session=None) -> None:
        """Runs this op in the default (or given) session."""
        from kernflow.core.client import session as _session
        _session._run_using_default_session(self, feed_dict, session)

    def __repr__(self):
        return f"<kf.Operation '{self._name}' type={self._type}>"

    __str__ = __repr__


class _ThreadLocalStacks(threading.local):
    def __init__(self):
        self.name_scope = ""
        self.control_deps: list = []   # list of (set of ops or None for "clear")
        self.devices: list = []        # device strings or functions
        self.colocation: list = []     # list of Operation
        self.default_graphs: list = []
        self.cf_context = None         # the innermost cond/while context being built


class Graph:
    """A TensorFlow 1.x style computation graph.

    Thread-safety: ops may be added from several threads (a lock guards naming and insertion);
    scopes (`name_scope`, `device`, `control_dependencies`) are per thread.
    """

    def __init__(self):
        self._lock = threading.RLock()
        self._ops_by_name: dict[str, Operation] = {}
        self._ops: list[Operation] = []
        self._names_in_use: dict[str, int] = {}
        self._collections: dict[str, list] = {}
        self._finalized = False
        self._stacks = _ThreadLocalStacks()
        self.seed = None
        self._last_op_seed = 0
        self._building_function = False
        self._gradient_override_map: dict[str, str] = {}

    # ---------------------------------------------------------------- default graph
    @contextlib.contextmanager
    def as_default(self):
        """Makes this graph the default graph of the calling thread inside the `with` block."""
        _default_graph_stack.append(self)
        try:
            yield self
        finally:
            _default_graph_stack.pop()

    # ---------------------------------------------------------------- properties
    @property
    def version(self) -> int:
        """Number of ops in the graph; grows as ops are added."""
        return len(self._ops)

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self) -> None:
        """Makes the graph read-only: adding an op afterwards raises RuntimeError."""
        self._finalized = True

    def _unsafe_unfinalize(self) -> None:
        self._finalized = False

    def get_operations(self) -> list[Operation]:
        with self._lock:
            return list(self._ops)

    # ---------------------------------------------------------------- names
    def get_name_scope(self) -> str:
        return self._stacks.name_scope

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """Returns `name` under the current name scope, made unique with "_1", "_2" suffixes."""
        scope = self._stacks.name_scope
        if scope:
            name = f"{scope}/{name}"
        key = name.lower()
        with self._lock:
            i = self._names_in_use.get(key, 0)
            if mark_as_used:
                self._names_in_use[key] = i + 1
            if i > 0:
                base = key
                while f"{base}_{i}" in self._names_in_use:
                    i += 1
                if mark_as_used:
                    self._names_in_use[f"{base}_{i}"] = 1
                name = f"{name}_{i}"
        return name

    @contextlib.contextmanager
    def name_scope(self, name):
        """Pushes a name scope; "" or None resets to the top, and a name ending in "/" is reused as is.

        Yields:
            The scope string, ending in "/" (or "" at the top).
        """
        old = self._stacks.name_scope
        if not name:
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
            if not _VALID_SCOPE_NAME.match(new):
                raise ValueError(f"'{name}' is not a valid scope name")
        else:
            if not _VALID_SCOPE_NAME.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
            new = self.unique_name(name)
        self._stacks.name_scope = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._stacks.name_scope = old

    # ---------------------------------------------------------------- control deps / devices
    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        """Ops created inside run only after every op (or tensor's op) in `control_inputs`.

        `None` clears the outer control dependencies for the block.
        """
        if control_inputs is None:
            self._stacks.control_deps.append(None)
        else:
            deps = []
            for c in control_inputs:
                if hasattr(c, "_as_graph_element"):
                    c = c._as_graph_element()
                if isinstance(c, Tensor):
                    c = c.op
                if not isinstance(c, Operation):
                    raise TypeError(f"Control input must be Operation or Tensor: {c!r}")
                deps.append(c)
            self._stacks.control_deps.append(deps)
        try:
            yield
        finally:
            self._stacks.control_deps.pop()

    def _current_control_deps(self) -> list[Operation]:
        out = []
        for deps in reversed(self._stacks.control_deps):
            if deps is None:
                break
            out.extend(deps)
        return out

    @contextlib.contextmanager
    def device(self, device_name_or_function):
        """Requests a device (TF device string, DeviceSpec or a function op -> string) for new ops."""
        d = device_name_or_function
        if isinstance(d, _device_spec.DeviceSpec):
            d = d.to_string()
        self._stacks.devices.append(d)
        try:
            yield
        finally:
            self._stacks.devices.pop()

    def _apply_device_functions(self, op: Operation) -> str:
        dev = ""
        for d in self._stacks.devices:
            if d is None:
                dev = ""
            elif callable(d):
                r = d(op)
                r = r.to_string() if isinstance(r, _device_spec.DeviceSpec) else (r or "")
                dev = _device_spec.merge_device(dev, r)
            else:
                dev = _device_spec.merge_device(dev, d)
        return dev

    @contextlib.contextmanager
    def colocate_with(self, op, ignore_existing: bool = False):
        """Ops created inside are placed on the same device as `op` (a Tensor, Operation or Variable)."""
        if op is None:
            saved, self._stacks.colocation = self._stacks.colocation, []
            try:
                yield
            finally:
                self._stacks.colocation = saved
            return
        if hasattr(op, "_as_graph_element"):
            op = op._as_graph_element()
        if isinstance(op, Tensor):
            op = op.op
        saved = self._stacks.colocation
        self._stacks.colocation = ([] if ignore_existing else list(saved)) + [op]
        saved_devices, self._stacks.devices = self._stacks.devices, []
        try:
            yield
        finally:
            self._stacks.colocation = saved
            self._stacks.devices = saved_devices

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict[str, str]):
        """Uses the gradient registered for another op type for ops created inside."""
        saved = dict(self._gradient_override_map)
        self._gradient_override_map.update(op_type_map)
        try:
            yield
        finally:
            self._gradient_override_map = saved

    # ---------------------------------------------------------------- op creation
    def create_op(self, op_type: str, inputs, dtypes=None, input_types=None, name=None,
                  attrs=None, op_def=None, compute_shapes: bool = True) -> Operation:
        """Adds an op to the graph. Prefer the op wrappers (kf.add, kf.matmul...) to calling this.

        Args:
            op_type: registered op type.
            inputs: list of input Tensors.
            dtypes: output dtypes (computed from the OpDef when None).
            name: op name (made unique); defaults to the op type.
            attrs: dict of Python attribute values.

        Raises:
            RuntimeError: if the graph is finalized.
            ValueError: if the shape function rejects the inputs (the message names the op).
        """
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        op_def = op_def or _registry.get(op_type)
        attrs = dict(attrs or {})
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"Input to op '{op_type}' must be a Tensor, got {t!r}")
            if t.graph is not self:
                raise ValueError(f"Tensor {t.name} must be from the same graph as the new "
                                 f"'{op_type}' op.")
        if name is None:
            name = self.unique_name(op_type)
        elif name.endswith("/"):  # a scope name used as an op name is taken as is
            name = name[:-1]
        else:
            if not _VALID_OP_NAME.match(name.split("/")[-1] or "x"):
                raise ValueError(f"'{name}' is not a valid node name")
            name = self.unique_name(name)
        if dtypes is None:
            dtypes = output_dtypes(op_def, attrs)
        ctrl = [c for c in self._current_control_deps()
                if not any(c is t.op for t in inputs)]
        cf_context = self._stacks.cf_context
        if cf_context is not None:
            # Inputs from outside a cond branch go through a Switch, into a loop through an Enter;
            # ops without inputs get the context's pivot as a control input (control_flow_v1).
            inputs, ctrl = cf_context.prepare_op(op_type, list(inputs), ctrl)
        colocation = self._stacks.colocation
        if colocation:
            groups = []
            for c in colocation:
                groups.extend(c.colocation_groups())
            attrs["_class"] = list(dict.fromkeys(groups))
        override = self._gradient_override_map.get(op_type)
        if override:   # (in the NodeDef too, as TF: an exported and re-imported graph keeps it)
            attrs["_gradient_op_type"] = override
        op = Operation(self, name, op_def, inputs, dtypes, attrs, ctrl, "")
        op._gradient_op_type = override
        if colocation:
            op._device = colocation[-1].device
        else:
            dev = self._apply_device_functions(op)
            op._device = _device_spec.canonical_name(dev) if dev else ""
        if compute_shapes and op_def.shape_fn is not None:
            _run_shape_fn(op)
        with self._lock:
            if name in self._ops_by_name:
                raise ValueError(f"Duplicate node name in graph: '{name}'")
            op._id = len(self._ops)
            self._ops.append(op)
            self._ops_by_name[name] = op
        for t in inputs:
            t._consumers.append(op)
        for c in op._control_inputs:
            c._control_outputs.append(op)
        if cf_context is not None:
            op._control_flow_context = cf_context
            cf_context.add_op(op)
        return op

    def _get_control_flow_context(self):
        """The cond/while context ops are being built in (on this thread), or None."""
        return self._stacks.cf_context

    def _set_control_flow_context(self, ctx) -> None:
        self._stacks.cf_context = ctx

    # ---------------------------------------------------------------- lookup
    def get_operation_by_name(self, name: str) -> Operation:
        """Returns the op called `name`. Raises KeyError (TF's message) if there is none."""
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings (or similar), not {type(name).__name__}.")
        op = self._ops_by_name.get(name)
        if op is None:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.")
        return op

    def get_tensor_by_name(self, name: str) -> Tensor:
        """Returns the tensor called "op:index". Raises KeyError/ValueError as TF does."""
        if not isinstance(name, str) or ":" not in name:
            raise ValueError(f"The name '{name}' looks like an (invalid) Operation name, not a Tensor. "
                             "Tensor names must be of the form \"<op_name>:<output_index>\".")
        op_name, _, idx = name.rpartition(":")
        op = self._ops_by_name.get(op_name)
        if op is None:
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. "
                           f"The operation, '{op_name}', does not exist in this graph.")
        i = int(idx)
        if i >= len(op._outputs):
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. The operation, "
                           f"'{op_name}', exists but only has {len(op._outputs)} outputs.")
        return op._outputs[i]

    def as_graph_element(self, obj, allow_tensor: bool = True, allow_operation: bool = True):
        """Returns the Tensor or Operation that `obj` (an object or a name) names in this graph."""
        if hasattr(obj, "_as_graph_element"):
            obj = obj._as_graph_element()
        if isinstance(obj, str):
            if ":" in obj:
                if not allow_tensor:
                    raise ValueError(f"Name '{obj}' names a Tensor, an Operation was expected.")
                return self.get_tensor_by_name(obj)
            if not allow_operation:
                raise ValueError(f"Name '{obj}' names an Operation, a Tensor was expected.")
            return self.get_operation_by_name(obj)
        if isinstance(obj, Tensor) and allow_tensor:
            if obj.graph is not self:
                raise ValueError(f"Tensor {obj} is not an element of this graph.")
            return obj
        if isinstance(obj, Operation) and allow_operation:
            if obj.graph is not self:
                raise ValueError(f"Operation {obj} is not an element of this graph.")
            return obj
        raise TypeError(f"Can not convert a {type(obj).__name__} into a "
                        f"{'Tensor or Operation' if allow_operation else 'Tensor'}.")

    # ---------------------------------------------------------------- collections
    def add_to_collection(self, name: str, value) -> None:
        with self._lock:
            self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value) -> None:
        for n in ([names] if isinstance(names, str) else set(names)):
            self.add_to_collection(n, value)

    def get_collection_ref(self, name: str) -> list:
        with self._lock:
            return self._collections.setdefault(name, [])

    def get_collection(self, name: str, scope: str | None = None) -> list:
        with self._lock:
            items = list(self._collections.get(name, []))
        if scope is None:
            return items
        rx = re.compile(scope)
        return [x for x in items if hasattr(x, "name") and rx.match(x.name)]

    def get_all_collection_keys(self) -> list[str]:
        return [k for k, v in self._collections.items() if v]

    def clear_collection(self, name: str) -> None:
        with self._lock:
            self._collections.pop(name, None)

    # ---------------------------------------------------------------- serialization
    def as_graph_def(self, from_version: int | None = None, add_shapes: bool = False):
        """Returns the GraphDef protobuf of this graph (ops added since `from_version` only, if given)."""
        from kernflow.core.protobuf import graph_pb2
        gd = graph_pb2.GraphDef()
        gd.versions.producer = 1
        with self._lock:
            ops = self._ops[from_version or 0:]
            gd.version = len(self._ops)
        for op in ops:
            nd = gd.node.add()
            nd.CopyFrom(op.node_def)
            if add_shapes:
                nd.attr["_output_shapes"].CopyFrom(
                    _attr_value.to_proto([t.shape for t in op._outputs], "list(shape)"))
        return gd

    @property
    def graph_def_versions(self):
        from kernflow.core.protobuf import graph_pb2
        return graph_pb2.VersionDef(producer=1)

    def _next_op_seed(self) -> int:
        with self._lock:
            self._last_op_seed += 1
            return self._last_op_seed


def output_dtypes(op_def, attrs: dict) -> list:
    """Returns the output dtypes an OpDef gives for the attribute values `attrs`."""
    return [arg.dtype_at(attrs, i) for arg, i in op_def.expand_outputs(attrs)]


def _run_shape_fn(op: Operation) -> None:
    try:
        shapes = op._op_def.shape_fn(op)
    except ValueError as e:
        in_shapes = ", ".join(_shape_str(t.shape) for t in op._inputs)
        raise ValueError(f"{e} for '{op.name}' (op: '{op.type}') with input shapes: {in_shapes}.") from None
    if shapes is None:
        return
    if len(shapes) != len(op._outputs):
        raise ValueError(f"Shape function of op '{op.type}' returned {len(shapes)} shapes for "
                         f"{len(op._outputs)} outputs")
    for t, s in zip(op._outputs, shapes):
        t._shape = _ts.as_shape(s)


def _shape_str(shape) -> str:
    if shape.dim_values is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape.dim_values) + "]"


# ------------------------------------------------------------------------ default graph
class _DefaultGraphStack(threading.local):
    def __init__(self):
        self.stack: list[Graph] = []

    def append(self, g):
        self.stack.append(g)

    def pop(self):
        self.stack.pop()


_default_graph_stack = _DefaultGraphStack()
_global_default_graph: Graph | None = None
_global_lock = threading.Lock()


def get_default_graph() -> Graph:
    """Returns the default graph of the calling thread (a process-wide graph unless overridden)."""
    if _default_graph_stack.stack:
        return _default_graph_stack.stack[-1]
    global _global_default_graph
    if _global_default_graph is None:
        with _global_lock:
            if _global_default_graph is None:
                _global_default_graph = Graph()
    return _global_default_graph


def reset_default_graph() -> None:
    """Clears the default graph. Raises AssertionError inside a `with g.as_default()` block."""
    global _global_default_graph
    if _default_graph_stack.stack:
        raise AssertionError("Do not use reset_default_graph() inside a graph context.")
    _global_default_graph = Graph()


def _get_graph_from_inputs(values) -> Graph:
    """The graph of the first tensor or op in `values` (the default graph when there is none). A
    tensor of a graph that encloses the default graph (a dataset function capturing it, see
    `kernflow.core.data.function`) resolves to the default graph, which captures it."""
    for v in values:
        if hasattr(v, "_as_graph_element"):
            v = v._as_graph_element()
        if isinstance(v, (Tensor, Operation)):
            g = v.graph
            default = get_default_graph()
            inner = getattr(default, "outer_graph", None)
            while inner is not None:
                if inner is g:
                    return default
                inner = getattr(inner, "outer_graph", None)
            return g
    return get_default_graph()


# ------------------------------------------------------------------------ tensor conversion
_conversion_functions: list[tuple[type, Callable]] = []


def register_tensor_conversion_function(base_type, conversion_func) -> None:
    """Registers fn(value, dtype=None, name=None, as_ref=False) -> Tensor for values of `base_type`."""
    _conversion_functions.append((base_type, conversion_func))


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None, as_ref=False) -> Tensor:
    """Converts Tensors, Variables, numpy arrays and Python values to a Tensor.

    Raises:
        ValueError: if a Tensor's dtype differs from `dtype`.
        TypeError: if the value cannot be converted.
    """
    if isinstance(value, Tensor):
        if dtype is not None and not _dtypes.as_dtype(dtype).is_compatible_with(value.dtype):
            raise ValueError(f"Tensor conversion requested dtype {_dtypes.as_dtype(dtype).name} for "
                             f"Tensor with dtype {value.dtype.name}: {value!r}")
        return value
    for base, fn in _conversion_functions:
        if isinstance(value, base):
            t = fn(value, dtype=dtype, name=name, as_ref=as_ref)
            if dtype is not None and not _dtypes.as_dtype(dtype).is_compatible_with(t.dtype):
                raise ValueError(f"Tensor conversion requested dtype {_dtypes.as_dtype(dtype).name} "
                                 f"for {type(value).__name__} with dtype {t.dtype.name}")
            return t
    if isinstance(value, Operation):
        raise TypeError(f"Can't convert Operation '{value.name}' to Tensor (target dtype={dtype}, "
                        f"name={name})")
    from kernflow.core.ops import array_ops  # constants live with the array ops
    if dtype is None and preferred_dtype is not None:
        try:
            return array_ops.constant(value, dtype=preferred_dtype, name=name or "Const")
        except (TypeError, ValueError):
            pass
    return array_ops.constant(value, dtype=dtype, name=name or "Const")


# ------------------------------------------------------------------------ module-level scopes
# On the default graph; in their own module (re-exported here, where callers find them).
from kernflow.core.framework.graph_scopes import (add_to_collection, add_to_collections,  # noqa: E402,F401
                                                  colocate_with, control_dependencies, device,
                                                  get_collection, get_collection_ref, init_scope,
                                                  name_scope)

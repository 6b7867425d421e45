"""Framework-level top-level names of `tf.compat.v1` that TF1 programs use: version constants,
templates, custom gradients, hessians, numeric checks, TF2 behaviour switches (kernflow is TF1
graph mode only), `switch_case`, type specs and small aliases.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging as _logging
import threading
import types

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors as _errors
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util as _tensor_util
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.framework.graph_keys import GraphKeys
from kernflow.core.framework.graph_scopes import init_scope
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.framework.random_seed import get_seed
from kernflow.core.framework.sparse_tensor import SparseTensor
from kernflow.core.protobuf.attr_value_pb2 import AttrValue, NameAttrList

__all__ = ["VERSION", "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER", "GRAPH_DEF_VERSION_MIN_PRODUCER",
           "version", "get_seed", "init_scope", "make_template", "custom_gradient", "no_gradient", "hessians",
           "moving_average_variables", "initialize_local_variables", "add_check_numerics_ops",
           "verify_tensor_all_finite", "op_scope", "container", "get_logger", "executing_eagerly",
           "executing_eagerly_outside_functions", "disable_eager_execution", "disable_v2_behavior",
           "disable_resource_variables", "disable_tensor_equality", "disable_v2_tensorshape",
           "disable_control_flow_v2", "control_flow_v2_enabled", "resource_variables_enabled", "switch_case",
           "convert_to_tensor_or_indexed_slices", "is_symbolic_tensor", "get_static_value", "TypeSpec",
           "TensorSpec", "SparseTensorSpec", "type_spec_from_value", "UnconnectedGradients",
           "QUANTIZED_DTYPES", "OpError", "AttrValue", "NameAttrList"]

# The TF API version kernflow implements; GraphDefs it writes carry producer 1 (ops.Graph.as_graph_def).
VERSION = "1.15.5"
GRAPH_DEF_VERSION = 1
GRAPH_DEF_VERSION_MIN_CONSUMER = 0
GRAPH_DEF_VERSION_MIN_PRODUCER = 0
version = types.SimpleNamespace(VERSION=VERSION, GRAPH_DEF_VERSION=GRAPH_DEF_VERSION,
                                GRAPH_DEF_VERSION_MIN_CONSUMER=GRAPH_DEF_VERSION_MIN_CONSUMER,
                                GRAPH_DEF_VERSION_MIN_PRODUCER=GRAPH_DEF_VERSION_MIN_PRODUCER)
QUANTIZED_DTYPES = _dtypes.QUANTIZED_DTYPES
OpError = _errors.OpError
no_gradient = NotDifferentiable


class UnconnectedGradients(str, enum.Enum):
    """What `kf.gradients` returns for an x no y depends on: None or zeros (equal to "none"/"zero")."""
    NONE = "none"
    ZERO = "zero"


# ---------------------------------------------------------------------------- TF2 switches
def executing_eagerly() -> bool:
    """False: kernflow only builds graphs."""
    return False


def executing_eagerly_outside_functions() -> bool:
    """False: kernflow only builds graphs."""
    return False


def control_flow_v2_enabled() -> bool:
    """False: control flow is TF1's (Switch/Merge/Enter/Exit)."""
    return False


def resource_variables_enabled() -> bool:
    """False: variables are TF1 reference variables."""
    return False


def _already_tf1(what):
    def fn():
        """Does nothing: kernflow is TF1 graph mode only, where this is already the case."""
    fn.__name__ = what
    fn.__qualname__ = what
    return fn


disable_eager_execution = _already_tf1("disable_eager_execution")
disable_v2_behavior = _already_tf1("disable_v2_behavior")
disable_resource_variables = _already_tf1("disable_resource_variables")
disable_tensor_equality = _already_tf1("disable_tensor_equality")
disable_v2_tensorshape = _already_tf1("disable_v2_tensorshape")
disable_control_flow_v2 = _already_tf1("disable_control_flow_v2")


def get_logger() -> _logging.Logger:
    """The logger kernflow (and `kf.logging`) writes to."""
    from kernflow.core import tf_logging
    return tf_logging._logger


# ---------------------------------------------------------------------------- scopes
def op_scope(values, name, default_name=None):
    """Deprecated TF1 alias: `name_scope(name, default_name, values)`."""
    return _ops.name_scope(name, default_name, values)


@contextlib.contextmanager
def container(container_name):
    """Stateful ops created inside (variables, queues, tables...) live in resource container
    `container_name` (their `container` attr, when not set explicitly). An inner block wins.

    The attr is set when the block exits, so run those ops after it.
    """
    g = _ops.get_default_graph()
    start = len(g.get_operations())
    try:
        yield container_name
    finally:
        for op in g.get_operations()[start:]:
            if op.op_def.stateful and "container" in op.op_def.attrs and not op._attrs.get("container"):
                op._set_attr("container", container_name)


# ---------------------------------------------------------------------------- make_template
class Template:
    """Wraps `func` so that every call shares the variables the first call created
    (`kf.get_variable` inside; see `make_template`)."""

    def __init__(self, name, func, create_scope_now=False, unique_name=None, custom_getter=None):
        from kernflow.core.ops import variable_scope as vs
        self._func, self._name = func, name
        self._unique_name, self._custom_getter = unique_name, custom_getter
        self._variable_scope = None
        self._variables_created = False
        if create_scope_now:
            with vs._pure_variable_scope(unique_name or vs._get_unique_variable_scope(name),
                                         custom_getter=custom_getter) as scope:
                self._variable_scope = scope

    @property
    def name(self) -> str:
        return self._name

    @property
    def func(self):
        return self._func

    @property
    def variable_scope(self):
        return self._variable_scope

    @property
    def variable_scope_name(self) -> str | None:
        """The variable scope's name with a trailing "/" (None before the first call)."""
        if self._variable_scope is None:
            return None
        n = self._variable_scope.name
        return n + "/" if n and not n.endswith("/") else n

    def _collection(self, key):
        return _ops.get_collection(key, self.variable_scope_name) if self._variable_scope else []

    @property
    def trainable_variables(self):
        return self._collection(GraphKeys.TRAINABLE_VARIABLES)

    @property
    def global_variables(self):
        return self._collection(GraphKeys.GLOBAL_VARIABLES)

    @property
    def local_variables(self):
        return self._collection(GraphKeys.LOCAL_VARIABLES)

    @property
    def non_trainable_variables(self):
        trainable = set(map(id, self.trainable_variables))
        return [v for v in self.global_variables if id(v) not in trainable]

    variables = global_variables

    def _call_func(self, args, kwargs):
        trainable_at_start = len(_ops.get_collection(GraphKeys.TRAINABLE_VARIABLES))
        result = self._func(*args, **kwargs)
        if self._variables_created:
            new = _ops.get_collection(GraphKeys.TRAINABLE_VARIABLES)[trainable_at_start:]
            if new:
                raise ValueError(f"Trainable variable created when calling a template after the first "
                                 f"time, perhaps you used tf.Variable when you meant tf.get_variable: "
                                 f"{new}")
        self._variables_created = True
        return result

    def __call__(self, *args, **kwargs):
        from kernflow.core.ops import variable_scope as vs
        if self._variable_scope is not None:
            with vs.variable_scope(self._variable_scope, reuse=True if self._variables_created else None):
                return self._call_func(args, kwargs)
        with vs.variable_scope(self._unique_name, self._name, custom_getter=self._custom_getter) as scope:
            self._variable_scope = scope
            return self._call_func(args, kwargs)


def make_template(name_, func_, create_scope_now_=False, unique_name_=None, custom_getter_=None, **kwargs):
    """Makes `func_` share variables between calls: the first call creates them (with
    `kf.get_variable`) in a new unique variable scope named after `name_`, later calls reuse them.

    Args:
        name_: the scope name (made unique: "name", "name_1"...).
        func_: the function to wrap; `kwargs` are bound to it.
        create_scope_now_: open the variable scope now rather than at the first call.
        unique_name_: use exactly this scope name.
        custom_getter_: a custom getter for the scope.

    Returns:
        A callable `Template`.

    Raises:
        ValueError: (on a later call) the function created a new trainable variable.
    """
    import functools
    if kwargs:
        func_ = functools.partial(func_, **kwargs)
    return Template(name_, func_, create_scope_now=create_scope_now_, unique_name=unique_name_,
                    custom_getter=custom_getter_)


# ---------------------------------------------------------------------------- custom_gradient
_grad_ids = itertools.count()
_grad_lock = threading.Lock()


def custom_gradient(f=None):
    """Decorator: `f(*x)` returns ``(y, grad_fn)``; `kf.gradients` then uses ``grad_fn(*dy)``
    (one gradient per x, or a single one for a single x) instead of differentiating `f`.

    ``y`` may be a tensor or a (nested) list of tensors. The outputs are routed through an
    IdentityN op whose gradient is overridden (gradient_override_map) with one calling grad_fn.
    If f reads variables, grad_fn must accept ``variables=`` and return ``(input_grads,
    variable_grads)``.
    """
    if f is None:
        return custom_gradient
    import functools

    @functools.wraps(f)
    def decorated(*args, **kwargs):
        return _graph_mode_custom_gradient(f, args, kwargs)
    return decorated


def _graph_mode_custom_gradient(f, args, kwargs):
    from kernflow.core.framework import nest
    from kernflow.core.ops.array_ops_shape import identity_n
    args = [_ops.convert_to_tensor(x) for x in args]
    g = _ops.get_default_graph()
    vars_before = set(map(id, _ops.get_collection(GraphKeys.TRAINABLE_VARIABLES)))
    result, grad_fn = f(*args, **kwargs)
    flat = [_ops.convert_to_tensor(y) for y in nest.flatten(result)]
    import inspect
    takes_vars = "variables" in inspect.signature(grad_fn).parameters
    variables = []
    if takes_vars:
        variables = [v for v in _ops.get_collection(GraphKeys.TRAINABLE_VARIABLES)
                     if id(v) not in vars_before or _reads(flat, v)]
    var_tensors = [v.value() if hasattr(v, "value") else v for v in variables]
    n_out, n_in = len(flat), len(args)
    with _grad_lock:
        grad_name = f"CustomGradient-{next(_grad_ids)}"

    @RegisterGradient(grad_name)
    def _grad(op, *dys):
        dys = list(dys[:n_out])
        if takes_vars:
            in_grads, var_grads = grad_fn(*dys, variables=variables)
            var_grads = list(var_grads)
        else:
            in_grads, var_grads = grad_fn(*dys), []
        in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
        if len(in_grads) != n_in:
            raise ValueError(f"custom_gradient function {f.__name__} returned {len(in_grads)} gradients "
                             f"but its function takes {n_in} inputs")
        if len(var_grads) != len(variables):
            raise ValueError(f"custom_gradient function {f.__name__} returned {len(var_grads)} variable "
                             f"gradients for {len(variables)} variables")
        return [None] * n_out + in_grads + var_grads

    with g.gradient_override_map({"IdentityN": grad_name}):
        outs = identity_n(flat + args + var_tensors)
    return nest.pack_sequence_as(result, outs[:n_out])


def _reads(ys, var) -> bool:
    """Whether the variable's op is among the ancestors of `ys` (the variables f read)."""
    target = var.op if hasattr(var, "op") else None
    seen, stack = set(), [y.op for y in ys]
    while stack:
        op = stack.pop()
        if op is target:
            return True
        if id(op) in seen:
            continue
        seen.add(id(op))
        stack.extend(t.op for t in op.inputs)
    return False


# ---------------------------------------------------------------------------- gradients
def hessians(ys, xs, name="hessians", colocate_gradients_with_ops=False, gate_gradients=False,
             aggregation_method=None):
    """The Hessian of sum(ys) with respect to each x: a tensor of shape x.shape + x.shape.

    Each x must have a fully defined shape (the rows are built one per element).

    Raises:
        ValueError: an x of unknown shape.
    """
    from kernflow.core.ops import array_ops
    from kernflow.core.ops.gradients_impl import gradients
    xs = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    kw = dict(colocate_gradients_with_ops=colocate_gradients_with_ops, gate_gradients=gate_gradients,
              aggregation_method=aggregation_method)
    out = []
    with _ops.name_scope(name, "hessians"):
        for x, grad in zip(xs, gradients(ys, xs, **kw)):
            if not x.shape.is_fully_defined():
                raise ValueError(f"hessians needs a fully defined shape for {x.name}, got {x.shape}")
            n = x.shape.num_elements()
            flat = array_ops.reshape(grad, [-1])
            rows = [array_ops.reshape(gradients(flat[i], x, unconnected_gradients="zero", **kw)[0], [-1])
                    for i in range(n)]
            hess = array_ops.stack(rows) if rows else array_ops.zeros([0, 0], x.dtype)
            out.append(array_ops.reshape(hess, x.shape.concatenate(x.shape).as_list()))
    return out


def moving_average_variables(scope=None):
    """The variables in the MOVING_AVERAGE_VARIABLES collection (filtered by `scope`)."""
    return _ops.get_collection(GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def initialize_local_variables():
    """Deprecated alias of `kf.local_variables_initializer()`."""
    from kernflow.core.ops.variables import local_variables_initializer
    return local_variables_initializer()


# ---------------------------------------------------------------------------- numeric checks
def verify_tensor_all_finite(t=None, msg=None, name=None, x=None, message=None):
    """`t`, after checking (CheckNumerics) that it has no NaN or Inf; fails with `msg` otherwise."""
    from kernflow.core.ops.check_ops import check_numerics
    from kernflow.core.ops.control_flow_ops import with_dependencies
    t = x if t is None else t
    msg = message if msg is None else msg
    with _ops.name_scope(name, "VerifyFinite", [t]) as scope:
        t = _ops.convert_to_tensor(t, name="x")
        with _ops.colocate_with(t):
            verify = check_numerics(t, message=msg)
            return with_dependencies([verify], t, name=scope)


def add_check_numerics_ops():
    """A grouped op checking every float (half, float, double) output of the graph for NaN/Inf
    (one CheckNumerics each, run in sequence).

    Raises:
        ValueError: the graph has cond or while_loop ops (the checks cannot follow them).
    """
    from kernflow.core.ops.check_ops import check_numerics
    from kernflow.core.ops.control_flow_ops import group
    floats = (_dtypes.float16, _dtypes.float32, _dtypes.float64)
    checks = []
    for op in _ops.get_default_graph().get_operations():
        if getattr(op, "_control_flow_context", None) is not None:
            raise ValueError("kf.add_check_numerics_ops() is not compatible with control flow operations "
                             "such as kf.cond() or kf.while_loop().")
        for out in op.outputs:
            if out.dtype.base_dtype in floats:
                with _ops.control_dependencies(checks[-1:]):
                    checks.append(check_numerics(out, f"{op.name}:{out.value_index}").op)
    return group(*checks)


# ---------------------------------------------------------------------------- switch_case
def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """Runs ``branch_fns[branch_index]()`` (`default`, or the last branch if none, when the index is
    out of range), built on `kf.case`.

    Args:
        branch_index: an int32 scalar.
        branch_fns: a list of callables, a dict {0..n-1: callable} or a list of (int, callable).

    Raises:
        TypeError: branch_fns not callables; ValueError: no branches or non-contiguous keys.
    """
    from kernflow.core.ops import math_ops
    from kernflow.core.ops.control_flow_ops import case
    if isinstance(branch_fns, dict):
        items = sorted(branch_fns.items())
    elif branch_fns and isinstance(branch_fns[0], (list, tuple)):
        items = sorted(branch_fns)
    else:
        items = list(enumerate(branch_fns))
    if not items:
        raise ValueError("Must provide at least one item in branch_fns")
    if [k for k, _ in items] != list(range(len(items))):
        raise ValueError(f"branch indices (keys) must form contiguous range of [0 to {len(items)}) but "
                         f"found {{{','.join(str(k) for k, _ in items)}}}")
    if not all(callable(fn) for _, fn in items) or (default is not None and not callable(default)):
        raise TypeError("branch_fns and default must be callables")
    with _ops.name_scope(name, "switch_case", [branch_index]):
        idx = _ops.convert_to_tensor(branch_index, name="branch_index")
        if idx.dtype != _dtypes.int32:
            raise TypeError(f"branch_index must be an int32 Tensor, got {idx.dtype!r}")
        if default is None:
            items, default = items[:-1], items[-1][1]
        pairs = [(math_ops.equal(idx, k), fn) for k, fn in items]
        return case(pairs, default=default, exclusive=True) if pairs else default()


# ---------------------------------------------------------------------------- tensors and specs
def convert_to_tensor_or_indexed_slices(value, dtype=None, name=None):
    """`value` if it is an IndexedSlices (or SparseTensor) of `dtype`, else `kf.convert_to_tensor`.

    Raises:
        ValueError: an IndexedSlices of another dtype.
    """
    if isinstance(value, (IndexedSlices, SparseTensor)):
        if dtype is not None and not _dtypes.as_dtype(dtype).is_compatible_with(value.dtype):
            raise ValueError(f"Tensor conversion requested dtype {_dtypes.as_dtype(dtype).name} for "
                             f"{type(value).__name__} with dtype {value.dtype.name}: {value}")
        return value
    return _ops.convert_to_tensor(value, dtype=dtype, name=name)


def is_symbolic_tensor(tensor) -> bool:
    """True for graph tensors and variables (everything in kernflow's graph mode), not numpy values."""
    from kernflow.core.ops.variables import Variable
    return isinstance(tensor, (_ops.Tensor, Variable))


def get_static_value(tensor, partial=False):
    """The value of `tensor` if it can be computed while building the graph, else None
    (numpy arrays and Python values are returned as arrays)."""
    if isinstance(tensor, _ops.Tensor):
        return _tensor_util.constant_value(tensor)
    if is_symbolic_tensor(tensor):
        return None
    return np.asarray(tensor)


class TypeSpec:
    """Describes the type of a value (a tensor's shape and dtype) without the value."""

    def is_compatible_with(self, spec_or_value) -> bool:
        raise NotImplementedError

    def _fields(self):
        raise NotImplementedError

    def __eq__(self, other):
        return type(self) is type(other) and self._fields() == other._fields()

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((type(self).__name__,) + tuple(str(f) for f in self._fields()))


class TensorSpec(TypeSpec):
    """The shape, dtype and optional name of a dense tensor."""

    def __init__(self, shape, dtype=_dtypes.float32, name=None):
        self._shape = _ts.as_shape(shape)
        self._dtype = _dtypes.as_dtype(dtype)
        self._name = name

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    name = property(lambda self: self._name)

    @classmethod
    def from_tensor(cls, tensor, name=None):
        return cls(tensor.shape, tensor.dtype, name if name is not None else tensor.op.name)

    @classmethod
    def from_spec(cls, spec, name=None):
        return cls(spec.shape, spec.dtype, name if name is not None else spec.name)

    def is_compatible_with(self, spec_or_tensor) -> bool:
        """Same dtype and compatible shapes (names are ignored); takes a spec, tensor or value."""
        other = spec_or_tensor
        if not isinstance(other, TypeSpec) and not hasattr(other, "dtype"):
            other = np.asarray(other)
        dtype = _dtypes.as_dtype(other.dtype)
        return dtype.base_dtype == self._dtype.base_dtype and \
            self._shape.is_compatible_with(_ts.as_shape(other.shape))

    def _fields(self):
        return (self._shape.as_list() if self._shape.rank is not None else None, self._dtype, self._name)

    def __repr__(self):
        return (f"TensorSpec(shape={_shape_tuple(self._shape)}, dtype=kf.{self._dtype.name}, "
                f"name={self._name!r})")


class SparseTensorSpec(TypeSpec):
    """The dense shape and dtype of a SparseTensor."""

    def __init__(self, shape=None, dtype=_dtypes.float32):
        self._shape = _ts.as_shape(shape)
        self._dtype = _dtypes.as_dtype(dtype)

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)

    @classmethod
    def from_value(cls, value):
        return cls(_sparse_shape(value), value.dtype)

    def is_compatible_with(self, spec_or_value) -> bool:
        other = spec_or_value
        shape = other.shape if isinstance(other, SparseTensorSpec) else _sparse_shape(other)
        return _dtypes.as_dtype(other.dtype) == self._dtype and self._shape.is_compatible_with(shape)

    def _fields(self):
        return (self._shape.as_list() if self._shape.rank is not None else None, self._dtype)

    def __repr__(self):
        return f"SparseTensorSpec({self._shape}, kf.{self._dtype.name})"


def _shape_tuple(shape) -> str:
    if shape.rank is None:
        return "<unknown>"
    return str(tuple(shape.as_list()))


def _sparse_shape(value):
    if isinstance(value, SparseTensor):
        return value.shape
    return _ts.TensorShape(np.asarray(value.dense_shape).tolist())


def type_spec_from_value(value) -> TypeSpec:
    """The TypeSpec of a Tensor, SparseTensor (or its value), numpy array or Python value.

    Raises:
        TypeError: a value of no known type.
    """
    if isinstance(value, SparseTensor) or type(value).__name__ == "SparseTensorValue":
        return SparseTensorSpec.from_value(value)
    if isinstance(value, _ops.Tensor):
        return TensorSpec(value.shape, value.dtype)
    try:
        arr = np.asarray(value)
        return TensorSpec(arr.shape, _dtypes.as_dtype(arr.dtype))
    except (TypeError, ValueError):
        raise TypeError(f"Could not build a TypeSpec for {value!r} with type "
                        f"{type(value).__name__}") from None

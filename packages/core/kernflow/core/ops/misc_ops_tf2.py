"""The TF2-era names that tf.compat.v1 exports and that work in graph mode: GradientTape, Module,
function, conv, approx_top_k, and the remaining TypeSpecs.

- `GradientTape` records the ops created while it is active; `gradient` differentiates through those
  ops only (as TF's tape in graph mode): a path through an op created outside the tape contributes
  nothing, a tensor source must be watched, and trainable variables used by recorded ops are watched
  automatically.
- `function` inlines the Python body at each call: in graph mode a tf.function call computes the same
  values as its body (TF builds a function-call op; kernflow has no function library). AutoGraph is
  not applied: Python control flow on a tensor raises TypeError, as in TF1 graph code.
"""

from __future__ import annotations

import functools
import re

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.indexed_slices import IndexedSlices as _IndexedSlices
from kernflow.core.ops.misc_tf import TensorSpec, TypeSpec

__all__ = ["GradientTape", "Module", "function", "conv", "approx_top_k", "IndexedSlicesSpec",
           "TensorArraySpec", "OptionalSpec", "NoneTensorSpec"]


# ----------------------------------------------------------------------------------- GradientTape
class GradientTape:
    """Records the ops built inside `with GradientTape() as tape:` for `tape.gradient`."""

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._persistent = bool(persistent)
        self._watch_variables = bool(watch_accessed_variables)
        self._intervals: list = []      # [start, end) indices into graph.get_operations()
        self._start = None
        self._graph = None
        self._watched: dict = {}        # id -> tensor or variable
        self._used = False

    def __enter__(self):
        self._graph = _ops.get_default_graph()
        self._start = len(self._graph.get_operations())
        return self

    def __exit__(self, *exc):
        self._stop()
        return False

    def _stop(self):
        if self._start is not None:
            self._intervals.append((self._start, len(self._graph.get_operations())))
            self._start = None

    def stop_recording(self):
        """A context in which ops are not recorded."""
        tape = self

        class _Paused:
            def __enter__(self_):
                if tape._start is None:
                    raise ValueError("Tape currently not recording.")
                tape._stop()

            def __exit__(self_, *exc):
                tape._start = len(tape._graph.get_operations())
                return False
        return _Paused()

    def reset(self):
        """Forgets everything recorded so far (recording goes on if active)."""
        self._intervals = []
        self._watched = {}
        if self._start is not None:
            self._start = len(self._graph.get_operations())

    def watch(self, tensor):
        """Watches a tensor or variable (or a nest of them) so gradients to it are computed."""
        from kernflow.core import nest_ns
        for t in nest_ns.flatten(tensor):
            self._watched[id(t)] = t

    def _recorded_ops(self) -> set:
        graph = self._graph or _ops.get_default_graph()
        ops = graph.get_operations()
        spans = list(self._intervals) + ([(self._start, len(ops))] if self._start is not None else [])
        return {op for a, b in spans for op in ops[a:b]}

    def _variables_used(self, recorded) -> list:
        from kernflow.core.ops.variables import Variable, trainable_variables
        graph = self._graph or _ops.get_default_graph()
        with graph.as_default():
            candidates = trainable_variables() if self._watch_variables else []
        candidates = list(candidates) + [v for v in self._watched.values() if isinstance(v, Variable)]
        inputs = {t for op in recorded for t in op.inputs}
        out, seen = [], set()
        for v in candidates:
            if id(v) not in seen and (v.value() in inputs or getattr(v, "_variable", None) in inputs):
                seen.add(id(v))
                out.append(v)
        return out

    def watched_variables(self):
        return tuple(self._variables_used(self._recorded_ops()))

    def _use(self):
        if self._used and not self._persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute one set of "
                               "gradients (or jacobians)")
        self._used = True

    def _differentiate(self, flat_sources, unconnected_gradients):
        """Returns fn(targets, output_gradients) -> flat gradients to `flat_sources` through the
        recorded ops; what was recorded and watched is worked out once, here."""
        from kernflow.core.ops.array_ops import zeros_like
        from kernflow.core.ops.gradients_impl import gradients
        from kernflow.core.ops.variables import Variable
        recorded = self._recorded_ops()
        variables = self._variables_used(recorded)
        var_ids = {id(v) for v in variables}
        passable = {t for v in variables for t in (v.value(), getattr(v, "_variable", None))}
        passable |= {t for t in self._watched.values() if isinstance(t, _ops.Tensor)}
        stop = [t for t in {t for op in recorded for t in op.inputs}
                if t.op not in recorded and t not in passable]
        connected = [(isinstance(s, Variable) and id(s) in var_ids) or
                     (isinstance(s, _ops.Tensor) and id(s) in self._watched) for s in flat_sources]
        live = [s for s, c in zip(flat_sources, connected) if c]
        zero = str(getattr(unconnected_gradients, "value", unconnected_gradients)).lower() == "zero"

        def run(targets, output_gradients=None):
            grads = [None] * len(flat_sources)
            if live:
                it = iter(gradients(targets, live, grad_ys=output_gradients, stop_gradients=stop,
                                    unconnected_gradients=unconnected_gradients))
                grads = [next(it) if c else None for c in connected]
            if zero:
                grads = [zeros_like(s.value() if isinstance(s, Variable) else s) if g is None else g
                         for g, s in zip(grads, flat_sources)]
            return grads
        return run

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients="none"):
        """Gradients of `target` with respect to `sources` through the recorded ops (a nest like
        `sources`; None, or zeros with unconnected_gradients="zero", where nothing connects)."""
        from kernflow.core import nest_ns
        self._use()
        run = self._differentiate(nest_ns.flatten(sources), unconnected_gradients)
        return nest_ns.pack_sequence_as(sources, run(nest_ns.flatten(target), output_gradients))

    def jacobian(self, target, sources, unconnected_gradients="none", parallel_iterations=None,
                 experimental_use_pfor=True):
        """d target[i...] / d source, stacked over target's elements (target needs a static shape)."""
        from kernflow.core import nest_ns
        from kernflow.core.ops import array_ops
        from kernflow.core.ops.variables import Variable
        self._use()
        shape = target.shape
        if not shape.is_fully_defined():
            raise ValueError(f"jacobian needs a target of static shape, got {shape}")
        flat_sources = nest_ns.flatten(sources)
        run = self._differentiate(flat_sources, "zero")
        flat = array_ops.reshape(target, [-1])
        rows = [run([flat[i]]) for i in range(shape.num_elements())]
        out = []
        for j, s in enumerate(flat_sources):
            s_shape = (s.value() if isinstance(s, Variable) else s).shape
            out.append(array_ops.reshape(array_ops.stack([r[j] for r in rows]),
                                         shape.as_list() + s_shape.as_list()) if rows else None)
        return nest_ns.pack_sequence_as(sources, out)


# ---------------------------------------------------------------------------------------- Module
def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)).lower()


class Module:
    """A named container of variables and sub-modules (tf.Module)."""

    def __init__(self, name=None):
        from kernflow.core.framework.graph_scopes import name_scope as name_scope_fn
        if name is None:
            name = _camel_to_snake(type(self).__name__)
        elif not re.match(r"^[A-Za-z_][A-Za-z0-9_.\-]*$", name):
            raise ValueError(f"{name!r} is not a valid module name. Module names must be valid Python "
                             f"identifiers (e.g. a valid class name).")
        self._name = name
        with name_scope_fn(name) as scope:
            self._scope_name = scope

    @property
    def name(self):
        return self._name

    @property
    def name_scope(self):
        """A context that re-enters this module's name scope."""
        from kernflow.core.framework.graph_scopes import name_scope as name_scope_fn
        return name_scope_fn(self._scope_name)

    def _flatten(self, predicate, recursive=True):
        seen, out = set(), []

        def walk(obj, depth):
            if id(obj) in seen:
                return
            if isinstance(obj, Module) and depth > 0:
                seen.add(id(obj))
                if predicate(obj):
                    out.append(obj)
                if not recursive:
                    return
                for v in _attributes(obj):
                    walk(v, depth + 1)
                return
            if predicate(obj) and not isinstance(obj, Module):
                seen.add(id(obj))
                out.append(obj)
                return
            if isinstance(obj, dict):
                for k in sorted(obj, key=str):
                    walk(obj[k], depth)
            elif isinstance(obj, (list, tuple, set, frozenset)):
                for v in obj:
                    walk(v, depth)
        seen.add(id(self))
        for v in _attributes(self):
            walk(v, 1)
        return tuple(out)

    @property
    def variables(self):
        from kernflow.core.ops.variables import Variable
        return self._flatten(lambda o: isinstance(o, Variable))

    @property
    def trainable_variables(self):
        from kernflow.core.ops.variables import Variable
        return self._flatten(lambda o: isinstance(o, Variable) and o.trainable)

    @property
    def non_trainable_variables(self):
        from kernflow.core.ops.variables import Variable
        return self._flatten(lambda o: isinstance(o, Variable) and not o.trainable)

    @property
    def submodules(self):
        return self._flatten(lambda o: isinstance(o, Module))

    @classmethod
    def with_name_scope(cls, method):
        """Decorates a method to run inside the module's name scope."""
        @functools.wraps(method)
        def wrapped(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)
        return wrapped

    def __repr__(self):
        return f"<{type(self).__name__} name={self._name!r}>"


def _attributes(module):
    return [v for k, v in sorted(vars(module).items()) if k not in ("_name", "_scope_name")]


# -------------------------------------------------------------------------------------- function
class Function:
    """A tf.function in graph mode: each call builds the body in the caller's graph."""

    def __init__(self, python_function, input_signature=None, name=None):
        self._python_function = python_function
        self._input_signature = None if input_signature is None else tuple(input_signature)
        self._name = name or getattr(python_function, "__name__", "function")
        functools.update_wrapper(self, python_function)

    python_function = property(lambda self: self._python_function)
    input_signature = property(lambda self: self._input_signature)

    def _check(self, args):
        from kernflow.core.framework.ops import convert_to_tensor
        sig = self._input_signature
        if sig is None:
            return args
        if len(args) != len(sig):
            raise TypeError(f"{self._name}: takes {len(sig)} positional arguments per its input_signature, "
                            f"got {len(args)}")
        out = []
        for i, (a, spec) in enumerate(zip(args, sig)):
            t = convert_to_tensor(a, dtype=spec.dtype) if not isinstance(a, _ops.Tensor) else a
            if not spec.is_compatible_with(t):
                raise ValueError(f"{self._name}: argument {i} ({t.dtype.name}, shape {t.shape}) is not "
                                 f"compatible with the input_signature {spec}")
            out.append(t)
        return tuple(out)

    def __call__(self, *args, **kwargs):
        from kernflow.core.framework.graph_scopes import name_scope as name_scope_fn
        from kernflow.core import nest_ns
        from kernflow.core.framework.ops import convert_to_tensor
        args = self._check(args)
        with name_scope_fn(self._name):
            out = self._python_function(*args, **kwargs)
            # A function's outputs are tensors (Python numbers become constants), as TF's.
            return nest_ns.map_structure(
                lambda v: v if v is None or isinstance(v, (_ops.Tensor, _ops.Operation)) or
                hasattr(v, "dense_shape") else convert_to_tensor(v), out)

    def __get__(self, instance, owner):
        if instance is None:
            return self
        return functools.partial(self.__call__, instance)

    def get_concrete_function(self, *args, **kwargs):
        """A callable bound to these argument types (the input_signature's, or the given args')."""
        specs = self._input_signature or tuple(
            TensorSpec.from_tensor(a) if isinstance(a, _ops.Tensor) else a for a in args)
        return Function(self._python_function, specs if all(isinstance(s, TypeSpec) for s in specs)
                        else None, self._name)


def function(func=None, input_signature=None, autograph=True, experimental_implements=None,
             experimental_autograph_options=None, experimental_relax_shapes=None, reduce_retracing=False,
             experimental_compile=None, jit_compile=None, experimental_follow_type_hints=None):
    """tf.function for graph mode (see the module docstring): usable as @function or function(f)."""
    if func is None:
        return lambda f: Function(f, input_signature)
    return Function(func, input_signature)


# ------------------------------------------------------------------------------------------- conv
def conv(input, filter, strides, padding, explicit_paddings=(), data_format="CHANNELS_LAST",  # noqa: A002
         dilations=(), batch_dims=1, groups=1, name=None):
    """N-D convolution (N = filter rank - 2, 1 to 3) with `batch_dims` leading batch axes and
    grouped channels (tf.conv)."""
    from kernflow.core.framework.ops import convert_to_tensor
    from kernflow.core.ops import array_ops, nn_ops_conv, nn_ops_extra
    from kernflow.core.framework.graph_scopes import name_scope as name_scope_fn
    with name_scope_fn(name or "Conv"):
        x = convert_to_tensor(input)
        w = convert_to_tensor(filter, dtype=x.dtype)
        if w.shape.rank is None or x.shape.rank is None:
            raise ValueError("conv: input and filter need known ranks")
        n = w.shape.rank - 2
        if not 1 <= n <= 3:
            raise ValueError(f"conv: filter must have rank 3 to 5 (N = 1 to 3), got rank {w.shape.rank}")
        if data_format not in ("CHANNELS_LAST", "CHANNELS_FIRST"):
            raise ValueError(f"conv: data_format must be CHANNELS_LAST or CHANNELS_FIRST, got {data_format}")
        first = data_format == "CHANNELS_FIRST"
        if x.shape.rank != n + 1 + batch_dims:
            raise ValueError(f"conv: input must have rank {n + 1 + batch_dims} (N={n}, batch_dims="
                             f"{batch_dims}), got {x.shape.rank}")
        strides, dilations = list(strides), list(dilations) or [1] * (n + 2)
        if len(strides) != n + 2 or len(dilations) != n + 2:
            raise ValueError(f"conv: strides and dilations need {n + 2} entries, got {strides} and "
                             f"{dilations}")
        sp = slice(2, n + 2) if first else slice(1, n + 1)
        s_sp, d_sp = strides[sp], dilations[sp]
        batch_shape = array_ops.shape(x)[:batch_dims]
        x = array_ops.reshape(x, array_ops.concat([[-1], array_ops.shape(x)[batch_dims:]], 0))
        if first:   # to channels-last
            x = array_ops.transpose(x, [0] + list(range(2, n + 2)) + [1])
        if n == 1:
            x, w = array_ops.expand_dims(x, 1), array_ops.expand_dims(w, 0)
            s_sp, d_sp = [1] + s_sp, [1] + d_sp
        pads = padding
        if padding == "EXPLICIT":
            ex = list(explicit_paddings)
            pairs = [ex[2 * i:2 * i + 2] for i in range(len(ex) // 2)]
            pairs = ([pairs[0]] + pairs[2:] + [pairs[1]]) if first else pairs
            if n == 1:
                pairs = [pairs[0], [0, 0]] + pairs[1:]
            pads = pairs
        fn = nn_ops_extra.conv3d if n == 3 else nn_ops_conv.conv2d
        fmt = "NDHWC" if n == 3 else "NHWC"

        def one(xg, wg):
            return fn(xg, wg, [1] + s_sp + [1], pads, data_format=fmt, dilations=[1] + d_sp + [1])
        if groups == 1:
            y = one(x, w)
        else:
            xs = array_ops.split(x, groups, axis=-1)
            ws = array_ops.split(w, groups, axis=-1)
            y = array_ops.concat([one(a, b) for a, b in zip(xs, ws)], -1)
        if n == 1:
            y = array_ops.squeeze(y, [1])
        if first:
            y = array_ops.transpose(y, [0, n + 1] + list(range(1, n + 1)))
        return array_ops.reshape(y, array_ops.concat([batch_shape, array_ops.shape(y)[1:]], 0))


# ----------------------------------------------------------------------------------- approx_top_k
def approx_top_k(operand, k, reduction_dimension=-1, recall_target=0.95, is_max_k=True,
                 reduction_input_size_override=-1, aggregate_to_topk=True, name=None):
    """(values, indices) of the k largest (or smallest, is_max_k=False) along reduction_dimension.

    Computed exactly (recall 1.0, which satisfies any recall_target): the approximation is a TPU
    speed-up kernflow does not need.
    """
    from kernflow.core.framework.ops import convert_to_tensor
    from kernflow.core.ops import array_ops
    from kernflow.core.framework.graph_scopes import name_scope as name_scope_fn
    from kernflow.core.ops.nn_ops import top_k
    with name_scope_fn(name or "ApproxTopK"):
        x = convert_to_tensor(operand)
        rank = x.shape.rank
        if rank is None:
            raise ValueError("approx_top_k: operand needs a known rank")
        dim = reduction_dimension % rank
        perm = [i for i in range(rank) if i != dim] + [dim]
        moved = array_ops.transpose(x, perm) if dim != rank - 1 else x
        vals, idx = top_k(moved if is_max_k else -moved, k=k, sorted=True)
        if not is_max_k:
            vals = -vals
        if dim != rank - 1:
            inv = [perm.index(i) for i in range(rank)]
            vals, idx = array_ops.transpose(vals, inv), array_ops.transpose(idx, inv)
        return vals, idx



def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95, reduction_input_size_override=-1,
                 aggregate_to_topk=True, name=None):
    """The k largest values of operand along reduction_dimension and their indices (`tf.nn.approx_max_k`).

    TF's approximation is a TPU speed-up; kernflow returns the exact top k (recall 1.0, which meets
    any recall_target), sorted, so recall_target, reduction_input_size_override and
    aggregate_to_topk (False lets TF return more than k candidates) change nothing. The gradient
    scatters into operand's shape at the indices, as TF's does.

    Returns:
        (values, indices): operand's shape with reduction_dimension replaced by k; int32 indices.
    """
    return approx_top_k(operand, k, reduction_dimension, recall_target, True, reduction_input_size_override,
                        aggregate_to_topk, name or "ApproxMaxK")


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95, reduction_input_size_override=-1,
                 aggregate_to_topk=True, name=None):
    """The k smallest values of operand along reduction_dimension and their indices (`tf.nn.approx_min_k`).

    Exact, as `approx_max_k` is.
    """
    return approx_top_k(operand, k, reduction_dimension, recall_target, False, reduction_input_size_override,
                        aggregate_to_topk, name or "ApproxMinK")

# ------------------------------------------------------------------------------------- TypeSpecs
class IndexedSlicesSpec(TypeSpec):
    """The dense shape and dtypes of an IndexedSlices."""

    def __init__(self, shape=None, dtype=_dtypes.float32, indices_dtype=_dtypes.int64,
                 dense_shape_dtype=None, indices_shape=None):
        self._shape = _ts.as_shape(shape)
        self._dtype = _dtypes.as_dtype(dtype)
        self._indices_dtype = _dtypes.as_dtype(indices_dtype)
        self._dense_shape_dtype = None if dense_shape_dtype is None else _dtypes.as_dtype(dense_shape_dtype)
        self._indices_shape = _ts.as_shape(indices_shape).with_rank(1)

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)
    indices_dtype = property(lambda self: self._indices_dtype)

    @property
    def value_type(self):
        return _IndexedSlices

    def is_compatible_with(self, spec_or_value) -> bool:
        o = spec_or_value
        if isinstance(o, IndexedSlicesSpec):
            return (o._dtype == self._dtype and o._indices_dtype == self._indices_dtype and
                    self._shape.is_compatible_with(o._shape))
        if isinstance(o, _IndexedSlices):
            rows = o.values.shape
            return (o.values.dtype.base_dtype == self._dtype and
                    o.indices.dtype.base_dtype == self._indices_dtype and
                    (rows.rank is None or self._shape.rank is None or
                     self._shape[1:].is_compatible_with(rows[1:])))
        return False

    def _fields(self):
        return (self._shape.as_list() if self._shape.rank is not None else None, self._dtype,
                self._indices_dtype, self._dense_shape_dtype, self._indices_shape.as_list())

    def __repr__(self):
        return (f"IndexedSlicesSpec(TensorShape({self._shape}), kf.{self._dtype.name}, "
                f"kf.{self._indices_dtype.name}, {self._dense_shape_dtype}, {self._indices_shape})")


class TensorArraySpec(TypeSpec):
    """The element shape, dtype and growth flags of a TensorArray."""

    def __init__(self, element_shape=None, dtype=_dtypes.float32, dynamic_size=False, infer_shape=True):
        self._element_shape = _ts.as_shape(element_shape)
        self._dtype = _dtypes.as_dtype(dtype)
        self._dynamic_size = dynamic_size
        self._infer_shape = infer_shape

    element_shape = property(lambda self: self._element_shape)
    dtype = property(lambda self: self._dtype)
    dynamic_size = property(lambda self: self._dynamic_size)

    @property
    def value_type(self):
        from kernflow.core.ops.tensor_array_ops import TensorArray
        return TensorArray

    def is_compatible_with(self, other) -> bool:
        if not isinstance(other, TypeSpec):
            other = TensorArraySpec.from_value(other)
        return (isinstance(other, TensorArraySpec) and self._dtype.is_compatible_with(other._dtype) and
                self._element_shape.is_compatible_with(other._element_shape) and
                self._dynamic_size == other._dynamic_size)

    @staticmethod
    def from_value(value):
        return TensorArraySpec(getattr(value, "element_shape", None), value.dtype,
                               getattr(value, "_dynamic_size", False), getattr(value, "_infer_shape", True))

    def _fields(self):
        es = self._element_shape
        return (es.as_list() if es.rank is not None else None, self._dtype, self._dynamic_size,
                self._infer_shape)

    def __repr__(self):
        return (f"TensorArraySpec(TensorShape({self._element_shape}), kf.{self._dtype.name}, "
                f"{self._dynamic_size}, {self._infer_shape})")


class OptionalSpec(TypeSpec):
    """The element structure of an optional value (tf.data's Optional)."""

    def __init__(self, element_spec):
        self._element_spec = element_spec

    element_spec = property(lambda self: self._element_spec)

    def is_compatible_with(self, other) -> bool:
        return isinstance(other, OptionalSpec) and _specs_compatible(self._element_spec, other._element_spec)

    def _fields(self):
        from kernflow.core import nest_ns
        return tuple(nest_ns.flatten(self._element_spec))

    def __repr__(self):
        return f"OptionalSpec({self._element_spec!r})"


class NoneTensorSpec(TypeSpec):
    """The type of None where a structure holds a value (no tensors)."""

    def is_compatible_with(self, other) -> bool:
        return other is None or isinstance(other, NoneTensorSpec)

    def _fields(self):
        return ()

    def __repr__(self):
        return "NoneTensorSpec()"


def _specs_compatible(a, b) -> bool:
    from kernflow.core import nest_ns
    try:
        nest_ns.assert_same_structure(a, b)
    except (ValueError, TypeError):
        return False
    return all(x.is_compatible_with(y) for x, y in zip(nest_ns.flatten(a), nest_ns.flatten(b)))

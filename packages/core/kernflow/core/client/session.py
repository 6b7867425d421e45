"""`kf.Session`: runs graph fragments; the target's scheme picks the runtime behind it.

``""`` is the embedded runtime (core's DirectSession); other schemes (``grpc://``, ``etcd://``) come
from plugins through the `kernflow_register_session_factories` hook, as TF's SessionFactory
registry does.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import weakref

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import sparse_tensor as _sparse
from kernflow.core.framework.indexed_slices import IndexedSlices, IndexedSlicesValue
from kernflow.core.ops import variables as _variables
from kernflow.core.ops.session_ops import HANDLE_OPS as _HANDLE_OPS, TensorHandle
from kernflow.core.plugins import manager
from kernflow.core.runtime.resource_mgr import Var, is_state_buffer
from kernflow.core import telemetry
from kernflow.core import tracing

__all__ = ["Session", "InteractiveSession", "get_default_session"]

_step_start = telemetry.step_start   # None unless a MeterProvider is installed (checked per step)


# ---------------------------------------------------------------------------- fetch structure
def _none(vals):
    return None


class _FetchMapper:
    """Flattens a nested fetch structure into unique graph elements and rebuilds the results."""

    def __init__(self, graph, fetches):
        self.elements: list = []          # Tensor or Operation, unique
        self._index: dict = {}
        self._build = self._plan(graph, fetches)

    def _add(self, el) -> int:
        i = self._index.get(id(el))
        if i is None:
            i = self._index[id(el)] = len(self.elements)
            self.elements.append(el)
        return i

    def _plan(self, graph, f):
        t = type(f)
        if t is _ops.Tensor and f._op._graph is graph:   # the usual leaf
            i = self._add(f)
            return lambda vals: vals[i]
        if t is _ops.Operation and f._graph is graph:
            self._add(f)
            return _none
        if f is None:
            raise TypeError("Fetch argument None has invalid type <class 'NoneType'>")
        if isinstance(f, (list, tuple)):
            if type(f) is list and all(type(x) is _ops.Tensor and x._op._graph is graph for x in f):
                idx = [self._add(x) for x in f]     # (a list of tensors: no closure per element)
                return lambda vals: [vals[i] for i in idx]
            subs = [self._plan(graph, x) for x in f]
            if isinstance(f, tuple) and hasattr(f, "_fields"):
                cls = type(f)
                return lambda vals: cls(*[s(vals) for s in subs])
            cls = type(f)
            if cls is list:
                return lambda vals: [s(vals) for s in subs]
            return lambda vals: cls(s(vals) for s in subs)
        if isinstance(f, dict):
            items = [(k, self._plan(graph, v)) for k, v in f.items()]
            cls = type(f)
            if isinstance(f, collections.defaultdict):
                return lambda vals: collections.defaultdict(f.default_factory, ((k, s(vals)) for k, s in items))
            if cls is dict:
                return lambda vals: {k: s(vals) for k, s in items}
            return lambda vals: cls((k, s(vals)) for k, s in items)
        if isinstance(f, IndexedSlices):  # fetched as (values, indices, dense_shape), as TF does
            parts = [self._plan(graph, x) if x is not None else (lambda vals: None)
                     for x in (f.values, f.indices, f.dense_shape)]
            return lambda vals: IndexedSlicesValue(*[p(vals) for p in parts])
        if isinstance(f, _sparse.SparseTensor):  # fetched as a SparseTensorValue, as TF does
            parts = [self._plan(graph, x) for x in (f.indices, f.values, f.dense_shape)]
            return lambda vals: _sparse.SparseTensorValue(*[p(vals) for p in parts])
        try:
            el = graph.as_graph_element(f, allow_tensor=True, allow_operation=True)
        except TypeError as e:
            raise TypeError(f"Fetch argument {f!r} has invalid type {type(f)}, must be a string or "
                            f"Tensor. ({e})") from None
        except (KeyError, ValueError) as e:
            raise ValueError(f"Fetch argument {f!r} cannot be interpreted as a Tensor. ({e})") from None
        i = self._add(el)
        if isinstance(el, _ops.Operation):
            return _none
        return lambda vals: vals[i]

    def build(self, values):
        return self._build(values)


# Fetch structures of up to this many leaves get a compiled builder (see `_compiled_build`); a
# larger one (a list of thousands of tensors) keeps the closures, cheaper than compiling it.
_MAX_COMPILED_LEAVES = 256


def _compiled_build(graph, fetches, elements):
    """``build(tensor values) -> results`` for a fetch structure of lists, tuples, namedtuples and
    plain dicts of graph elements, compiled to one expression (``[[None, v[0]], v[1]]``), or None
    for any other structure (the mapper's closures serve it).

    It takes the values of the structure's tensors only, in `elements` order (no None slots for
    its operations): a nested structure then costs what a flat one does, where the closures cost
    a call per level and per leaf (a monitored session's ``[fetches, *hook requests]`` every step).
    """
    index, n = {}, 0
    for el in elements:
        if isinstance(el, _ops.Tensor):   # (the order of the plan's fetch_names)
            index[id(el)] = n
            n += 1
    namespace: dict = {}
    leaves = [0]

    def expr(f):
        t = type(f)
        leaves[0] += 1
        if leaves[0] > _MAX_COMPILED_LEAVES:
            return None
        if t is _ops.Operation:
            return "None"
        if t is not _ops.Tensor:
            if t is list or t is tuple or (isinstance(f, tuple) and hasattr(f, "_fields")):
                parts = [expr(x) for x in f]
                if None in parts:
                    return None
                if t is list:
                    return f"[{', '.join(parts)}]"
                if t is tuple:
                    return f"({''.join(p + ', ' for p in parts)})"
                name = f"c{len(namespace)}"
                namespace[name] = t
                return f"{name}({', '.join(parts)})"
            if t is dict:
                items = []
                for k, x in f.items():
                    e = expr(x)
                    if e is None:
                        return None
                    name = f"k{len(namespace)}"
                    namespace[name] = k
                    items.append(f"{name}: {e}")
                return f"{{{', '.join(items)}}}"
            if t not in _LEAVES:
                return None   # IndexedSlices, SparseTensor, dict subclasses: the closures
            f = graph.as_graph_element(f, allow_tensor=True, allow_operation=True)
            if type(f) is _ops.Operation:
                return "None"
        i = index.get(id(f))
        return None if i is None else f"v[{i}]"

    body = expr(fetches)
    if body is None:
        return None
    try:
        return eval(f"lambda v: {body}", namespace)  # noqa: S307 - generated from the fetch structure
    except (SyntaxError, RecursionError, MemoryError):
        return None


class _Uncacheable(Exception):
    """A fetch structure `_fetch_key` does not describe (names, Variables, namedtuples...)."""


def _fetch_key(f):
    """A hashable key equal for fetch structures of the same shape and the same graph elements:
    lists, tuples and dicts of Tensors, Operations, Variables and names (anything else raises
    _Uncacheable).
    Tensors compare by identity, so the key never confuses two structures."""
    t = type(f)
    if t in _LEAVES:
        return f
    if t is list or t is tuple:   # (leaves inline: a call per element costs what the rest does)
        return (t, *[x if type(x) in _LEAVES else _fetch_key(x) for x in f])
    if t is dict:
        return (dict, *[(k, v if type(v) in _LEAVES else _fetch_key(v)) for k, v in f.items()])
    raise _Uncacheable


# Variables and names map to one graph element for the graph's life (a name that does not resolve
# raises before anything is cached), so a structure of them is cached like one of tensors:
# `run([train_op, global_step])` with the Variable itself is the common TF1 loop.
_LEAVES = frozenset((_ops.Tensor, _ops.Operation, _variables.Variable, str))


_MAX_FETCH_PLANS = 256
# Garbage-collected TensorHandles whose tensors are deleted together (TF's threshold).
_DEAD_HANDLES_THRESHOLD = 10


def _check_fetchable(op) -> None:
    if op._control_flow_context is not None and _in_loop(op):
        raise ValueError(f"Operation {op.name!r} has been marked as not fetchable: it is "
                         f"inside a while loop (fetch the loop's outputs instead).")


class _FetchPlan:
    """What `Session.run` needs of a fetch structure: the names to run and how to rebuild the
    results (`build(values of fetch_names)`)."""

    __slots__ = ("fetch_names", "targets", "build", "handles")

    def __init__(self, mapper: _FetchMapper, graph=None, fetches=None):
        """`graph` and `fetches` given (a plan the session caches): its builder is compiled."""
        fetch_names, targets, is_tensor = [], [], []
        for el in mapper.elements:
            tensor = isinstance(el, _ops.Tensor)
            _check_fetchable(el._op if tensor else el)
            (fetch_names if tensor else targets).append(el.name)
            is_tensor.append(tensor)
        self.fetch_names, self.targets = tuple(fetch_names), tuple(targets)
        self.handles = _handle_positions(mapper.elements)
        compiled = _compiled_build(graph, fetches, mapper.elements) if graph is not None else None
        self.build = compiled or _positional_build(mapper.build, is_tensor)


def _handle_positions(elements) -> tuple:
    """((index among the tensors, dtype kept), ...) of the fetched `get_session_handle` tensors,
    whose values `Session.run` returns as TensorHandles."""
    tensors = [el for el in elements if isinstance(el, _ops.Tensor)]
    return tuple((i, t._op.inputs[0].dtype) for i, t in enumerate(tensors) if t._op._type in _HANDLE_OPS)


def _positional_build(build, is_tensor):
    """`build` (taking a value per element, None for operations) as a function of the tensors'
    values only."""
    if all(is_tensor):
        return build

    def with_none(out):
        it = iter(out)
        return build([next(it) if t else None for t in is_tensor])
    return with_none


def _sparse_parts(k, v):
    """The three (tensor, value) feeds of a SparseTensor key fed a SparseTensorValue or a triple."""
    if not isinstance(v, (tuple, list)) or len(v) != 3:
        raise TypeError(f"The value of a SparseTensor feed ({k.indices.name}) must be a "
                        f"SparseTensorValue or an (indices, values, dense_shape) tuple, got {type(v)}")
    return list(zip((k.indices, k.values, k.dense_shape), v))


def _flatten_sparse_args(args, sparse_at):
    """make_callable's arguments with each SparseTensor feed's value split into three."""
    if len(args) != len(sparse_at):
        raise TypeError(f"callable expects {len(sparse_at)} feed values, got {len(args)}")
    out = []
    for a, sp in zip(args, sparse_at):
        out.extend(a if sp else (a,))
    return out


# Fetched values returned as they are: numpy scalars (a full reduction's output, a snapshot of a
# scalar variable) and None. Checked by type before `_to_user` is called: a call per fetched
# value costs a monitored training step ~0.5 us inside the step.
_AS_IS = frozenset({t for t in np.sctypeDict.values() if issubclass(t, np.generic)} | {type(None)})


def _to_user(v):
    """Converts a fetched value to what TF1 returns: a numpy array (scalars as numpy scalars)."""
    if type(v) is np.ndarray:
        if v.ndim == 0:
            return v[()]
        if is_state_buffer(v):
            return v.copy()
        return v
    if isinstance(v, Var):
        arr = v.read()
        if type(arr) is np.ndarray and arr.ndim == 0:
            return arr[()]   # a scalar (a global step): a numpy scalar is already a copy
        return _to_user(arr.copy())
    if isinstance(v, np.generic) or v is None:
        return v
    to_host = getattr(v, "get", None)  # device arrays (cupy) come back to the host
    if to_host is not None:
        return _to_user(to_host())
    if isinstance(v, np.ndarray):
        return _to_user(np.asarray(v))
    return v


_feed_info: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _in_loop(op) -> bool:
    """True if op runs inside a while loop (a loop's Exit outputs are outside it)."""
    from kernflow.core.ops import control_flow_v1
    ctx = control_flow_v1.get_output_context(op)
    return ctx is not None and ctx.get_while_context() is not None


def _check_feed(t: _ops.Tensor, value):
    """Converts a feed value to the tensor's dtype and checks its static shape (TF1's rules)."""
    info = _feed_info.get(t)
    if info is None or info[2] is not t._shape:  # set_shape replaces the shape object
        info = _feed_info[t] = (np.dtype(t.dtype.base_dtype.as_numpy_dtype)
                                if t.dtype.base_dtype != _dtypes.string else None, t.shape.dim_values,
                                t._shape)
    npdtype, dims, _ = info
    if type(value) is np.ndarray and value.dtype is npdtype:  # the common case: no conversion
        shp = value.shape
        if dims is not None and (len(shp) != len(dims) or
                                 any(d is not None and d != s for d, s in zip(dims, shp))):
            raise ValueError(f"Cannot feed value of shape {shp} for Tensor '{t.name}', which has "
                             f"shape '{t.shape}'")
        return value
    if type(value) is TensorHandle:
        value = value._feed_value(t)
    if isinstance(value, (_ops.Tensor, _ops.Operation)):
        raise TypeError(f"The value of a feed cannot be a kf.Tensor object. Acceptable feed values "
                        f"include Python scalars, strings, lists, numpy ndarrays. (feeding {t.name})")
    dt = t.dtype.base_dtype
    npdt = dt.as_numpy_dtype
    if hasattr(value, "__cuda_array_interface__") and npdtype is not None:
        # A device array (cupy): fed as it is, to a placeholder whose consumers are on its device.
        arr = value if value.dtype == npdtype else value.astype(npdtype)
    elif type(value) is np.ndarray and value.dtype == npdt:
        arr = value
    elif dt == _dtypes.string:
        from kernflow.core.framework import tensor_util
        arr = tensor_util.to_numpy(value, dt)
    else:
        try:
            arr = np.asarray(value, dtype=npdt)
        except OverflowError:
            arr = None
        except (TypeError, ValueError) as e:
            raise TypeError(f"Cannot convert feed value {value!r} to {dt.name} for Tensor "
                            f"'{t.name}': {e}") from None
        if isinstance(value, int) and not isinstance(value, bool) and (arr is None or arr != value):
            raise TypeError(f"Type of feed value {value} with type {type(value)} is not compatible "
                            f"with Tensor type {dt!r}. Try explicitly setting the type of the feed "
                            f"tensor to a larger type (e.g. int64).")
    if dims is not None:
        shp = arr.shape
        if len(shp) != len(dims) or any(d is not None and d != s for d, s in zip(dims, shp)):
            raise ValueError(f"Cannot feed value of shape {shp} for Tensor '{t.name}', which has "
                             f"shape '{t.shape}'")
    return arr


def _feed_checker(t: _ops.Tensor):
    """`_check_feed` for one fixed feed, with the common case (an ndarray of the right dtype and
    shape) decided from values looked up once; anything else goes through `_check_feed`."""
    if t.dtype.base_dtype == _dtypes.string:
        return lambda v: _check_feed(t, v)
    npdtype = np.dtype(t.dtype.base_dtype.as_numpy_dtype)
    shape_obj, dims = t._shape, t.shape.dim_values
    rank = None if dims is None else len(dims)
    known = () if dims is None else tuple((i, d) for i, d in enumerate(dims) if d is not None)

    def check(v):
        if type(v) is np.ndarray and v.dtype is npdtype and t._shape is shape_obj:
            if rank is None:
                return v
            shp = v.shape
            if len(shp) == rank:
                for i, d in known:
                    if shp[i] != d:
                        break
                else:
                    return v
        return _check_feed(t, v)
    return check


# ---------------------------------------------------------------------------- default session
class _DefaultSessionStack(threading.local):
    def __init__(self):
        self.stack = []


_default_sessions = _DefaultSessionStack()


def get_default_session():
    """Returns the innermost session entered with `with sess:` / `as_default()` (or None)."""
    return _default_sessions.stack[-1] if _default_sessions.stack else None


def _run_using_default_session(el, feed_dict, session):
    s = session or get_default_session()
    if s is None:
        raise ValueError("Cannot evaluate tensor using `eval()` / `run()`: No default session is "
                         "registered. Use `with sess.as_default()` or pass an explicit session.")
    if s.graph is not el.graph:
        raise ValueError("Cannot use the given session to evaluate tensor: the tensor's graph is "
                         "different from the session's graph.")
    return s.run(el, feed_dict)


def _split_target(target: str) -> str:
    if not target:
        return ""
    if "://" not in target:
        raise errors.InvalidArgumentError(None, None, f"Session target {target!r} has no scheme "
                                          f"(expected '', 'grpc://host:port', 'grpcs://host:port', "
                                          f"'etcd://host:port/cluster' or 'etcds://host:port/cluster')")
    return target.split("://", 1)[0]


# Target schemes that kernflow's own distributions serve, to name the one to install when it is not.
_SCHEME_DISTRIBUTIONS = {scheme: "kernflow-client" for scheme in ("grpc", "grpcs", "etcd", "etcds")}


def _session_factory(target: str):
    """The session factory registered for `target`'s scheme.

    Raises:
        NotFoundError: naming the target, the registered schemes and, for ``grpc://`` and
            ``etcd://``, the distribution that serves them.
    """
    scheme = _split_target(target)
    factories = manager.registries().session_factories
    if scheme in factories:
        return factories.get(scheme)
    registered = ", ".join(repr(f"{n}://") if n else "'' (embedded)" for n in factories.names())
    hint = (f" (install {_SCHEME_DISTRIBUTIONS[scheme]}: pip install {_SCHEME_DISTRIBUTIONS[scheme]})"
            if scheme in _SCHEME_DISTRIBUTIONS else "")
    raise errors.NotFoundError(None, None, f"Session target {target!r}: no session factory serves "
                               f"{scheme}://{hint}; registered: {registered}")


# ---------------------------------------------------------------------------- Session
class BaseSession:
    """Shared machinery of `Session` and `InteractiveSession`."""

    def __init__(self, target: str = "", graph=None, config=None):
        if graph is None:
            graph = _ops.get_default_graph()
        if not isinstance(graph, _ops.Graph):
            raise TypeError(f"graph must be a kf.Graph, but got {type(graph)}")
        if config is not None:
            from kernflow.core.protobuf import config_pb2
            if not isinstance(config, config_pb2.ConfigProto):
                raise TypeError(f"config must be a kf.ConfigProto, but got {type(config)}")
        self._graph = graph
        self._target = target
        self._config = config
        self._metric_attrs = telemetry.session_attributes(telemetry.REMOTE if target else telemetry.EMBEDDED)
        self._impl = _session_factory(target)(target, graph, config)
        self._closed = False
        self._default_ctx = None
        self._fetch_cache: dict = {}
        self._feed_cache: dict = {}   # Tensor fed by `run` -> (its name, `_feed_checker`)
        self._dead_handles: list = []   # handles of collected TensorHandles, not yet deleted
        self._dead_handles_due = False

    graph = property(lambda self: self._graph)
    graph_def = property(lambda self: self._graph.as_graph_def())
    sess_str = property(lambda self: self._target)

    def list_devices(self):
        """Returns the devices of this session (objects with name, device_type, memory_limit_bytes)."""
        return [_DeviceAttributes(**d) for d in self._impl.list_devices()]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._impl.close()

    def _variable_reader(self, op_name: str):
        """fn() -> the current buffer of variable `op_name` without running a step, when the
        runtime can read it so (the embedded one, for a ref variable in host memory), else None.
        See `DirectSession.variable_reader`."""
        reader = getattr(self._impl, "variable_reader", None)
        return None if reader is None or self._closed else reader(op_name)

    def as_default(self):
        """Makes this the default session (for `Tensor.eval`/`Operation.run`) in a `with` block."""
        return _as_default(self)

    def __enter__(self):
        self._default_ctx = self.as_default()
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()
        self._default_ctx.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._default_ctx.__exit__(exc_type, exc, tb)
        self._graph_ctx.__exit__(exc_type, exc, tb)
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # ------------------------------------------------------------------ run
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs the ops and evaluates the tensors in `fetches`.

        Args:
            fetches: a graph element (Tensor, Operation, Variable or name) or any nesting of
                lists, tuples, namedtuples and dicts of them.
            feed_dict: {tensor or name: value}; values are converted to the tensor's dtype and
                checked against its static shape.
            options: a `RunOptions` proto (trace level, timeout).
            run_metadata: a `RunMetadata` proto to fill with step stats.

        Returns:
            The fetched values with the structure of `fetches` (None for Operations).

        Raises:
            ValueError / TypeError: a bad fetch or feed (TF1's classes).
            OpError subclasses: errors raised while running, naming the op.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        g = self._graph
        if self._dead_handles_due:
            self._delete_dead_handles()
        if type(fetches) is _ops.Tensor and fetches._op._graph is g and \
                fetches._op._type not in _HANDLE_OPS:
            plan = None
            fetch_names, targets = (fetches.name,), ()
            if fetches._op._control_flow_context is not None:
                _check_fetchable(fetches._op)
        else:
            plan = self._fetch_plan(fetches)
            fetch_names, targets = plan.fetch_names, plan.targets
        feed_names, feed_vals = [], []
        if feed_dict:
            cache = self._feed_cache
            for k, v in feed_dict.items():
                entry = cache.get(k) if type(k) is _ops.Tensor else None
                if entry is not None:   # a tensor fed before: checked once, its checker kept
                    feed_names.append(entry[0])
                    feed_vals.append(entry[1](v))
                    continue
                for key, value in (_sparse_parts(k, v) if isinstance(k, _sparse.SparseTensor)
                                   else ((k, v),)):
                    t = self._feed_tensor(key)
                    feed_names.append(t.name)
                    feed_vals.append(_check_feed(t, value))
        t0 = _step_start()
        try:
            with tracing.session_run_span(len(fetch_names) + len(targets)) as span:
                values = self._impl.run(tuple(feed_names), feed_vals, fetch_names, targets,
                                        options, run_metadata)
                if span is not None:
                    tracing.set_step_attrs(span, len(fetch_names), len(targets))
        except BaseException as e:
            if t0 is not None:
                telemetry.record_step(self._metric_attrs, t0, e)
            raise
        if t0 is not None:
            telemetry.record_step(self._metric_attrs, t0)
        out = [v if type(v) in _AS_IS else _to_user(v) for v in values]
        if plan is None:
            return out[0]
        if plan.handles:
            self._wrap_handles(out, plan.handles)
        return plan.build(out)

    def _wrap_handles(self, values: list, handles) -> None:
        for i, dtype in handles:
            values[i] = TensorHandle(values[i], dtype, self)

    def _register_dead_handle(self, handle: str) -> None:
        """Called by a garbage-collected TensorHandle: its tensor is deleted at the start of a
        later `run`, with others, once `_DEAD_HANDLES_THRESHOLD` are due (TF's batching)."""
        if not self._closed:
            self._dead_handles.append(handle)
            self._dead_handles_due = len(self._dead_handles) >= _DEAD_HANDLES_THRESHOLD

    def _delete_dead_handles(self) -> None:
        dead, self._dead_handles, self._dead_handles_due = self._dead_handles, [], False
        delete = getattr(self._impl, "delete_session_tensors", None)
        if delete is not None:
            delete(dead)

    def _feed_tensor(self, k) -> _ops.Tensor:
        """The tensor a feed_dict key names, checked to be feedable (a Tensor key is remembered
        with its checker in `_feed_cache`).

        Raises:
            TypeError: the key names no tensor. ValueError: another graph's tensor, or one in a loop.
        """
        g = self._graph
        key = k
        if type(k) is not _ops.Tensor:
            if hasattr(k, "_as_graph_element"):
                k = k._as_graph_element()
            try:
                k = g.as_graph_element(k, allow_tensor=True, allow_operation=False)
            except (KeyError, ValueError, TypeError) as e:
                raise TypeError(f"Cannot interpret feed_dict key {k!r} as Tensor: {e}") from None
        elif k._op._graph is not g:
            raise ValueError(f"Tensor {k.name} is not an element of this graph.")
        if k._op._control_flow_context is not None and _in_loop(k._op):
            raise ValueError(f"Tensor {k.name} may not be fed: it is inside a while loop.")
        if key is k:
            if len(self._feed_cache) >= _MAX_FETCH_PLANS:
                self._feed_cache.clear()
            self._feed_cache[k] = (k.name, _feed_checker(k))
        return k

    def _fetch_plan(self, fetches) -> "_FetchPlan":
        """The plan of a fetch structure: cached by the structure's elements (`_fetch_key`), so a
        training loop's `run([train, loss])` (a new list each step, the same tensors) or a
        monitored session's merged fetches are mapped once."""
        try:
            key = _fetch_key(fetches)
        except _Uncacheable:
            return _FetchPlan(_FetchMapper(self._graph, fetches))
        plan = self._fetch_cache.get(key)
        if plan is None:
            plan = _FetchPlan(_FetchMapper(self._graph, fetches), self._graph, fetches)
            if len(self._fetch_cache) >= _MAX_FETCH_PLANS:
                self._fetch_cache.clear()
            self._fetch_cache[key] = plan
        return plan

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """Returns fn(*feed_values) that runs `fetches` with `feed_list` fed, skipping re-analysis."""
        g = self._graph
        mapper = _FetchMapper(g, fetches)
        feed_list = list(feed_list or [])
        sparse_at = [isinstance(f, _sparse.SparseTensor) for f in feed_list]
        feed_list = [p for f in feed_list for p in ((f.indices, f.values, f.dense_shape)
                                                  if isinstance(f, _sparse.SparseTensor) else (f,))]
        feeds = [g.as_graph_element(f._as_graph_element() if hasattr(f, "_as_graph_element") else f,
                                    allow_operation=False) for f in feed_list]
        feed_names = tuple(t.name for t in feeds)
        fetch_names = tuple(el.name for el in mapper.elements if isinstance(el, _ops.Tensor))
        targets = tuple(el.name for el in mapper.elements if isinstance(el, _ops.Operation))
        impl = self._impl
        session = self  # the callable keeps its session alive (closing it would break the callable)
        checks = [_feed_checker(t) for t in feeds]
        nfeeds, nelements = len(feeds), len(fetch_names) + len(targets)
        runner = getattr(impl, "runner", None)
        fast = runner(feed_names, fetch_names, targets) if runner is not None else None
        build = _compiled_build(g, fetches, mapper.elements) or _positional_build(
            mapper.build, [isinstance(el, _ops.Tensor) for el in mapper.elements])
        handles = _handle_positions(mapper.elements)

        def call(*args, options=None, run_metadata=None):
            if session._closed:
                raise RuntimeError("Attempted to use a closed Session.")
            if any(sparse_at):
                args = _flatten_sparse_args(args, sparse_at)
            if len(args) != nfeeds:
                raise TypeError(f"callable expects {nfeeds} feed values, got {len(args)}")
            vals = [c(a) for c, a in zip(checks, args)]
            t0 = _step_start()
            try:
                if fast is not None and options is None and run_metadata is None and \
                        not tracing.tracing_active():
                    out = fast(vals)
                else:
                    with tracing.session_run_span(nelements):
                        out = impl.run(feed_names, vals, fetch_names, targets, options, run_metadata)
            except BaseException as e:
                if t0 is not None:
                    telemetry.record_step(session._metric_attrs, t0, e)
                raise
            if t0 is not None:
                telemetry.record_step(session._metric_attrs, t0)
            out = [v if type(v) in _AS_IS else _to_user(v) for v in out]
            if handles:
                session._wrap_handles(out, handles)
            return build(out)

        if accept_options:
            return call
        return lambda *args: call(*args)

    @staticmethod
    def reset(target: str, containers=None, config=None) -> None:
        """Clears resource containers (all when `containers` is None) on the target's devices."""
        reset = getattr(_session_factory(target), "reset", None)
        if reset is None:
            raise errors.UnimplementedError(None, None, f"target {target!r} does not support reset")
        reset(target, containers, config)


class _DeviceAttributes:
    def __init__(self, name, device_type, memory_limit_bytes=0, incarnation=0, **_):
        self.name = name
        self.device_type = device_type
        self.memory_limit_bytes = memory_limit_bytes
        self.incarnation = incarnation

    def __repr__(self):
        return f"_DeviceAttributes({self.name}, {self.device_type}, {self.memory_limit_bytes})"


@contextlib.contextmanager
def _as_default(sess):
    _default_sessions.stack.append(sess)
    try:
        yield sess
    finally:
        _default_sessions.stack.pop()


class Session(BaseSession):
    """A TF1 session: ``with kf.Session() as sess: sess.run(...)``."""


class InteractiveSession(BaseSession):
    """A session that installs itself as the default session (and its graph as default) on creation."""

    def __init__(self, target: str = "", graph=None, config=None):
        super().__init__(target, graph, config)
        self._default_ctx = self.as_default()
        self._default_ctx.__enter__()
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()

    def close(self) -> None:
        if not self._closed:
            super().close()
            try:
                self._graph_ctx.__exit__(None, None, None)
                self._default_ctx.__exit__(None, None, None)
            except (IndexError, AssertionError, ValueError):
                pass

"""TF1 variable scopes and `get_variable` (`tf.compat.v1.variable_scope`, `tf.compat.v1.get_variable`).

Two per-graph stores, kept as attributes of the Graph:

* the variable store (``graph._kf_var_store``) maps full variable names ("foo/w") to the
  Variables `get_variable` created, so later calls can share them;
* the scope store (``graph._kf_var_scope_store``, per thread) holds the current `VariableScope`
  and how many times each scope name was opened, for `default_name` uniquification.

Variable names depend only on the variable scope; the name scope of ops (entered alongside the
variable scope) is made unique as usual, so entering ``variable_scope("foo")`` twice puts ops
under "foo/" and then "foo_1/" while the variables of both stay in "foo/".
"""

from __future__ import annotations

import collections.abc
import contextlib
import copy
import enum
import functools
import inspect
import threading

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.ops import init_ops, variables

__all__ = ["VariableScope", "variable_scope", "variable_op_scope", "get_variable_scope",
           "get_variable", "get_local_variable", "AUTO_REUSE", "no_regularizer",
           "VariableSynchronization", "VariableAggregation"]


class _ReuseMode(enum.Enum):
    """Reuse modes besides True/None: AUTO_REUSE creates missing variables and reuses others."""

    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE

# get_variable's `collections` argument shadows the module inside the getters.
_Sequence = collections.abc.Sequence


class VariableSynchronization(enum.Enum):
    """When a distributed variable is aggregated (accepted for API compatibility)."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3


class VariableAggregation(enum.Enum):
    """How a distributed variable is aggregated (accepted for API compatibility)."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3
    ONLY_FIRST_TOWER = 3  # alias of ONLY_FIRST_REPLICA


def no_regularizer(_):
    """A regularizer that adds no loss: use it to turn off a scope's default regularizer."""
    return None


def _validate_sync_aggregation_trainable(synchronization, aggregation, trainable, name):
    aggregation = VariableAggregation.NONE if aggregation is None else aggregation
    synchronization = VariableSynchronization.AUTO if synchronization is None else synchronization
    if not isinstance(aggregation, VariableAggregation):
        raise ValueError(f"Invalid variable aggregation mode: {aggregation} for variable: {name}")
    if not isinstance(synchronization, VariableSynchronization):
        raise ValueError(f"Invalid variable synchronization mode: {synchronization} for variable: "
                         f"{name}")
    if trainable is None:
        trainable = synchronization != VariableSynchronization.ON_READ
    elif trainable and synchronization == VariableSynchronization.ON_READ:
        raise ValueError("Synchronization value can be set to VariableSynchronization.ON_READ only "
                         "for non-trainable variables. You have specified trainable=True and "
                         "synchronization=VariableSynchronization.ON_READ.")
    return synchronization, aggregation, trainable


def _needs_no_arguments(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in params)


def _accepts_kwarg(fn, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


# ---------------------------------------------------------------------------- stores
class _VariableStore:
    """The variables made by `get_variable` in one graph, by full name."""

    def __init__(self):
        self._vars: dict[str, variables.Variable] = {}
        self._partitioned_vars: dict = {}
        self._lock = threading.RLock()

    def get_variable(self, name, shape=None, dtype=_dtypes.float32, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None,
                     synchronization=VariableSynchronization.AUTO,
                     aggregation=VariableAggregation.NONE):
        """Gets an existing variable `name` or creates it (see `kf.get_variable`)."""
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"Passed a custom_getter which is not callable: {custom_getter}")
        if isinstance(dtype, _dtypes.DType):
            dtype = dtype.base_dtype

        def true_getter(name, shape=None, dtype=_dtypes.float32, initializer=None,
                        regularizer=None, reuse=None, trainable=None, collections=None,
                        caching_device=None, partitioner=None, validate_shape=True,
                        use_resource=None, constraint=None,
                        synchronization=VariableSynchronization.AUTO,
                        aggregation=VariableAggregation.NONE):
            is_scalar = isinstance(shape, _Sequence) and not shape
            if partitioner is not None and not is_scalar:
                if not callable(partitioner):
                    raise ValueError(f"Partitioner must be callable, but received: {partitioner}")
                return self._get_partitioned_variable(
                    name, partitioner, shape=shape, dtype=dtype, initializer=initializer,
                    regularizer=regularizer, reuse=reuse, trainable=trainable,
                    collections=collections, caching_device=caching_device,
                    validate_shape=validate_shape, use_resource=use_resource,
                    constraint=constraint, synchronization=synchronization,
                    aggregation=aggregation)
            return self._get_single_variable(
                name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                reuse=reuse, trainable=trainable, collections=collections,
                caching_device=caching_device, validate_shape=validate_shape,
                use_resource=use_resource, constraint=constraint, synchronization=synchronization,
                aggregation=aggregation)

        synchronization, aggregation, trainable = _validate_sync_aggregation_trainable(
            synchronization, aggregation, trainable, name)
        kwargs = dict(name=name, shape=shape, dtype=dtype, initializer=initializer,
                      regularizer=regularizer, reuse=reuse, trainable=trainable,
                      collections=collections, caching_device=caching_device,
                      partitioner=partitioner, validate_shape=validate_shape,
                      use_resource=use_resource, synchronization=synchronization,
                      aggregation=aggregation)
        if custom_getter is not None:
            if _accepts_kwarg(custom_getter, "constraint"):
                kwargs["constraint"] = constraint
            return custom_getter(getter=true_getter, **kwargs)
        return true_getter(constraint=constraint, **kwargs)

    def _get_partitioned_variable(self, name, partitioner, shape=None, dtype=_dtypes.float32,
                                  initializer=None, regularizer=None, reuse=None, trainable=None,
                                  collections=None, caching_device=None, validate_shape=True,
                                  use_resource=None, constraint=None,
                                  synchronization=VariableSynchronization.AUTO,
                                  aggregation=VariableAggregation.NONE):
        """Gets or creates the PartitionedVariable `name` (TF's `_get_partitioned_variable`)."""
        from kernflow.core.ops import partitioned_variables as pv
        dtype = _dtypes.as_dtype(dtype).base_dtype
        if isinstance(initializer, _ops.Tensor):
            shape = _ts.as_shape(shape).merge_with(initializer.get_shape())
        elif initializer is not None and not callable(initializer) and shape is None:
            shape = _ts.as_shape(_np_shape(initializer))
        shape = _ts.as_shape(shape)
        with self._lock:
            if name in self._vars:
                raise ValueError(f"A partitioner was provided, but an unpartitioned version of the "
                                 f"variable was found: {name}. Perhaps a variable of the same name "
                                 "was already created without partitioning?")
            partitions = _call_partitioner(partitioner, shape, dtype, name)
            found = self._partitioned_vars.get(name)
            if found is not None:
                return _check_reuse(found, name, shape, dtype, partitions, reuse)
            if reuse is True:
                raise ValueError(f"PartitionedVariable {name} does not exist, or was not created "
                                 "with tf.get_variable(). Did you mean to set reuse=False or "
                                 "reuse=tf.AUTO_REUSE in VarScope?")
            slice_dim, num_slices = pv.check_partitions(partitions, shape, name)
            self._check_no_stale_parts(name, num_slices)
            parts = []
            for i, (offset, part_shape) in enumerate(
                    pv.iter_slices(shape.as_list(), num_slices, slice_dim)):
                part = self._make_part(
                    f"{name}/part_{i}", shape.as_list(), offset, part_shape, dtype, initializer,
                    regularizer=regularizer, reuse=reuse, trainable=trainable,
                    collections=collections, caching_device=caching_device,
                    validate_shape=validate_shape, use_resource=use_resource,
                    constraint=constraint, synchronization=synchronization,
                    aggregation=aggregation)
                part._save_slice_info = pv.SaveSliceInfo(name, shape.as_list(), offset, part_shape)
                parts.append(part)
            result = pv.PartitionedVariable(name, shape, dtype, parts, partitions)
            self._partitioned_vars[name] = result
            return result

    def _check_no_stale_parts(self, name, num_slices):
        if f"{name}/part_0" not in self._vars:
            return
        if f"{name}/part_{num_slices - 1}" not in self._vars or \
                f"{name}/part_{num_slices}" in self._vars:
            raise ValueError(f"Partitioner returned a different partitioning ({num_slices} parts) "
                             f"than what was already found for {name}.")

    def _make_part(self, part_name, full_shape, offset, part_shape, dtype, initializer, **kwargs):
        from kernflow.core.ops import array_ops, partitioned_variables as pv
        info = pv.PartitionInfo(full_shape, offset)
        init_shape = part_shape
        if initializer is not None and not callable(initializer):
            with _ops.name_scope(part_name + "/PartitionedInitializer/"), _ops.init_scope():
                value = _ops.convert_to_tensor(initializer, dtype=None if isinstance(
                    initializer, _ops.Tensor) else dtype)
                initializer = array_ops.slice(value, offset, part_shape)
            init_shape = None
        with _ops.name_scope(None):
            return self._get_single_variable(part_name, shape=init_shape, dtype=dtype,
                                             initializer=initializer, partition_info=info,
                                             **kwargs)

    def _get_single_variable(self, name, shape=None, dtype=_dtypes.float32, initializer=None,
                             regularizer=None, reuse=None, trainable=None, collections=None,
                             caching_device=None, validate_shape=True, use_resource=None,
                             constraint=None, synchronization=VariableSynchronization.AUTO,
                             aggregation=VariableAggregation.NONE, partition_info=None):
        initializing_from_value = initializer is not None and not callable(initializer)
        if shape is not None and initializing_from_value:
            raise ValueError("If initializer is a constant, do not specify shape.")
        dtype = _dtypes.as_dtype(dtype)
        shape = _ts.as_shape(shape)

        with self._lock:
            found = self._vars.get(name)
            if found is not None:
                if reuse is False:
                    raise ValueError(f"Variable {name} already exists, disallowed. Did you mean to "
                                     "set reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
                if not shape.is_compatible_with(found.get_shape()):
                    raise ValueError(f"Trying to share variable {name}, but specified shape "
                                     f"{shape} and found shape {found.get_shape()}.")
                if not dtype.is_compatible_with(found.dtype.base_dtype):
                    raise ValueError(f"Trying to share variable {name}, but specified dtype "
                                     f"{dtype.name} and found dtype {found.dtype.base_dtype.name}.")
                return found

            if reuse is True:
                raise ValueError(f"Variable {name} does not exist, or was not created with "
                                 "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                                 "VarScope?")

            if initializer is None:
                initializer = self._default_initializer(name, dtype)
            if isinstance(initializer, type):
                initializer = initializer()
            if initializing_from_value:
                init_val, variable_dtype = initializer, None
            elif shape.is_fully_defined():
                dims = shape.as_list()
                if _accepts_kwarg(initializer, "partition_info"):
                    init_val = functools.partial(initializer, dims, dtype=dtype,
                                                 partition_info=partition_info)
                else:
                    init_val = functools.partial(initializer, dims, dtype=dtype)
                variable_dtype = dtype.base_dtype
            elif _needs_no_arguments(initializer):
                init_val, variable_dtype = initializer, None
            else:
                raise ValueError(f"Shape of a new variable ({name}) must be fully defined, but "
                                 f"instead was {shape}.")

            with _ops.init_scope():
                v = variables.Variable(
                    initial_value=init_val, name=name, trainable=trainable,
                    collections=collections, caching_device=caching_device, dtype=variable_dtype,
                    validate_shape=validate_shape, constraint=constraint,
                    use_resource=use_resource, synchronization=synchronization,
                    aggregation=aggregation)
            self._vars[name] = v

        if regularizer:
            with _ops.colocate_with(v.op), _ops.name_scope(name + "/Regularizer/"):
                with _ops.init_scope():
                    loss = regularizer(v)
            if loss is not None:
                _ops.add_to_collection(_ops.GraphKeys.REGULARIZATION_LOSSES, loss)
        return v

    @staticmethod
    def _default_initializer(name, dtype):
        if dtype.is_floating:
            return init_ops.glorot_uniform_initializer()
        if dtype.is_integer or dtype.is_unsigned or dtype.is_bool or dtype == _dtypes.string:
            return init_ops.zeros_initializer()
        raise ValueError(f"An initializer for variable {name} of {dtype.base_dtype} is required")


def _np_shape(value):
    import numpy as np
    return list(np.shape(value))


def _call_partitioner(partitioner, shape, dtype, name):
    """The partitioner's result for a new variable of `shape` (TF's `_call_partitioner`)."""
    if not shape.is_fully_defined():
        raise ValueError(f"Shape of a new partitioned variable ({name}) must be fully defined, but "
                         f"instead was {shape}.")
    if shape.rank < 1:
        raise ValueError(f"A partitioned Variable must have rank at least 1, shape: {shape}")
    partitions = partitioner(shape=shape, dtype=dtype)
    from kernflow.core.ops import partitioned_variables as pv
    pv.check_partitions(partitions, shape, name)
    return [int(p) for p in partitions]


def _check_reuse(found, name, shape, dtype, partitions, reuse):
    if reuse is False:
        raise ValueError(f"Partitioned variable with name {name} already exists. Did you mean to "
                         "set reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
    if not shape.is_compatible_with(found.get_shape()):
        raise ValueError(f"Trying to reuse partitioned variable {name}, but specified shape {shape} "
                         f"and found shape {found.get_shape()}.")
    if not dtype.is_compatible_with(found.dtype):
        raise ValueError(f"Trying to reuse partitioned variable {name}, but specified dtype "
                         f"{dtype.name} and found dtype {found.dtype.name}.")
    if partitions is not None and found._get_partitions() != partitions:
        raise ValueError(f"Trying to reuse partitioned variable {name}, but specified partitions "
                         f"{partitions} and found partitions {found._get_partitions()}.")
    return found


class _VariableScopeStore(threading.local):
    """Per thread: the current VariableScope and how often each scope name was opened."""

    def __init__(self):
        super().__init__()
        self.current_scope = VariableScope(False)
        self.variable_scopes_count: dict[str, int] = {}

    def open_variable_scope(self, scope_name):
        self.variable_scopes_count[scope_name] = self.variable_scopes_count.get(scope_name, 0) + 1

    def close_variable_subscopes(self, scope_name):
        prefix = None if scope_name is None else scope_name + "/"
        for k in self.variable_scopes_count:
            if prefix is None or k.startswith(prefix):
                self.variable_scopes_count[k] = 0

    def variable_scope_count(self, scope_name):
        return self.variable_scopes_count.get(scope_name, 0)


_store_lock = threading.Lock()


def _graph_attr(graph, attr, factory):
    store = getattr(graph, attr, None)
    if store is None:
        with _store_lock:
            store = getattr(graph, attr, None)
            if store is None:
                store = factory()
                setattr(graph, attr, store)
    return store


def _get_default_variable_store() -> _VariableStore:
    return _graph_attr(_ops.get_default_graph(), "_kf_var_store", _VariableStore)


def _get_variable_scope_store() -> _VariableScopeStore:
    return _graph_attr(_ops.get_default_graph(), "_kf_var_scope_store", _VariableScopeStore)


def get_variable_scope():
    """The current `VariableScope` of the default graph (the root scope, named "", at first)."""
    return _get_variable_scope_store().current_scope


# ---------------------------------------------------------------------------- VariableScope
class VariableScope:
    """Defaults for `get_variable` under a scope: name prefix, reuse, initializer, regularizer...

    Args:
        reuse: True, False/None (create) or `AUTO_REUSE`.
        name: the scope's full name ("" for the root), the prefix of variable names.
        initializer: default initializer of variables created in the scope.
        regularizer: default regularizer of variables created in the scope.
        caching_device: default caching device.
        partitioner: default partitioner: ``fn(shape, dtype) -> parts per axis`` (see
            `kf.fixed_size_partitioner`); non-scalar variables then become PartitionedVariables.
        custom_getter: default custom getter (see `get_variable`).
        name_scope: the name scope opened with the scope ("foo/"), its `original_name_scope`.
        dtype: default dtype of variables created in the scope.
        use_resource: accepted for compatibility (variables are TF1 ref variables).
        constraint: default constraint of variables created in the scope.
    """

    def __init__(self, reuse, name="", initializer=None, regularizer=None, caching_device=None,
                 partitioner=None, custom_getter=None, name_scope="", dtype=_dtypes.float32,
                 use_resource=None, constraint=None):
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._reuse = reuse
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtype
        self._use_resource = use_resource
        self._constraint = constraint

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    dtype = property(lambda self: self._dtype)
    use_resource = property(lambda self: self._use_resource)
    regularizer = property(lambda self: self._regularizer)
    caching_device = property(lambda self: self._caching_device)
    partitioner = property(lambda self: self._partitioner)
    custom_getter = property(lambda self: self._custom_getter)
    constraint = property(lambda self: self._constraint)

    def reuse_variables(self):
        """Makes `get_variable` in this scope (and scopes nested from now on) reuse variables."""
        self._reuse = True

    def set_initializer(self, initializer):
        self._initializer = initializer

    def set_dtype(self, dtype):
        self._dtype = dtype

    def set_use_resource(self, use_resource):
        self._use_resource = use_resource

    def set_regularizer(self, regularizer):
        self._regularizer = regularizer

    def set_caching_device(self, caching_device):
        self._caching_device = caching_device

    def set_partitioner(self, partitioner):
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter):
        self._custom_getter = custom_getter

    def get_collection(self, name):
        """The items of collection `name` whose names start with this scope's name."""
        return _ops.get_collection(name, self._name + "/" if self._name else "")

    def trainable_variables(self):
        return self.get_collection(_ops.GraphKeys.TRAINABLE_VARIABLES)

    def global_variables(self):
        return self.get_collection(_ops.GraphKeys.GLOBAL_VARIABLES)

    def local_variables(self):
        return self.get_collection(_ops.GraphKeys.LOCAL_VARIABLES)

    def get_variable(self, var_store, name, shape=None, dtype=None, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     caching_device=None, partitioner=None, validate_shape=True,
                     use_resource=None, custom_getter=None, constraint=None,
                     synchronization=VariableSynchronization.AUTO,
                     aggregation=VariableAggregation.NONE):
        """Gets or creates `<scope>/<name>` in `var_store`, filling defaults from this scope."""
        if regularizer is None:
            regularizer = self._regularizer
        if caching_device is None:
            caching_device = self._caching_device
        if partitioner is None:
            partitioner = self._partitioner
        if custom_getter is None:
            custom_getter = self._custom_getter
        if reuse is None:
            reuse = self._reuse
        if use_resource is None:
            use_resource = self._use_resource
        full_name = self._name + "/" + name if self._name else name
        # Variable names depend on the variable scope only, not on the current name scope.
        with _ops.name_scope(None):
            if dtype is not None and initializer is not None and not callable(initializer):
                init_dtype = _ops.convert_to_tensor(initializer).dtype.base_dtype
                if init_dtype != _dtypes.as_dtype(dtype).base_dtype:
                    raise ValueError(f"Initializer type '{init_dtype}' and explicit dtype "
                                     f"'{_dtypes.as_dtype(dtype)}' don't match.")
            if initializer is None:
                initializer = self._initializer
            if constraint is None:
                constraint = self._constraint
            if dtype is None:
                dtype = self._dtype
            return var_store.get_variable(
                full_name, shape=shape, dtype=dtype, initializer=initializer,
                regularizer=regularizer, reuse=reuse, trainable=trainable,
                collections=collections, caching_device=caching_device, partitioner=partitioner,
                validate_shape=validate_shape, use_resource=use_resource,
                custom_getter=custom_getter, constraint=constraint,
                synchronization=synchronization, aggregation=aggregation)

    def __repr__(self):
        return f"<kf.VariableScope '{self._name}' reuse={self._reuse}>"


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None,
                 collections=None, caching_device=None, partitioner=None, validate_shape=True,
                 use_resource=None, custom_getter=None, constraint=None,
                 synchronization=VariableSynchronization.AUTO,
                 aggregation=VariableAggregation.NONE):
    """Gets an existing variable `<scope>/<name>` or creates a new one (TF1 `tf.get_variable`).

    Under a scope with ``reuse=True`` the variable must exist; with reuse unset it must not; with
    `AUTO_REUSE` it is created when missing. Arguments left None take the current
    `VariableScope`'s defaults.

    Args:
        name: the variable's name within the current variable scope.
        shape: the shape of a new variable (must be fully defined unless `initializer` is a
            value or a callable taking no arguments); checked against an existing variable.
        dtype: element type (the scope's, float32 by default).
        initializer: an initializer ``init(shape, dtype=...)``, an initializer class, or a
            Tensor/ndarray/Python value (then `shape` must be None and comes from the value).
            Default: glorot_uniform for floats, zeros for integers, bools and strings.
        regularizer: ``fn(variable) -> Tensor or None``; the result of a new variable is added
            to ``GraphKeys.REGULARIZATION_LOSSES``.
        trainable: add to TRAINABLE_VARIABLES (default True).
        collections: collections of a new variable (default [GLOBAL_VARIABLES]).
        caching_device: passed to the Variable.
        partitioner: ``fn(shape=TensorShape, dtype=DType) -> parts per axis``; a non-scalar
            variable is then a `PartitionedVariable` of parts "<name>/part_<i>" (scalars stay
            plain). Initializers are called per part with the part's shape and a
            `partition_info`; a Tensor or value initializer is sliced for each part.
        validate_shape: if False the variable may later take values of other shapes.
        use_resource: accepted for compatibility.
        custom_getter: ``fn(getter, name, *args, **kwargs)`` that wraps the creation; `getter`
            is the default getter taking the same arguments.
        constraint: passed to the Variable.
        synchronization: a `VariableSynchronization` (ON_READ makes the default non-trainable).
        aggregation: a `VariableAggregation`.

    Returns:
        The created or existing Variable (or PartitionedVariable), named "<scope>/<name>".

    Raises:
        ValueError: when creating an existing variable without reuse, reusing a missing one, on
            a shape or dtype mismatch with an existing variable, or on bad initializer/shape
            combinations.
    """
    return get_variable_scope().get_variable(
        _get_default_variable_store(), name, shape=shape, dtype=dtype, initializer=initializer,
        regularizer=regularizer, trainable=trainable, collections=collections,
        caching_device=caching_device, partitioner=partitioner, validate_shape=validate_shape,
        use_resource=use_resource, custom_getter=custom_getter, constraint=constraint,
        synchronization=synchronization, aggregation=aggregation)


def get_local_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                       trainable=False, collections=None, caching_device=None, partitioner=None,
                       validate_shape=True, use_resource=None, custom_getter=None, constraint=None,
                       synchronization=VariableSynchronization.AUTO,
                       aggregation=VariableAggregation.NONE):
    """`get_variable` for a non-trainable variable in the LOCAL_VARIABLES collection."""
    del trainable  # local variables are never trainable
    collections = list(collections or []) + [_ops.GraphKeys.LOCAL_VARIABLES]
    return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                        regularizer=regularizer, trainable=False, collections=collections,
                        caching_device=caching_device, partitioner=partitioner,
                        validate_shape=validate_shape, use_resource=use_resource,
                        custom_getter=custom_getter, constraint=constraint,
                        synchronization=synchronization, aggregation=aggregation)


# ---------------------------------------------------------------------------- scope managers
def _maybe_wrap_custom_getter(custom_getter, old_getter):
    """Chains a nested scope's custom getter onto the outer one (the inner one runs first)."""
    if old_getter is None:
        return custom_getter

    def wrapped_custom_getter(getter, *args, **kwargs):
        return custom_getter(functools.partial(old_getter, getter), *args, **kwargs)
    return wrapped_custom_getter


@contextlib.contextmanager
def _pure_variable_scope(name_or_scope, reuse=None, initializer=None, regularizer=None,
                         caching_device=None, partitioner=None, custom_getter=None,
                         old_name_scope=None, dtype=None, use_resource=None, constraint=None):
    """Enters a variable scope without touching the name scope; yields the new VariableScope."""
    store = _get_variable_scope_store()
    old = store.current_scope
    if isinstance(name_or_scope, VariableScope):
        # Jumping to a shared scope: a copy of it, with the requested overrides.
        new_name = name_or_scope.name
        base = name_or_scope
        scope = VariableScope(
            reuse if reuse else name_or_scope.reuse, name=new_name,
            initializer=base.initializer, regularizer=base.regularizer,
            caching_device=base.caching_device, partitioner=base.partitioner, dtype=base.dtype,
            custom_getter=base.custom_getter, name_scope=base.original_name_scope,
            use_resource=base.use_resource, constraint=constraint)
        store.open_variable_scope(new_name)
        old_subscopes = copy.copy(store.variable_scopes_count)
    else:
        # Prolonging the current scope: the name extends it, reuse and defaults are inherited.
        new_name = old.name + "/" + name_or_scope if old.name else name_or_scope
        base = old
        scope = VariableScope(
            reuse or old.reuse, name=new_name, initializer=old.initializer,
            regularizer=old.regularizer, caching_device=old.caching_device,
            partitioner=old.partitioner, dtype=old.dtype, use_resource=old.use_resource,
            custom_getter=old.custom_getter,
            name_scope=name_or_scope if old_name_scope is None else old_name_scope,
            constraint=constraint)
        old_subscopes = None
    if initializer is not None:
        scope.set_initializer(initializer)
    if regularizer is not None:
        scope.set_regularizer(regularizer)
    if caching_device is not None:
        scope.set_caching_device(caching_device)
    if partitioner is not None:
        scope.set_partitioner(partitioner)
    if custom_getter is not None:
        scope.set_custom_getter(_maybe_wrap_custom_getter(custom_getter, base.custom_getter))
    if dtype is not None:
        scope.set_dtype(dtype)
    if use_resource is not None:
        scope.set_use_resource(use_resource)
    if old_subscopes is None:
        store.open_variable_scope(new_name)
    store.current_scope = scope
    try:
        yield scope
    finally:
        if store.current_scope is not scope:
            raise RuntimeError("Improper nesting of variable_scope.")
        if old_subscopes is not None:
            store.variable_scopes_count = old_subscopes
        else:
            store.close_variable_subscopes(new_name)
        store.current_scope = old


def _get_unique_variable_scope(prefix):
    """`prefix`, or `prefix_N` with the first N whose scope was not opened in the current scope."""
    store = _get_variable_scope_store()
    current = store.current_scope
    name = current.name + "/" + prefix if current.name else prefix
    if store.variable_scope_count(name) == 0:
        return prefix
    idx = 1
    while store.variable_scope_count(f"{name}_{idx}") > 0:
        idx += 1
    return f"{prefix}_{idx}"


class variable_scope:  # noqa: N801 - TF's name
    """A context manager that opens a variable scope and its name scope (TF1 `variable_scope`).

    ``with variable_scope("foo") as vs:`` makes `get_variable("w")` create or find "foo/w" and
    opens the name scope "foo" (made unique: "foo_1" the second time). Scopes nest; passing a
    `VariableScope` object re-enters that scope's variable names (its name scope is then a new
    unique one, while `original_name_scope` stays the first). With `name_or_scope` None the scope
    is named after `default_name`, uniquified ("dense", "dense_1", ...).

    Args:
        name_or_scope: a string or a `VariableScope`.
        default_name: the name to uniquify when `name_or_scope` is None.
        values: tensors passed to the op; their graph is the one used.
        initializer, regularizer, caching_device, partitioner, custom_getter, dtype,
        use_resource, constraint: defaults for variables in the scope (a custom getter
            is chained with the enclosing scope's).
        reuse: True, None (inherit) or `AUTO_REUSE`; False means None. Reuse is inherited by
            nested scopes.
        auxiliary_name_scope: if False, the name scope is left as it is.

    Yields:
        The `VariableScope`.

    Raises:
        TypeError: if both `name_or_scope` and `default_name` are None, or `name_or_scope` is
            not a string or VariableScope.
        ValueError: if `reuse` is invalid, or True without `name_or_scope`.
    """

    def __init__(self, name_or_scope, default_name=None, values=None, initializer=None,
                 regularizer=None, caching_device=None, partitioner=None, custom_getter=None,
                 reuse=None, dtype=None, use_resource=None, constraint=None,
                 auxiliary_name_scope=True):
        if default_name is None and name_or_scope is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if reuse is False:
            reuse = None  # non-inheriting scopes are not allowed: False means None
        if not (reuse is True or reuse is None or reuse is AUTO_REUSE):
            raise ValueError("The reuse parameter must be True or False or None.")
        if not isinstance(auxiliary_name_scope, bool):
            raise TypeError("The auxiliary_name_scope must be `True` or `False`, while get "
                            f"{auxiliary_name_scope}")
        if name_or_scope is not None and not isinstance(name_or_scope, (VariableScope, str)):
            raise TypeError("VariableScope: name_or_scope must be a string or VariableScope.")
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._values = list(values) if values is not None else []
        self._scope_kwargs = dict(initializer=initializer, regularizer=regularizer,
                                  caching_device=caching_device, partitioner=partitioner,
                                  custom_getter=custom_getter, dtype=dtype,
                                  use_resource=use_resource, constraint=constraint)
        self._reuse = reuse
        self._auxiliary_name_scope = auxiliary_name_scope
        self._graph = _ops._get_graph_from_inputs(self._values)
        self._stack: list[contextlib.ExitStack] = []

    def __enter__(self):
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self._graph.as_default())
            scope = self._enter(stack)
        except BaseException:
            stack.close()
            raise
        self._stack.append(stack)
        return scope

    def __exit__(self, exc_type, exc_value, tb):
        return self._stack.pop().__exit__(exc_type, exc_value, tb)

    def _enter(self, stack):
        if self._auxiliary_name_scope:
            aux = None
        else:
            current = self._graph.get_name_scope()
            aux = _ops.name_scope(current + "/" if current else None)
        if self._name_or_scope is not None:
            if isinstance(self._name_or_scope, str):
                ns_name = self._name_or_scope
            else:
                ns_name = self._name_or_scope.name.split("/")[-1]
            if ns_name or aux is not None:
                entered = stack.enter_context(aux or _ops.name_scope(ns_name))
                if isinstance(self._name_or_scope, str):
                    old_name_scope = entered
                else:
                    old_name_scope = self._name_or_scope.original_name_scope
                return stack.enter_context(_pure_variable_scope(
                    self._name_or_scope, reuse=self._reuse, old_name_scope=old_name_scope,
                    **self._scope_kwargs))
            # Only entering the root variable scope ("") gets here.
            return stack.enter_context(_pure_variable_scope(
                self._name_or_scope, reuse=self._reuse, **self._scope_kwargs))
        if self._reuse:
            raise ValueError("reuse=True cannot be used without a name_or_scope")
        entered = stack.enter_context(aux or _ops.name_scope(self._default_name))
        unique_name = _get_unique_variable_scope(self._default_name)
        return stack.enter_context(_pure_variable_scope(
            unique_name, old_name_scope=entered, **self._scope_kwargs))


@contextlib.contextmanager
def variable_op_scope(values, name_or_scope, default_name=None, initializer=None,
                      regularizer=None, caching_device=None, partitioner=None, custom_getter=None,
                      reuse=None, dtype=None, use_resource=None, constraint=None):
    """Deprecated TF1 form of `variable_scope` with `values` first."""
    with variable_scope(name_or_scope, default_name=default_name, values=values,
                        initializer=initializer, regularizer=regularizer,
                        caching_device=caching_device, partitioner=partitioner,
                        custom_getter=custom_getter, reuse=reuse, dtype=dtype,
                        use_resource=use_resource, constraint=constraint) as scope:
        yield scope

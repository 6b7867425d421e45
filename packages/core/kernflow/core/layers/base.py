"""The base `Layer` and `InputSpec` of `kf.layers` (TF1 `tf.compat.v1.layers`).

Invariants of `Layer`:
  * ``_scope`` is the layer's `VariableScope`, fixed at the first call (or at construction with
    ``_scope=``): an unnamed layer takes ``variable_scope(None, default_name=<snake name>)``,
    hence "dense", "dense_1"...; a named one with ``_reuse`` re-enters ``variable_scope(name)``.
  * Variables are got with `get_variable` under ``_scope`` (reuse once built), so they are named
    "<scope>/<weight>"; ops are made under the scope's ``original_name_scope``.
  * ``_losses`` and ``_updates`` are also published to the REGULARIZATION_LOSSES and
    UPDATE_OPS collections of the graph, as TF1 does.
"""

from __future__ import annotations

import re

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.ops import variable_scope as _vs

__all__ = ["Layer", "InputSpec"]


def to_snake_case(name):
    """"Conv2DTranspose" -> "conv2d_transpose", as TF names layers."""
    s = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub("([a-z])([A-Z])", r"\1_\2", s).lower()
    return "private" + s if s[0] == "_" else s


def _unique_object_name(graph, base):
    """TF's backend.unique_object_name (not zero based): "dense_1", "dense_2"... per graph."""
    counts = graph.__dict__.setdefault("_kf_layer_name_uids", {})
    counts[base] = counts.get(base, 0) + 1
    return f"{base}_{counts[base]}"


def smart_cond(pred, true_fn, false_fn, name=None):
    """`true_fn()` or `false_fn()` when `pred` is known statically, else `kf.cond`."""
    value = constant_value(pred)
    if value is not None:
        return true_fn() if value else false_fn()
    from kernflow.core.ops import control_flow_ops
    return control_flow_ops.cond(pred, true_fn, false_fn, name=name)


def constant_value(pred):
    """The Python bool of `pred` (bool, int or constant tensor), or None when only known at run."""
    if isinstance(pred, (bool, int)):
        return bool(pred)
    if isinstance(pred, _ops.Tensor):
        v = tensor_util.constant_value(pred)
        return None if v is None else bool(v)
    if hasattr(pred, "value") and hasattr(pred, "initializer"):  # a Variable
        return None
    raise TypeError(f"`training` must be a Python bool or a bool Tensor, got {pred!r}")


class InputSpec:
    """The rank, dtype and axis sizes a layer accepts (TF1 `tf.layers.InputSpec`).

    Args:
        dtype: expected dtype of the input.
        shape: expected shape (None entries match anything).
        ndim: expected rank.
        max_ndim, min_ndim: bounds on the rank.
        axes: dict of axis -> expected size.
    """

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None, min_ndim=None,
                 axes=None):
        self.dtype = dtype
        self.shape = shape
        self.ndim = len(shape) if shape is not None else ndim
        self.max_ndim = max_ndim
        self.min_ndim = min_ndim
        self.axes = dict(axes or {})

    def __repr__(self):
        spec = [f"{k}={getattr(self, k)}" for k in ("dtype", "shape", "ndim", "max_ndim",
                                                     "min_ndim", "axes") if getattr(self, k)]
        return f"InputSpec({', '.join(spec)})"

    def assert_compatible(self, x, layer_name):
        """Raises ValueError when the tensor `x` does not satisfy this spec."""
        shape = x.shape
        rank = shape.rank
        where = f"Input 0 of layer {layer_name} is incompatible with the layer"
        if self.ndim is not None and rank is not None and rank != self.ndim:
            raise ValueError(f"{where}: expected ndim={self.ndim}, found ndim={rank}. Full shape "
                             f"received: {shape.as_list()}")
        if self.max_ndim is not None and rank is not None and rank > self.max_ndim:
            raise ValueError(f"{where}: expected max_ndim={self.max_ndim}, found ndim={rank}")
        if self.min_ndim is not None and rank is not None and rank < self.min_ndim:
            raise ValueError(f"{where}: expected min_ndim={self.min_ndim}, found ndim={rank}. "
                             f"Full shape received: {shape.as_list()}")
        if self.dtype is not None and x.dtype.base_dtype.name != _dtypes.as_dtype(self.dtype).name:
            raise ValueError(f"{where}: expected dtype={self.dtype}, found dtype={x.dtype.name}")
        if rank is None:
            return
        dims = shape.as_list()
        for axis, size in self.axes.items():
            if size is not None and dims[axis] not in (size, None):
                raise ValueError(f"{where}: expected axis {axis} of input shape to have value "
                                 f"{size} but received input with shape {dims}")
        if self.shape is not None:
            for want, got in zip(self.shape, dims):
                if want is not None and got is not None and want != got:
                    raise ValueError(f"{where}: expected shape={self.shape}, found shape={dims}")


class Layer:
    """Base layer class: variables under a variable scope, built on the first call.

    Subclasses implement `build(input_shape)` (creating weights with `add_weight`) and
    `call(inputs, ...)`.

    Args:
        trainable: whether the layer's variables are trainable (added to TRAINABLE_VARIABLES).
        name: the layer's name, also its variable scope; unnamed layers get a unique scope.
        dtype: dtype of the weights; None takes the dtype of the first input.
        activity_regularizer: fn(output) -> scalar loss, averaged over the batch.
        _scope: a variable scope (or name) to use instead of one made from `name`.
        _reuse: reuse the variables of the scope `name` (TF1's `reuse=` argument).
    """

    def __init__(self, trainable=True, name=None, dtype=None, activity_regularizer=None,
                 **kwargs):
        scope = kwargs.pop("_scope", None)
        self._reuse = kwargs.pop("_reuse", None)
        if kwargs:
            raise TypeError(f"Keyword argument not understood: {sorted(kwargs)}")
        self.trainable = trainable
        self.built = False
        self.input_spec = None
        self.activity_regularizer = activity_regularizer
        self._dtype = None if dtype is None else _dtypes.as_dtype(dtype).name
        self._trainable_weights, self._non_trainable_weights = [], []
        self._losses, self._updates = [], []
        self._init_set_name(name)
        self._scope = None
        self._current_scope = None
        if scope:
            with _vs.variable_scope(scope) as captured:
                self._scope = captured

    def _init_set_name(self, name):
        if isinstance(name, _vs.VariableScope):
            self._base_name = name.name
            self._name = _unique_object_name(_ops.get_default_graph(), self._snake_name())
        elif name:
            self._base_name = self._name = name
        else:
            self._base_name = self._snake_name()
            self._name = _unique_object_name(_ops.get_default_graph(), self._base_name)

    def _snake_name(self):
        return to_snake_case(type(self).__name__)

    # ------------------------------------------------------------------------------ properties
    name = property(lambda self: self._name, doc="The layer's name.")
    dtype = property(lambda self: self._dtype, doc="The dtype name of the layer's weights.")
    trainable_weights = property(lambda self: list(self._trainable_weights) if self.trainable
                                 else [])
    trainable_variables = trainable_weights
    losses = property(lambda self: list(self._losses), doc="Losses added by the layer.")
    updates = property(lambda self: list(self._updates), doc="Update ops of the layer.")

    @property
    def non_trainable_weights(self):
        """The non-trainable variables (all of them when the layer is not trainable)."""
        if self.trainable:
            return list(self._non_trainable_weights)
        return list(self._trainable_weights) + list(self._non_trainable_weights)

    non_trainable_variables = non_trainable_weights

    @property
    def weights(self):
        """trainable_weights + non_trainable_weights."""
        return self.trainable_weights + self.non_trainable_weights

    variables = weights

    @property
    def scope_name(self):
        if not self._scope:
            raise ValueError(f'No name available for layer scope because the layer "{self._name}"'
                             " has not been used yet. The scope name is determined the first "
                             "time the layer instance is called.")
        return self._scope.name

    def count_params(self):
        """Number of scalars in the layer's weights."""
        return sum(int(_prod(w.shape.as_list())) for w in self.weights)

    # ------------------------------------------------------------------------------ scoping
    def _set_scope(self, scope=None):
        if self._scope is not None:
            return
        if self._reuse:
            with _vs.variable_scope(scope if scope is not None else self._base_name) as captured:
                self._scope = captured
        else:
            with _vs.variable_scope(scope, default_name=self._base_name) as captured:
                self._scope = captured

    def _name_scope(self):
        return self._current_scope.original_name_scope

    # ------------------------------------------------------------------------------ weights
    def add_weight(self, name, shape, dtype=None, initializer=None, regularizer=None,
                   trainable=None, constraint=None, partitioner=None, **kwargs):
        """Creates (or, when reusing, gets) the variable "<scope>/<name>"; returns it.

        Args:
            name: variable name inside the layer's scope.
            shape: variable shape.
            dtype: defaults to the layer's dtype, else float32.
            initializer: initializer (default: the variable scope's, else glorot_uniform for
                floating dtypes and zeros for others, as TF1).
            regularizer: fn(variable) -> scalar loss, added to `losses` and to
                REGULARIZATION_LOSSES when the variable is newly created.
            trainable: default True; a non-trainable layer makes non-trainable variables.
            constraint: fn(variable value) -> projected value, kept on the variable.
            partitioner: optional partitioner (see `kf.get_variable`).
            **kwargs: passed on to `get_variable` (use_resource, synchronization...).
        """
        trainable = True if trainable is None else trainable
        graph = _ops.get_default_graph()
        existing = set(id(v) for v in graph.get_collection(_ops.GraphKeys.GLOBAL_VARIABLES))
        dtype = _dtypes.as_dtype(dtype or self._dtype or _dtypes.float32)
        self._set_scope(None)
        reuse = self.built or self._reuse
        with _vs.variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as scope:
            self._current_scope = scope
            with _ops.name_scope(self._name_scope()):
                if initializer is None:
                    initializer = scope.initializer or _default_initializer(dtype)
                variable = _vs.get_variable(
                    name, shape=shape, dtype=dtype, initializer=initializer,
                    trainable=trainable and self.trainable, constraint=constraint,
                    partitioner=partitioner, **kwargs)
                if regularizer and _is_new(variable, existing):
                    with _ops.name_scope(name + "/Regularizer"):
                        self.add_loss(regularizer(variable))
        trainable_vars = graph.get_collection(_ops.GraphKeys.TRAINABLE_VARIABLES)
        if trainable and self.trainable and _is_new(variable, set(id(v) for v in trainable_vars)):
            self._non_trainable_weights.append(variable)  # a custom getter made it untrainable
        elif trainable:
            self._trainable_weights.append(variable)
        else:
            self._non_trainable_weights.append(variable)
        return variable

    add_variable = add_weight

    def add_loss(self, losses, inputs=None):
        """Adds loss tensor(s) to the layer and to REGULARIZATION_LOSSES."""
        del inputs
        losses = [x for x in (losses if isinstance(losses, (list, tuple)) else [losses])
                  if x is not None]
        self._losses.extend(losses)
        _add_to_collection(losses, _ops.GraphKeys.REGULARIZATION_LOSSES)

    def add_update(self, updates, inputs=None):
        """Adds update op(s) (run them to update the layer's state), published to UPDATE_OPS."""
        del inputs
        updates = updates if isinstance(updates, (list, tuple)) else [updates]
        self._updates.extend(u for u in updates if u is not None)

    def get_losses_for(self, inputs):
        """All losses of the layer (kernflow keeps no per-input bookkeeping)."""
        del inputs
        return self.losses

    def get_updates_for(self, inputs):
        """All updates of the layer (kernflow keeps no per-input bookkeeping)."""
        del inputs
        return self.updates

    # ------------------------------------------------------------------------------ calling
    def build(self, input_shape):
        """Creates the layer's weights; called once, before the first `call`."""
        del input_shape
        self.built = True

    def call(self, inputs, **kwargs):
        """The layer's computation; override in subclasses."""
        return inputs

    def compute_output_shape(self, input_shape):
        """The output TensorShape for `input_shape` (override in subclasses)."""
        raise NotImplementedError(f"{type(self).__name__}.compute_output_shape")

    def __call__(self, inputs, *args, **kwargs):
        """Builds the layer on first use, then applies `call` inside the layer's scopes.

        Args:
            inputs: input tensor (or value convertible to one).
            *args, **kwargs: passed on to `call`; `scope` is reserved for the layer's scope.
        """
        scope = kwargs.pop("scope", None)
        self._set_scope(scope)
        reuse = True if self.built else self._reuse
        inputs = _convert_inputs(inputs)
        with _vs.variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as vscope:
            self._current_scope = vscope
            with _ops.name_scope(self._name_scope()):
                first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
                if not self.built:
                    if self._dtype is None and isinstance(first, _ops.Tensor):
                        self._dtype = first.dtype.base_dtype.name
                    self._assert_input_compatibility(inputs)
                    self.build(_input_shapes(inputs))
                    self.built = True
                self._assert_input_compatibility(inputs)
                outputs = self.call(inputs, *args, **kwargs)
                if self.activity_regularizer is not None:
                    self._handle_activity_regularization(outputs)
        _add_to_collection(self._updates, _ops.GraphKeys.UPDATE_OPS)
        return outputs

    apply = __call__

    def _assert_input_compatibility(self, inputs):
        if self.input_spec is None:
            return
        specs = self.input_spec if isinstance(self.input_spec, (list, tuple)) else [
            self.input_spec]
        xs = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        if len(specs) != len(xs):
            raise ValueError(f"Layer {self._name} expects {len(specs)} inputs, but it received "
                             f"{len(xs)} input tensors")
        for spec, x in zip(specs, xs):
            if spec is not None:
                spec.assert_compatible(x, self._name)

    def _handle_activity_regularization(self, outputs):
        from kernflow.core.ops import array_ops, math_ops
        for out in (outputs if isinstance(outputs, (list, tuple)) else [outputs]):
            with _ops.name_scope("ActivityRegularizer"):
                loss = self.activity_regularizer(out)
                batch = math_ops.cast(array_ops.shape(out)[0], loss.dtype)
                self.add_loss(math_ops.truediv(loss, batch))


def _default_initializer(dtype):
    from kernflow.core.ops import init_ops
    if dtype.is_floating:
        return init_ops.glorot_uniform_initializer()
    return init_ops.zeros_initializer()


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def _is_new(variable, existing_ids):
    parts = list(variable) if hasattr(variable, "_get_variable_list") else [variable]
    return all(id(v) not in existing_ids for v in parts)


def _add_to_collection(items, key):
    graph = _ops.get_default_graph()
    current = set(id(x) for x in graph.get_collection(key))
    for item in items:
        if id(item) not in current:
            graph.add_to_collection(key, item)
            current.add(id(item))


def _convert_inputs(inputs):
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(_convert_inputs(x) for x in inputs)
    if isinstance(inputs, _ops.Tensor):
        return inputs
    return _ops.convert_to_tensor(inputs)


def _input_shapes(inputs):
    if isinstance(inputs, (list, tuple)):
        return [x.shape for x in inputs]
    return inputs.shape if hasattr(inputs, "shape") else _ts.TensorShape(None)

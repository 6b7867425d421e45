"""RNN cells (`kf.nn.rnn_cell`, TF1 `tf.compat.v1.nn.rnn_cell` semantics).

A cell maps ``(inputs [batch, depth], state)`` to ``(output, new_state)``. As in TF 1.15 a cell
behaves like a `tf.layers.Layer`: its first call opens a variable scope named after the class
(``basic_lstm_cell``, uniquified like ``basic_lstm_cell_1``, or the ``scope`` argument) under the
current variable scope and creates the variables there (``rnn/basic_lstm_cell/kernel``); every
later call re-enters that scope with ``reuse=True`` and uses the same variables, wherever it is
called from. Wrappers (`DropoutWrapper`, `ResidualWrapper`, `DeviceWrapper`) open no scope of their
own, so the wrapped cell's variables keep their names.
"""

from __future__ import annotations

import collections
import numbers
import re

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import nest
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.ops import array_ops, init_ops, math_ops, nn_ops
from kernflow.core.ops import random_ops
from kernflow.core.ops import variable_scope as vs
from kernflow.core.ops.tensor_array_ops import TensorArray

__all__ = ["RNNCell", "LayerRNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell",
           "MultiRNNCell", "DropoutWrapper", "ResidualWrapper", "DeviceWrapper", "LSTMStateTuple",
           "assert_like_rnncell"]


def _to_snake_case(name):
    """TF's layer naming: BasicLSTMCell -> basic_lstm_cell."""
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()


def _last_dim(shape, what):
    dims = _ts.TensorShape(shape).as_list() if shape is not None else None
    if not dims or dims[-1] is None:
        raise ValueError(f"Expected {what}.shape[-1] to be known, saw shape: {shape}")
    return int(dims[-1])


def _shape_list(size):
    """A state/output size (int, TensorShape or list) as a list of ints/None."""
    if isinstance(size, numbers.Integral):
        return [int(size)]
    return _ts.TensorShape(size).as_list()


def _zeros(batch_size, size, dtype):
    """zeros([batch_size] + size) with the static shape set where batch_size is a Tensor."""
    dims = _shape_list(size)
    if isinstance(batch_size, numbers.Integral) and None not in dims:
        return array_ops.zeros([int(batch_size)] + dims, dtype=dtype)
    batch = _ops.convert_to_tensor(batch_size, dtype=_dtypes.int32)
    shape = array_ops.concat([array_ops.reshape(batch, [1]),
                              _ops.convert_to_tensor(dims, dtype=_dtypes.int32)], 0)
    out = array_ops.zeros(shape, dtype=dtype)
    static_batch = int(batch_size) if isinstance(batch_size, numbers.Integral) else None
    out.set_shape([static_batch] + dims)
    return out


def zero_state_tensors(state_size, batch_size, dtype):
    """Zeros shaped like `state_size` (a nested structure of sizes) for `batch_size` rows."""
    return nest.map_structure(lambda s: _zeros(batch_size, s, dtype), state_size)


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """The state of an LSTM cell: ``c`` the memory cell, ``h`` the output (TF's order)."""

    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype != h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


def assert_like_rnncell(cell_name, cell):
    """Raises TypeError unless `cell` has output_size, state_size, zero_state and is callable."""
    missing = [a for a in ("output_size", "state_size", "zero_state") if not hasattr(cell, a)]
    if not callable(cell):
        missing.append("__call__")
    if missing:
        raise TypeError(f"The argument {cell_name!r} ({cell}) is not an RNNCell: "
                        f"{', '.join(missing)} missing.")


class RNNCell:
    """Abstract RNN cell with TF1 layer scoping (see the module docstring).

    Subclasses define `state_size`, `output_size`, `build(inputs_shape)` (creating variables with
    `add_variable`) and `call(inputs, state)`.
    """

    def __init__(self, trainable=True, name=None, dtype=None, _reuse=None, **kwargs):
        if kwargs:
            raise TypeError(f"Unexpected keyword arguments: {sorted(kwargs)}")
        self._trainable = trainable
        self._name = name
        self._base_name = name or _to_snake_case(type(self).__name__)
        self._dtype = _dtypes.as_dtype(dtype) if dtype is not None else None
        self._reuse = _reuse
        self._scope = None
        self.built = False
        self._variables = []

    @property
    def state_size(self):
        raise NotImplementedError("Abstract method")

    @property
    def output_size(self):
        raise NotImplementedError("Abstract method")

    @property
    def dtype(self):
        return self._dtype

    @property
    def name(self):
        return self._scope.name if self._scope is not None else self._base_name

    @property
    def scope_name(self):
        return self._scope.name if self._scope is not None else None

    @property
    def variables(self):
        return list(self._variables)

    weights = variables

    @property
    def trainable_variables(self):
        return list(self._variables) if self._trainable else []

    trainable_weights = trainable_variables

    def build(self, inputs_shape):
        del inputs_shape
        self.built = True

    def call(self, inputs, state):
        raise NotImplementedError("Abstract method")

    def add_variable(self, name, shape, dtype=None, initializer=None, trainable=None):
        """Creates (or, under reuse, finds) a variable in the cell's scope.

        The variable and its initializer are built outside any while loop or cond being built
        (`init_scope` clears the control-flow context, as TF1's), so a cell first called inside
        `dynamic_rnn`'s loop owns ordinary root-frame variables.
        """
        with _ops.init_scope():
            var = vs.get_variable(name, shape=shape, dtype=dtype or self._dtype,
                                  initializer=initializer,
                                  trainable=self._trainable if trainable is None else trainable)
        self._variables.append(var)
        return var

    add_weight = add_variable

    def _set_scope(self, scope):
        if self._scope is not None:
            return
        if self._reuse:
            ctx = vs.variable_scope(scope if scope is not None else self._base_name)
        else:
            ctx = vs.variable_scope(scope, default_name=self._base_name)
        with ctx as captured:
            self._scope = captured

    def __call__(self, inputs, state, scope=None):
        """Runs the cell on `inputs` [batch, depth] and `state`; returns (output, new_state)."""
        self._set_scope(scope)
        if self._dtype is None:
            first = nest.flatten(inputs)[0]
            self._dtype = _ops.convert_to_tensor(first).dtype.base_dtype
        with vs.variable_scope(self._scope, reuse=True if self.built else self._reuse,
                               auxiliary_name_scope=False):
            with _ops.name_scope(self._scope.original_name_scope):
                if not self.built:
                    shapes = nest.map_structure(lambda x: _ops.convert_to_tensor(x).shape, inputs)
                    self.build(shapes)
                    self.built = True
                return self.call(inputs, state)

    def zero_state(self, batch_size, dtype):
        """Zero-filled state tensor(s) for `batch_size` rows, structured like `state_size`."""
        with _ops.name_scope(type(self).__name__ + "ZeroState"):
            return zero_state_tensors(self.state_size, batch_size, dtype)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        if inputs is not None:
            inputs = _ops.convert_to_tensor(inputs)
            batch_size = array_ops.shape(inputs)[0]
            dtype = inputs.dtype
        return self.zero_state(batch_size, dtype)


LayerRNNCell = RNNCell


def _linear(args, kernel, bias):
    out = math_ops.matmul(array_ops.concat(args, 1), kernel)
    return nn_ops.bias_add(out, bias)


def _activation(fn):
    return math_ops.tanh if fn is None else fn


class BasicRNNCell(RNNCell):
    """output = new_state = activation(W [inputs, state] + b); variables `kernel`, `bias`."""

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = num_units
        self._activation = _activation(activation)

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, "inputs")
        self._kernel = self.add_variable("kernel", [depth + self._num_units, self._num_units])
        self._bias = self.add_variable("bias", [self._num_units],
                                       initializer=init_ops.zeros_initializer())

    def call(self, inputs, state):
        output = self._activation(_linear([inputs, state], self._kernel, self._bias))
        return output, output


class GRUCell(RNNCell):
    """Gated recurrent unit (Cho et al. 2014), TF's formulation.

    r, u = sigmoid(W_g [x, h] + b_g) (gates/kernel, gates/bias, bias initialised to 1);
    c = activation(W_c [x, r * h] + b_c) (candidate/kernel, candidate/bias);
    h' = u * h + (1 - u) * c.
    """

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name=None, dtype=None, **kwargs):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = num_units
        self._activation = _activation(activation)
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, "inputs")
        n = self._num_units
        self._gate_kernel = self.add_variable("gates/kernel", [depth + n, 2 * n],
                                              initializer=self._kernel_initializer)
        self._gate_bias = self.add_variable(
            "gates/bias", [2 * n],
            initializer=self._bias_initializer or init_ops.constant_initializer(1.0))
        self._candidate_kernel = self.add_variable("candidate/kernel", [depth + n, n],
                                                   initializer=self._kernel_initializer)
        self._candidate_bias = self.add_variable(
            "candidate/bias", [n], initializer=self._bias_initializer or init_ops.zeros_initializer())

    def call(self, inputs, state):
        value = math_ops.sigmoid(_linear([inputs, state], self._gate_kernel, self._gate_bias))
        r, u = array_ops.split(value, 2, axis=1)
        c = self._activation(_linear([inputs, r * state], self._candidate_kernel,
                                     self._candidate_bias))
        new_h = u * state + (1 - u) * c
        return new_h, new_h


def _split_state(state, sizes):
    """A concatenated (state_is_tuple=False) state split along axis 1."""
    return array_ops.split(state, sizes, axis=1)


class BasicLSTMCell(RNNCell):
    """LSTM without peepholes or projection (Zaremba et al. 2014), gates in TF's order i, j, f, o.

    c' = c * sigmoid(f + forget_bias) + sigmoid(i) * activation(j); h' = activation(c') * sigmoid(o).
    """

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None,
                 reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = num_units
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, "inputs")
        n = self._num_units
        self._kernel = self.add_variable("kernel", [depth + n, 4 * n])
        self._bias = self.add_variable("bias", [4 * n], initializer=init_ops.zeros_initializer())

    def call(self, inputs, state):
        if self._state_is_tuple:
            c, h = state
        else:
            c, h = _split_state(state, [self._num_units, self._num_units])
        i, j, f, o = array_ops.split(_linear([inputs, h], self._kernel, self._bias), 4, axis=1)
        new_c = (c * math_ops.sigmoid(f + self._forget_bias)
                 + math_ops.sigmoid(i) * self._activation(j))
        new_h = self._activation(new_c) * math_ops.sigmoid(o)
        if self._state_is_tuple:
            return new_h, LSTMStateTuple(new_c, new_h)
        return new_h, array_ops.concat([new_c, new_h], 1)


class LSTMCell(RNNCell):
    """LSTM with optional peepholes (w_f_diag, w_i_diag, w_o_diag), cell clipping and a projection
    (projection/kernel) of the output, as TF1's LSTMCell (Hochreiter 1997; Sak et al. 2014).
    """

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None,
                 num_proj=None, proj_clip=None, num_unit_shards=None, num_proj_shards=None,
                 forget_bias=1.0, state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None, **kwargs):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        if num_unit_shards is not None or num_proj_shards is not None:
            raise NotImplementedError("num_unit_shards/num_proj_shards are not supported; use a "
                                      "partitioner on the variable scope")
        self._num_units = num_units
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = num_proj
        self._proj_clip = proj_clip
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        h = self._num_proj or self._num_units
        if self._state_is_tuple:
            return LSTMStateTuple(self._num_units, h)
        return self._num_units + h

    @property
    def output_size(self):
        return self._num_proj or self._num_units

    def build(self, inputs_shape):
        depth = _last_dim(inputs_shape, "inputs")
        n = self._num_units
        h = self._num_proj or n
        self._kernel = self.add_variable("kernel", [depth + h, 4 * n], initializer=self._initializer)
        self._bias = self.add_variable("bias", [4 * n], initializer=init_ops.zeros_initializer())
        if self._use_peepholes:
            self._w_f_diag = self.add_variable("w_f_diag", [n], initializer=self._initializer)
            self._w_i_diag = self.add_variable("w_i_diag", [n], initializer=self._initializer)
            self._w_o_diag = self.add_variable("w_o_diag", [n], initializer=self._initializer)
        if self._num_proj is not None:
            self._proj_kernel = self.add_variable("projection/kernel", [n, self._num_proj],
                                                  initializer=self._initializer)

    def call(self, inputs, state):
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            c_prev, m_prev = _split_state(state, [self._num_units, self._num_proj or self._num_units])
        sigmoid, act = math_ops.sigmoid, self._activation
        i, j, f, o = array_ops.split(_linear([inputs, m_prev], self._kernel, self._bias), 4, axis=1)
        if self._use_peepholes:
            c = (sigmoid(f + self._forget_bias + self._w_f_diag * c_prev) * c_prev
                 + sigmoid(i + self._w_i_diag * c_prev) * act(j))
        else:
            c = sigmoid(f + self._forget_bias) * c_prev + sigmoid(i) * act(j)
        if self._cell_clip is not None:
            c = math_ops.clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o_diag * c) * act(c)
        else:
            m = sigmoid(o) * act(c)
        if self._num_proj is not None:
            m = math_ops.matmul(m, self._proj_kernel)
            if self._proj_clip is not None:
                m = math_ops.clip_by_value(m, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c, m) if self._state_is_tuple else array_ops.concat([c, m], 1)
        return m, new_state


class MultiRNNCell(RNNCell):
    """Stacks cells: cell i runs in variable scope ``cell_i`` and feeds its output to cell i + 1."""

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not nest.is_nested(cells):
            raise TypeError(f"cells must be a list or tuple, but saw: {cells}.")
        self._cells = list(cells)
        self._state_is_tuple = state_is_tuple
        if not state_is_tuple and any(nest.is_nested(c.state_size) for c in self._cells):
            raise ValueError("Some cells return tuples of states, but the flag state_is_tuple is "
                             f"not set. State sizes are: {[c.state_size for c in self._cells]}")

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(cell.state_size for cell in self._cells)
        return sum(cell.state_size for cell in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    @property
    def variables(self):
        return [v for cell in self._cells for v in cell.variables]

    weights = variables

    @property
    def trainable_variables(self):
        return [v for cell in self._cells for v in cell.trainable_variables]

    trainable_weights = trainable_variables

    def zero_state(self, batch_size, dtype):
        with _ops.name_scope(type(self).__name__ + "ZeroState"):
            if self._state_is_tuple:
                return tuple(cell.zero_state(batch_size, dtype) for cell in self._cells)
            return zero_state_tensors(self.state_size, batch_size, dtype)

    def call(self, inputs, state):
        if self._state_is_tuple:
            if not nest.is_nested(state) or len(state) != len(self._cells):
                raise ValueError(f"Expected state to be a tuple of length {len(self._cells)}, "
                                 f"but received: {state}")
            states = list(state)
        else:
            states = _split_state(state, [cell.state_size for cell in self._cells])
        cur_inp, new_states = inputs, []
        for i, cell in enumerate(self._cells):
            with vs.variable_scope(f"cell_{i}"):
                cur_inp, new_state = cell(cur_inp, states[i])
            new_states.append(new_state)
        if self._state_is_tuple:
            return cur_inp, tuple(new_states)
        return cur_inp, array_ops.concat(new_states, 1)


class _Wrapper(RNNCell):
    """Base of the wrappers: no scope of their own; sizes and zero_state are the cell's."""

    def __init__(self, cell):
        super().__init__()
        assert_like_rnncell("cell", cell)
        self._cell = cell

    @property
    def wrapped_cell(self):
        return self._cell

    @property
    def state_size(self):
        return self._cell.state_size

    @property
    def output_size(self):
        return self._cell.output_size

    @property
    def variables(self):
        return self._cell.variables

    weights = variables

    @property
    def trainable_variables(self):
        return self._cell.trainable_variables

    trainable_weights = trainable_variables

    def zero_state(self, batch_size, dtype):
        with _ops.name_scope(type(self).__name__ + "ZeroState"):
            return self._cell.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        return self._call_wrapped(inputs, state, scope)


def _default_dropout_state_filter_visitor(substate):
    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)   # TF never drops the LSTM memory cell
    return not isinstance(substate, TensorArray)


def _keep_mask(visitor, structure):
    """A structure like `structure` of bools: which parts the filter visitor lets be dropped.

    As TF's ``get_traverse_shallow_structure``: True on a nested value descends into it, False
    keeps all of it, and a structure of bools answers for each child.
    """
    answer = visitor(structure)
    if not nest.is_nested(structure):
        return bool(answer)
    children = list(structure)
    if isinstance(answer, bool):
        if not answer:
            return nest.map_structure(lambda _: False, structure)
        items = [_keep_mask(visitor, c) for c in children]
    else:
        items = [nest.map_structure(lambda _, a=a: bool(a), c) for a, c in zip(answer, children)]
    return type(structure)(*items) if hasattr(structure, "_fields") else type(structure)(items)


def _should_dropout(p):
    return not (isinstance(p, numbers.Real) and p == 1)


class DropoutWrapper(_Wrapper):
    """Dropout on the cell's inputs, outputs and (filtered) state.

    Args:
        cell: the wrapped RNNCell.
        input_keep_prob, output_keep_prob, state_keep_prob: keep probabilities (floats or scalar
            Tensors); 1.0 adds no op.
        variational_recurrent: one dropout mask per wrapper (Gal & Ghahramani 2016), shared by
            every time step and, as TF, by every row of the batch ([1, size] noise); needs
            `dtype`, and `input_size` when input_keep_prob < 1.
        input_size: the (nested) depth of the inputs, for variational input dropout.
        dtype: dtype of the variational noise.
        seed: an integer seed; each dropout site derives its own from it.
        dropout_state_filter_visitor: substate -> bool (or a structure of bools) choosing which
            parts of the state are dropped; by default all but an LSTMStateTuple's ``c``.
    """

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None,
                 dropout_state_filter_visitor=None):
        super().__init__(cell)
        for p, what in ((input_keep_prob, "input"), (output_keep_prob, "output"),
                        (state_keep_prob, "state")):
            if isinstance(p, numbers.Real) and not 0 < p <= 1:
                raise ValueError(f"Parameter {what}_keep_prob must be between 0 and 1: {p}")
        self._input_keep_prob = input_keep_prob
        self._output_keep_prob = output_keep_prob
        self._state_keep_prob = state_keep_prob
        self._variational = variational_recurrent
        self._seed = seed
        self._visitor = dropout_state_filter_visitor or _default_dropout_state_filter_visitor
        self._noise = {}
        if variational_recurrent:
            if dtype is None:
                raise ValueError("When variational_recurrent=True, dtype must be provided")
            if _should_dropout(input_keep_prob):
                if input_size is None:
                    raise ValueError("When variational_recurrent=True and input_keep_prob < 1.0 "
                                     "or is unknown, input_size must be provided")
                self._noise["input"] = self._batch_noise(input_size, dtype, 0)
            self._noise["state"] = self._batch_noise(cell.state_size, dtype, 1)
            self._noise["output"] = self._batch_noise(cell.output_size, dtype, 2)

    def _site_seed(self, salt, index):
        return None if self._seed is None else (self._seed * 1009 + salt * 101 + index) % (2 ** 31)

    def _batch_noise(self, size, dtype, salt):
        return [random_ops.random_uniform([1] + _shape_list(s), dtype=dtype,
                                          seed=self._site_seed(salt, i))
                for i, s in enumerate(nest.flatten(size))]

    def _dropout(self, values, kind, keep_prob, salt, mask=None):
        """Dropout on each leaf of `values` (only where `mask` says so)."""
        flat = nest.flatten(values)
        keep = nest.flatten(mask) if mask is not None else [True] * len(flat)
        noise = self._noise.get(kind)
        out = []
        for i, (v, k) in enumerate(zip(flat, keep)):
            if not k:
                out.append(v)
            elif self._variational:
                binary = math_ops.floor(keep_prob + noise[i])
                out.append(math_ops.divide(v, keep_prob) * binary)
            else:
                out.append(nn_ops.dropout(v, keep_prob=keep_prob, seed=self._site_seed(salt, i)))
        return nest.pack_sequence_as(values, out)

    def _call_wrapped(self, inputs, state, scope):
        if _should_dropout(self._input_keep_prob):
            inputs = self._dropout(inputs, "input", self._input_keep_prob, 0)
        output, new_state = self._cell(inputs, state, scope=scope)
        if _should_dropout(self._state_keep_prob):
            new_state = self._dropout(new_state, "state", self._state_keep_prob, 1,
                                      mask=_keep_mask(self._visitor, new_state))
        if _should_dropout(self._output_keep_prob):
            output = self._dropout(output, "output", self._output_keep_prob, 2)
        return output, new_state


class ResidualWrapper(_Wrapper):
    """output = residual_fn(inputs, cell_output), by default inputs + cell_output."""

    def __init__(self, cell, residual_fn=None):
        super().__init__(cell)
        self._residual_fn = residual_fn

    def _call_wrapped(self, inputs, state, scope):
        output, new_state = self._cell(inputs, state, scope=scope)
        if self._residual_fn is not None:
            return self._residual_fn(inputs, output), new_state

        def add(inp, out):
            inp, out = _ops.convert_to_tensor(inp), _ops.convert_to_tensor(out)
            if not inp.shape.is_compatible_with(out.shape):
                raise ValueError(f"ResidualWrapper: input shape {inp.shape} and output shape "
                                 f"{out.shape} differ")
            return inp + out
        nest.assert_same_structure(inputs, output)
        return nest.map_structure(add, inputs, output), new_state


class DeviceWrapper(_Wrapper):
    """Runs the cell (and builds its zero state) on `device`."""

    def __init__(self, cell, device):
        super().__init__(cell)
        self._device = device

    def zero_state(self, batch_size, dtype):
        with _ops.name_scope(type(self).__name__ + "ZeroState"), _ops.device(self._device):
            return self._cell.zero_state(batch_size, dtype)

    def _call_wrapped(self, inputs, state, scope):
        with _ops.device(self._device):
            return self._cell(inputs, state, scope=scope)

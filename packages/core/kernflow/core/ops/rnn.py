"""RNN drivers (TF1 `tf.nn.dynamic_rnn`, `static_rnn`, `bidirectional_dynamic_rnn`,
`static_bidirectional_rnn`, `raw_rnn`).

`dynamic_rnn` is one `while_loop` over time with the inputs in TensorArrays, as TF 1.15: with
`sequence_length`, a row past its length gets zero outputs and keeps its state (``where`` on
``time >= sequence_length``), and the loop stops after the longest sequence (outputs of later
steps are the zero-filled unwritten TensorArray elements). `static_rnn` unrolls the cell in
Python, reusing its variables.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import nest
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.ops import array_ops, control_flow_v1, math_ops
from kernflow.core.ops import rnn_cell_impl
from kernflow.core.ops import variable_scope as vs
from kernflow.core.ops.tensor_array_ops import TensorArray

__all__ = ["dynamic_rnn", "static_rnn", "bidirectional_dynamic_rnn", "static_bidirectional_rnn",
           "raw_rnn", "reverse_sequence"]


# ------------------------------------------------------------------------------ helpers
def _dims(t):
    shape = t.shape
    return None if shape.rank is None else shape.as_list()


def _transpose_batch_time(x):
    """[batch, time, ...] <-> [time, batch, ...]."""
    dims = _dims(x)
    if dims is None:
        raise ValueError(f"Expected input tensor {x} to have a known rank")
    if len(dims) < 2:
        raise ValueError(f"Expected input tensor {x} to have rank at least 2, but saw shape: "
                         f"{x.shape}")
    return array_ops.transpose(x, [1, 0] + list(range(2, len(dims))))


def _best_effort_batch_size(flat_input, axis):
    """The static batch size of the first input that has one, else shape(input)[axis]."""
    for x in flat_input:
        dims = _dims(x)
        if dims is None:
            continue
        if len(dims) <= axis:
            raise ValueError(f"Expected input tensor {x} to have rank at least {axis + 1}")
        if dims[axis] is not None:
            return dims[axis]
    return array_ops.shape(flat_input[0])[axis]


def _infer_state_dtype(explicit_dtype, state):
    if explicit_dtype is not None:
        return _dtypes.as_dtype(explicit_dtype)
    flat = nest.flatten(state)
    dtypes = {s.dtype.base_dtype for s in flat}
    if len(dtypes) != 1:
        raise ValueError(f"State has tensors of different inferred dtypes: {sorted(map(str, dtypes))}. "
                         "Unable to infer a single representative dtype.")
    return dtypes.pop()


def _initial_state(cell, initial_state, batch_size, dtype):
    if initial_state is not None:
        return initial_state
    if not dtype:
        raise ValueError("If there is no initial_state, you must give a dtype.")
    return cell.zero_state(batch_size, dtype)


def _check_sequence_length(sequence_length):
    if sequence_length is None:
        return None
    sequence_length = math_ops.cast(sequence_length, _dtypes.int32)
    if sequence_length.shape.rank not in (None, 1):
        raise ValueError("sequence_length must be a vector of length batch_size, but saw shape: "
                         f"{sequence_length.shape}")
    return array_ops.identity(sequence_length, name="sequence_length")


def _copy_through(cond, old, new):
    """where(cond, old, new) on each leaf (TensorArrays and scalars take `new`)."""
    def one(o, n):
        if isinstance(o, TensorArray) or n.shape.rank == 0:
            return n
        out = math_ops.where(cond, o, n)
        out.set_shape(o.shape)
        return out
    return nest.map_structure(one, old, new)


def _rnn_step(time, sequence_length, zero_output, state, call_cell):
    """One masked step: past its length a row gets zero output and keeps its state."""
    new_output, new_state = call_cell()
    nest.assert_same_structure(zero_output, new_output, check_types=False)
    nest.assert_same_structure(state, new_state, check_types=False)
    copy_cond = time >= sequence_length
    return (_copy_through(copy_cond, zero_output, new_output),
            _copy_through(copy_cond, state, new_state))


def _zero_output(cell, batch_size, dtype):
    return rnn_cell_impl.zero_state_tensors(cell.output_size, batch_size, dtype)


def reverse_sequence(input, seq_lengths, seq_axis=1, batch_axis=0):  # noqa: A002 - TF's name
    """Reverses the first ``seq_lengths[b]`` entries of each row b along `seq_axis`.

    Built from gather_nd (differentiable); only the layouts (seq_axis, batch_axis) = (1, 0) and
    (0, 1) are supported.

    Raises:
        ValueError: for other axes.
    """
    if (seq_axis, batch_axis) not in ((1, 0), (0, 1)):
        raise ValueError(f"reverse_sequence supports seq_axis/batch_axis 1/0 or 0/1, got "
                         f"{seq_axis}/{batch_axis}")
    with _ops.name_scope(None, "ReverseSequence", [input, seq_lengths]):
        x = _ops.convert_to_tensor(input)
        lengths = math_ops.cast(seq_lengths, _dtypes.int32)
        shape = array_ops.shape(x)
        steps = array_ops.range(shape[seq_axis])
        batch = array_ops.range(shape[batch_axis])
        if seq_axis == 0:   # indices [T, B, 2] of (source time, b)
            t, ln = array_ops.expand_dims(steps, 1), array_ops.expand_dims(lengths, 0)
            src = math_ops.where(t < ln, ln - 1 - t, t + 0 * ln)
            b = array_ops.expand_dims(batch, 0) + 0 * t
            idx = array_ops.stack([src, b], axis=-1)
        else:               # indices [B, T, 2] of (b, source time)
            t, ln = array_ops.expand_dims(steps, 0), array_ops.expand_dims(lengths, 1)
            src = math_ops.where(t < ln, ln - 1 - t, t + 0 * ln)
            b = array_ops.expand_dims(batch, 1) + 0 * t
            idx = array_ops.stack([b, src], axis=-1)
        out = array_ops.gather_nd(x, idx)
        out.set_shape(x.shape)
        return out


def _reverse(x, lengths, seq_axis, batch_axis):
    if lengths is None:
        return array_ops.reverse(x, axis=[seq_axis])
    return reverse_sequence(x, lengths, seq_axis=seq_axis, batch_axis=batch_axis)


# ------------------------------------------------------------------------------ dynamic_rnn
def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations=None, swap_memory=False, time_major=False, scope=None):
    """Runs `cell` over the time axis of `inputs` in a `while_loop` (TF1 `tf.nn.dynamic_rnn`).

    Args:
        cell: an RNNCell.
        inputs: a Tensor [batch, time, ...] ([time, batch, ...] if time_major), or a nested
            structure of such Tensors.
        sequence_length: optional int vector [batch]; steps at and past a row's length output
            zeros and copy the state through.
        initial_state: the initial state (default: `cell.zero_state`, which needs `dtype`).
        dtype: the dtype of the initial state and outputs.
        parallel_iterations: iterations run in parallel (default 32).
        swap_memory: accepted for compatibility.
        time_major: whether inputs and outputs are [time, batch, ...].
        scope: the variable scope (default "rnn").

    Returns:
        (outputs, final_state): outputs structured like `cell.output_size`, each [batch, time,
        depth] (or time-major); final_state structured like `cell.state_size`.

    Raises:
        TypeError: `cell` is not an RNNCell.
        ValueError: no dtype without initial_state; inputs of unknown depth or rank < 3.
    """
    rnn_cell_impl.assert_like_rnncell("cell", cell)
    with vs.variable_scope(scope or "rnn"):
        flat_input = [_ops.convert_to_tensor(x) for x in nest.flatten(inputs)]
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        sequence_length = _check_sequence_length(sequence_length)
        batch_size = _best_effort_batch_size(flat_input, 1)
        state = _initial_state(cell, initial_state, batch_size, dtype)
        inputs = nest.pack_sequence_as(inputs, flat_input)
        outputs, final_state = _dynamic_rnn_loop(cell, inputs, state, parallel_iterations or 32,
                                                 swap_memory, sequence_length, dtype)
        if not time_major:
            outputs = nest.map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _dynamic_rnn_loop(cell, inputs, state, parallel_iterations, swap_memory, sequence_length,
                      dtype):
    flat_input = nest.flatten(inputs)
    flat_output_size = nest.flatten(cell.output_size)
    shapes = [_dims(x) for x in flat_input]
    for x, dims in zip(flat_input, shapes):
        if dims is None or len(dims) < 3:
            raise ValueError(f"Input {x} must have rank at least 3 (time, batch, depth), saw "
                             f"{x.shape}")
        if dims[2] is None:
            raise ValueError(f"Input size (depth of inputs) must be accessible via shape "
                             f"inference, but saw value None: {x}")
    time_steps = array_ops.shape(flat_input[0])[0]
    const_time_steps, const_batch_size = shapes[0][0], shapes[0][1]
    batch_size = _best_effort_batch_size(flat_input, 1)
    out_dtype = _infer_state_dtype(dtype, state)
    zero_output = _zero_output(cell, batch_size, out_dtype)
    if sequence_length is not None:
        loop_bound = math_ops.minimum(time_steps,
                                      math_ops.maximum(1, math_ops.reduce_max(sequence_length)))
    else:
        loop_bound = time_steps
    time = _ops.convert_to_tensor(0, dtype=_dtypes.int32, name="time")
    output_ta = tuple(
        TensorArray(out_dtype, size=time_steps, tensor_array_name=f"dynamic_rnn/output_{i}",
                    element_shape=[const_batch_size] + rnn_cell_impl._shape_list(size))
        for i, size in enumerate(flat_output_size))
    input_ta = tuple(
        TensorArray(x.dtype, size=time_steps, tensor_array_name=f"dynamic_rnn/input_{i}",
                    element_shape=dims[1:]).unstack(x)
        for i, (x, dims) in enumerate(zip(flat_input, shapes)))

    def time_step(t, output_ta_t, state):
        input_t = [ta.read(t) for ta in input_ta]
        for x, dims in zip(input_t, shapes):
            x.set_shape(dims[1:])
        input_t = nest.pack_sequence_as(inputs, input_t)

        def call_cell():
            return cell(input_t, state)
        if sequence_length is not None:
            output, new_state = _rnn_step(t, sequence_length, zero_output, state, call_cell)
        else:
            output, new_state = call_cell()
        output_ta_t = tuple(ta.write(t, out) for ta, out in zip(output_ta_t, nest.flatten(output)))
        return t + 1, output_ta_t, new_state

    _, output_final_ta, final_state = control_flow_v1.while_loop(
        lambda t, *_: t < loop_bound, time_step, (time, output_ta, state),
        parallel_iterations=parallel_iterations, swap_memory=swap_memory,
        maximum_iterations=time_steps)
    final_outputs = []
    for ta, size in zip(output_final_ta, flat_output_size):
        out = ta.stack()
        out.set_shape([const_time_steps, const_batch_size] + rnn_cell_impl._shape_list(size))
        final_outputs.append(out)
    return nest.pack_sequence_as(cell.output_size, final_outputs), final_state


# ------------------------------------------------------------------------------ static_rnn
def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
    """Unrolls `cell` over a Python list of inputs (TF1 `tf.nn.static_rnn`).

    Args:
        cell: an RNNCell.
        inputs: a list of T Tensors [batch, depth] (or nested structures of them).
        initial_state, dtype, sequence_length, scope: as `dynamic_rnn`.

    Returns:
        (outputs, final_state): a list of T outputs and the final state.

    Raises:
        TypeError: cell is not an RNNCell or inputs not a sequence.
        ValueError: empty inputs, or no dtype without initial_state.
    """
    rnn_cell_impl.assert_like_rnncell("cell", cell)
    if not nest.is_nested(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    outputs = []
    with vs.variable_scope(scope or "rnn") as varscope:
        first = inputs
        while nest.is_nested(first):
            first = first[0]
        first = _ops.convert_to_tensor(first)
        batch_size = _best_effort_batch_size([first], 0)
        state = _initial_state(cell, initial_state, batch_size, dtype)
        sequence_length = _check_sequence_length(sequence_length)
        if sequence_length is not None:
            zero_output = _zero_output(cell, batch_size, _infer_state_dtype(dtype, state))
        for time, input_ in enumerate(inputs):
            if time > 0:
                varscope.reuse_variables()

            def call_cell(input_=input_, state=state):
                return cell(input_, state)
            if sequence_length is not None:
                output, state = _rnn_step(time, sequence_length, zero_output, state, call_cell)
            else:
                output, state = call_cell()
            outputs.append(output)
        return outputs, state


# ------------------------------------------------------------------------------ bidirectional
def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None, dtype=None,
                              parallel_iterations=None, swap_memory=False, time_major=False,
                              scope=None):
    """A forward and a backward `dynamic_rnn` (TF1 `tf.nn.bidirectional_dynamic_rnn`).

    The backward cell reads each sequence reversed within its length; its outputs are reversed
    back. Variables live under ``<scope or bidirectional_rnn>/fw`` and ``.../bw``.

    Returns:
        ((output_fw, output_bw), (output_state_fw, output_state_bw)).
    """
    rnn_cell_impl.assert_like_rnncell("cell_fw", cell_fw)
    rnn_cell_impl.assert_like_rnncell("cell_bw", cell_bw)
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)

    def rev(structure):
        return nest.map_structure(lambda x: _reverse(x, seq_len, time_axis, batch_axis),
                                  structure)

    with vs.variable_scope(scope or "bidirectional_rnn"):
        with vs.variable_scope("fw") as fw_scope:
            output_fw, state_fw = dynamic_rnn(
                cell_fw, inputs, sequence_length=sequence_length, initial_state=initial_state_fw,
                dtype=dtype, parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                time_major=time_major, scope=fw_scope)
        seq_len = None if sequence_length is None else math_ops.cast(sequence_length, _dtypes.int32)
        with vs.variable_scope("bw") as bw_scope:
            tmp, state_bw = dynamic_rnn(
                cell_bw, rev(inputs), sequence_length=sequence_length,
                initial_state=initial_state_bw, dtype=dtype,
                parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                time_major=time_major, scope=bw_scope)
    return (output_fw, rev(tmp)), (state_fw, state_bw)


def _reverse_seq(input_seq, lengths):
    """A Python list of time steps reversed (within `lengths` per row when given)."""
    if lengths is None:
        return list(reversed(input_seq))
    flat_steps = [nest.flatten(x) for x in input_seq]
    columns = []
    for parts in zip(*flat_steps):
        joined = array_ops.stack(list(parts), axis=0)
        columns.append(array_ops.unstack(reverse_sequence(joined, lengths, 0, 1), axis=0))
    return [nest.pack_sequence_as(input_seq[0], [col[t] for col in columns])
            for t in range(len(input_seq))]


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None,
                             initial_state_bw=None, dtype=None, sequence_length=None, scope=None):
    """A forward and a backward `static_rnn` with outputs concatenated along depth.

    Returns:
        (outputs, output_state_fw, output_state_bw): outputs a list of [batch, fw + bw depth].
    """
    rnn_cell_impl.assert_like_rnncell("cell_fw", cell_fw)
    rnn_cell_impl.assert_like_rnncell("cell_bw", cell_bw)
    if not nest.is_nested(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")
    seq_len = None if sequence_length is None else math_ops.cast(sequence_length, _dtypes.int32)
    with vs.variable_scope(scope or "bidirectional_rnn"):
        with vs.variable_scope("fw") as fw_scope:
            output_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype,
                                             sequence_length, scope=fw_scope)
        with vs.variable_scope("bw") as bw_scope:
            tmp, state_bw = static_rnn(cell_bw, _reverse_seq(inputs, seq_len), initial_state_bw,
                                       dtype, sequence_length, scope=bw_scope)
    output_bw = _reverse_seq(tmp, seq_len)
    outputs = [nest.pack_sequence_as(fw, [array_ops.concat([a, b], 1) for a, b in
                                          zip(nest.flatten(fw), nest.flatten(bw))])
               for fw, bw in zip(output_fw, output_bw)]
    return outputs, state_fw, state_bw


# ------------------------------------------------------------------------------ raw_rnn
def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory=False, scope=None):
    """TF1 `tf.nn.raw_rnn`: a while_loop whose inputs and stopping come from `loop_fn`.

    ``loop_fn(time, cell_output, cell_state, loop_state)`` returns ``(finished, next_input,
    next_cell_state, emit_output, next_loop_state)``; at time 0 (cell_output None) it gives the
    initial input and state (and optionally an emit structure and loop state). Rows already
    finished emit zeros and keep their state; the loop stops when every row is finished.

    Returns:
        (emit_ta, final_state, final_loop_state): emit_ta a (nested) TensorArray of the emitted
        outputs, final_loop_state None when loop_fn gave none at time 0.

    Raises:
        TypeError: loop_fn is not callable or cell not an RNNCell.
    """
    rnn_cell_impl.assert_like_rnncell("cell", cell)
    if not callable(loop_fn):
        raise TypeError("loop_fn must be a callable")
    with vs.variable_scope(scope or "rnn"):
        time = _ops.convert_to_tensor(0, dtype=_dtypes.int32)
        finished, next_input, initial_state, emit_structure, init_loop_state = loop_fn(
            time=time, cell_output=None, cell_state=None, loop_state=None)
        flat_input = [_ops.convert_to_tensor(x) for x in nest.flatten(next_input)]
        next_input = nest.pack_sequence_as(next_input, flat_input)
        loop_state = init_loop_state if init_loop_state is not None else \
            _ops.convert_to_tensor(0, dtype=_dtypes.int32)
        const_batch = _ts.TensorShape(None)
        for x in flat_input:
            const_batch = const_batch.merge_with(_ts.TensorShape([_dims(x)[0]]))
        const_batch_size = const_batch.as_list()[0]
        batch_size = const_batch_size if const_batch_size is not None else \
            array_ops.shape(flat_input[0])[0]
        nest.assert_same_structure(initial_state, cell.state_size, check_types=False)
        state = nest.map_structure(_ops.convert_to_tensor, initial_state)
        flat_state = nest.flatten(state)
        if emit_structure is not None:
            flat_emit = [_ops.convert_to_tensor(e) for e in nest.flatten(emit_structure)]
            flat_emit_size = [e.shape.as_list() if e.shape.is_fully_defined() else
                              array_ops.shape(e) for e in flat_emit]
            flat_emit_dtypes = [e.dtype for e in flat_emit]
        else:
            emit_structure = cell.output_size
            flat_emit_size = [rnn_cell_impl._shape_list(s) for s in nest.flatten(emit_structure)]
            flat_emit_dtypes = [flat_state[0].dtype] * len(flat_emit_size)
        flat_emit_ta = [
            TensorArray(dt, size=0, dynamic_size=True, name=f"rnn_output_{i}",
                        element_shape=[const_batch_size] + size if isinstance(size, list) else None)
            for i, (dt, size) in enumerate(zip(flat_emit_dtypes, flat_emit_size))]
        emit_ta = nest.pack_sequence_as(emit_structure, flat_emit_ta)
        zero_emit = nest.pack_sequence_as(emit_structure, [
            _raw_zeros(batch_size, size, dt) for size, dt in zip(flat_emit_size, flat_emit_dtypes)])

        def condition(unused_time, elements_finished, *_):
            return math_ops.logical_not(math_ops.reduce_all(elements_finished))

        def body(time, elements_finished, current_input, emit_ta, state, loop_state):
            next_output, cell_state = cell(current_input, state)
            nest.assert_same_structure(state, cell_state, check_types=False)
            next_time = time + 1
            next_finished, next_input, next_state, emit_output, next_loop_state = loop_fn(
                next_time, next_output, cell_state, loop_state)
            nest.assert_same_structure(state, next_state, check_types=False)
            nest.assert_same_structure(current_input, next_input, check_types=False)
            if emit_output is None:
                emit_output = next_output
            loop_state = loop_state if next_loop_state is None else next_loop_state
            emit_output = _copy_through(elements_finished, zero_emit, emit_output)
            next_state = _copy_through(elements_finished, state, next_state)
            emit_ta = nest.map_structure(lambda ta, e: ta.write(time, e), emit_ta, emit_output)
            elements_finished = math_ops.logical_or(elements_finished, next_finished)
            return next_time, elements_finished, next_input, emit_ta, next_state, loop_state

        returned = control_flow_v1.while_loop(
            condition, body, [time, finished, next_input, emit_ta, state, loop_state],
            parallel_iterations=parallel_iterations or 32, swap_memory=swap_memory)
        emit_ta, final_state, final_loop_state = returned[-3:]
        if init_loop_state is None:
            final_loop_state = None
        return emit_ta, final_state, final_loop_state


def _raw_zeros(batch_size, size, dtype):
    """zeros([batch_size] + size); size a list of ints or a 1-D int32 Tensor."""
    if isinstance(size, list):
        return rnn_cell_impl._zeros(batch_size, size, dtype)
    batch = array_ops.reshape(_ops.convert_to_tensor(batch_size, dtype=_dtypes.int32), [1])
    return array_ops.zeros(array_ops.concat([batch, size], 0), dtype=dtype)

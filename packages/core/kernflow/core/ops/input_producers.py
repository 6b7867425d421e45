"""TF1's queue-based input producers: `kf.train.string_input_producer` and friends, `limit_epochs`,
`match_filenames_once`, and the `kf.train.maybe_*batch*` family (batching with `keep_input`).

A producer fills a FIFOQueue from a tensor (shuffled each pass unless ``shuffle=False``) through a
`QueueRunner` added to the QUEUE_RUNNERS collection; with ``num_epochs`` the tensor is read through
`limit_epochs`, whose local ``epochs`` counter raises OutOfRangeError after that many passes, so the
runner closes the queue and readers get OutOfRange once it is drained. As in TF, producers and
batchers add a ``fraction_of_<capacity>_full`` scalar summary of their queue to SUMMARIES.

Example::

    filenames = kf.train.string_input_producer(["a.csv", "b.csv"], num_epochs=2, shuffle=False)
    name = filenames.dequeue()
    ...
    sess.run(kf.local_variables_initializer())   # the epochs counter
    threads = kf.train.start_queue_runners(sess, coord)

This module also declares the two ops they need: CountUpTo (``kf.count_up_to``) and
MatchingFiles (``kf.matching_files``); their CPU kernels are in kernflow.kernels.cpu.parsing.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import data_flow_ops

__all__ = ["count_up_to", "matching_files"]
# kf.train imports TRAIN_NAMES from here, so kernflow.core.train.* is imported where used, not above.
# Re-exported by kf.train.
TRAIN_NAMES = ["input_producer", "string_input_producer", "range_input_producer", "slice_input_producer",
               "limit_epochs", "match_filenames_once", "maybe_batch", "maybe_batch_join",
               "maybe_shuffle_batch", "maybe_shuffle_batch_join"]

# Op types of this module: host only (kernel_contract.HOST_ONLY_OPS), no gradient.
INPUT_PRODUCER_OPS = ("CountUpTo", "MatchingFiles")

register_op("CountUpTo", inputs=["ref: Ref(T)"], outputs=["output: T"],
            attrs=["limit: int", "T: {int32, int64}"], shape_fn=lambda op: [op.inputs[0].shape.with_rank(0)],
            stateful=True,
            doc="Increments the scalar variable `ref` until it reaches `limit`; outputs its value before "
                "the increment. Raises OutOfRange once the value is `limit`.")
register_op("MatchingFiles", inputs=["pattern: string"], outputs=["filenames: string"],
            shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_most(1) and _ts.TensorShape([None])],
            stateful=True,
            doc="The sorted file names matching a glob pattern (or any of a vector of patterns); "
                "wildcards may appear in the base name only, as in TF.")
for _op in INPUT_PRODUCER_OPS:
    NotDifferentiable(_op)


def count_up_to(ref, limit, name=None):
    """Increments the int32/int64 scalar variable `ref` until it reaches `limit` (TF1 `tf.count_up_to`).

    Returns:
        The value of `ref` before the increment.

    Raises:
        OutOfRangeError (at run time): once `ref` holds `limit`.
    """
    from kernflow.core.ops.state_ops import _ref_of
    return apply_op("CountUpTo", [_ref_of(ref)], {"limit": int(limit)}, name=name).outputs[0]


def matching_files(pattern, name=None):
    """The sorted files matching a glob `pattern` (a string scalar or vector), as a string vector."""
    return apply_op("MatchingFiles", [_ops.convert_to_tensor(pattern, dtype=_dtypes.string)],
                    name=name).outputs[0]


def limit_epochs(tensor, num_epochs=None, name=None):
    """Returns `tensor` unchanged `num_epochs` times, then raises OutOfRangeError.

    The count lives in a local variable ``<name>/epochs`` (LOCAL_VARIABLES: run
    ``kf.local_variables_initializer()``).

    Raises:
        ValueError: if num_epochs <= 0.
    """
    if num_epochs is None:
        return tensor
    if num_epochs <= 0:
        raise ValueError(f"num_epochs must be > 0 not {num_epochs}.")
    from kernflow.core.ops import array_ops
    from kernflow.core.ops.variables import Variable
    with _ops.name_scope(name, "limit_epochs", [tensor]) as name:
        zero64 = _ops.convert_to_tensor(0, dtype=_dtypes.int64)
        epochs = Variable(zero64, name="epochs", trainable=False,
                          collections=[_ops.GraphKeys.LOCAL_VARIABLES])
        counter = count_up_to(epochs, num_epochs)
        with _ops.control_dependencies([counter]):
            return array_ops.identity(tensor, name=name)


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle=True, seed=None,
                   capacity=32, shared_name=None, summary_name=None, name=None, cancel_op=None):
    """Enqueues the rows of `input_tensor` into a FIFOQueue from a queue runner thread.

    Args:
        input_tensor: a tensor of at least rank 1; its rows are the queue's elements.
        element_shape: the rows' shape, where input_tensor's static shape does not give it.
        num_epochs: pass over the rows this many times, then close the queue (None: forever).
        shuffle: shuffle the rows anew on every pass.
        seed: the shuffle's seed.
        capacity: the queue's capacity.
        shared_name: share the queue under this name.
        summary_name: with a name, a scalar summary of how full the queue is (size / capacity).
        name: name scope (and the queue's name).
        cancel_op: the runner's cancel op (default: close the queue, cancelling pending enqueues).

    Returns:
        The queue (dequeue it to read one row).

    Raises:
        ValueError: the element shape is not fully defined.
    """
    from kernflow.core.ops import random_ops
    with _ops.name_scope(name, "input_producer", [input_tensor]):
        input_tensor = _ops.convert_to_tensor(input_tensor, name="input_tensor")
        element_shape = input_tensor.shape[1:].merge_with(_ts.TensorShape(element_shape))
        if not element_shape.is_fully_defined():
            raise ValueError("Either `input_tensor` must have a fully defined shape or `element_shape` "
                             "must be specified")
        if shuffle:
            input_tensor = random_ops.random_shuffle(input_tensor, seed=seed)
        input_tensor = limit_epochs(input_tensor, num_epochs)
        q = data_flow_ops.FIFOQueue(capacity=capacity, dtypes=[input_tensor.dtype.base_dtype],
                                    shapes=[element_shape], shared_name=shared_name,
                                    name=name or "fifo_queue")
        enq = q.enqueue_many([input_tensor])
        from kernflow.core.train.queue_runner import QueueRunner, add_queue_runner
        add_queue_runner(QueueRunner(q, [enq], cancel_op=cancel_op))
        if summary_name is not None:
            from kernflow.core.train.input import _fraction_full_summary
            _fraction_full_summary(q, capacity, summary_name=summary_name)
        return q


def string_input_producer(string_tensor, num_epochs=None, shuffle=True, seed=None, capacity=32,
                          shared_name=None, name=None, cancel_op=None):
    """`input_producer` of a string vector (file names, usually); an empty one fails at run time.

    Returns:
        A FIFOQueue of strings.

    Raises:
        ValueError: `string_tensor` is an empty Python list.
    """
    from kernflow.core.ops import array_ops, control_flow_ops, math_ops
    not_null_err = "string_input_producer requires a non-null input tensor"
    if isinstance(string_tensor, (list, tuple, np.ndarray)) and not len(string_tensor):
        raise ValueError(not_null_err)
    with _ops.name_scope(name, "input_producer", [string_tensor]) as name:
        string_tensor = _ops.convert_to_tensor(string_tensor, dtype=_dtypes.string)
        check = control_flow_ops.Assert(math_ops.greater(array_ops.size(string_tensor), 0), [not_null_err])
        with _ops.control_dependencies([check]):
            string_tensor = array_ops.identity(string_tensor)
        return input_producer(string_tensor, [], num_epochs, shuffle, seed, capacity, shared_name,
                              f"fraction_of_{capacity}_full", name, cancel_op)


def range_input_producer(limit, num_epochs=None, shuffle=True, seed=None, capacity=32, shared_name=None,
                         name=None):
    """`input_producer` of the integers 0 .. limit - 1 (int32).

    Returns:
        A FIFOQueue of int32 scalars.
    """
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, "input_producer", [limit]) as name:
        range_tensor = array_ops.range(limit)
        return input_producer(range_tensor, [], num_epochs, shuffle, seed, capacity, shared_name,
                              f"fraction_of_{capacity}_full", name)


def slice_input_producer(tensor_list, num_epochs=None, shuffle=True, seed=None, capacity=32,
                         shared_name=None, name=None):
    """Produces one row of each tensor of `tensor_list` at a time (the same row index for all).

    Returns:
        A list of tensors: row i of each tensor, i drawn from a `range_input_producer`.

    Raises:
        ValueError: `tensor_list` is empty.
    """
    from kernflow.core.ops import array_ops
    with _ops.name_scope(name, "input_producer", list(tensor_list)):
        tensor_list = [_ops.convert_to_tensor(t) for t in tensor_list]
        if not tensor_list:
            raise ValueError("Expected at least one tensor in slice_input_producer().")
        range_size = array_ops.shape(tensor_list[0])[0]
        queue = range_input_producer(range_size, num_epochs=num_epochs, shuffle=shuffle, seed=seed,
                                     capacity=capacity, shared_name=shared_name)
        index = queue.dequeue()
        return [array_ops.gather(t, index) for t in tensor_list]


def match_filenames_once(pattern, name=None):
    """A local variable holding the files matching `pattern`, matched when it is initialized.

    Returns:
        A string variable (LOCAL_VARIABLES; run ``kf.local_variables_initializer()``).
    """
    from kernflow.core.ops.variables import Variable
    with _ops.name_scope(name, "matching_filenames", [pattern]) as name:
        return Variable(matching_files(pattern), name=name, trainable=False, validate_shape=False,
                        collections=[_ops.GraphKeys.LOCAL_VARIABLES])


# ---------------------------------------------------------------------------- maybe_*batch*
def _validate_keep_input(keep_input, enqueue_many):
    keep_input = _ops.convert_to_tensor(keep_input)
    if keep_input.shape.rank is None:
        raise ValueError("`keep_input` dimensions must be known at graph construction.")
    if not enqueue_many and keep_input.shape.rank == 1:
        raise ValueError("`keep_input` cannot be a vector when `enqueue_many=False`.")
    if keep_input.shape.rank > 1:
        raise ValueError("`keep_input` must be 0 or 1 dimensions.")
    return keep_input


def _enqueue_kept(queue, tensor_list, enqueue_many, keep_input):
    """An enqueue op adding only what keep_input keeps (rows of a vector keep_input, or all/none)."""
    from kernflow.core.ops import array_ops, control_flow_ops, math_ops
    enqueue = queue.enqueue_many if enqueue_many else queue.enqueue
    if keep_input.shape.rank == 1:
        select = math_ops.cast(keep_input, _dtypes.int32)
        return enqueue([array_ops.dynamic_partition(t, select, num_partitions=2)[1] for t in tensor_list])
    static = tensor_util.constant_value(keep_input)
    if static is not None:  # TF's smart_cond: decided while building
        return enqueue(tensor_list) if bool(static) else control_flow_ops.no_op()
    return control_flow_ops.cond(keep_input, lambda: enqueue(tensor_list), control_flow_ops.no_op)


def _maybe_batch(original, structures, keep_input, batch_size, threads_per_list, capacity,
                 enqueue_many, shapes, allow_smaller_final_batch, shared_name, name, default_name,
                 make_queue):
    from kernflow.core.train import input as _input
    from kernflow.core.train.queue_runner import QueueRunner, add_queue_runner
    tensor_list_list = _input._as_tensor_list_list(structures)
    flat = [t for tl in tensor_list_list for t in tl]
    with _ops.name_scope(name, default_name, flat + [keep_input]) as scope:
        tensor_list_list = [_input._validate(tl) for tl in tensor_list_list]
        keep_input = _validate_keep_input(keep_input, enqueue_many)
        types = _input._dtypes(tensor_list_list)
        shapes = _input._shapes(tensor_list_list, shapes, enqueue_many)
        queue = make_queue(types, shapes)
        ops = [_enqueue_kept(queue, tl, enqueue_many, keep_input) for tl in tensor_list_list]
        add_queue_runner(QueueRunner(queue, ops * threads_per_list))
        _input._fraction_full_summary(queue, capacity, getattr(make_queue, "min_after_dequeue", 0))
        return _input._as_original_type(
            original, _input._dequeue(queue, batch_size, allow_smaller_final_batch, scope))


def _fifo(capacity, dynamic_pad, shared_name):
    cls = data_flow_ops.PaddingFIFOQueue if dynamic_pad else data_flow_ops.FIFOQueue
    return lambda types, shapes: cls(capacity, types, shapes, shared_name=shared_name)


def _shuffling(capacity, min_after_dequeue, seed, shared_name):
    def make(types, shapes):
        return data_flow_ops.RandomShuffleQueue(capacity, min_after_dequeue, types, shapes, seed=seed,
                                                shared_name=shared_name)
    make.min_after_dequeue = min_after_dequeue   # (its fill summary counts what is above it)
    return make


def maybe_batch(tensors, keep_input, batch_size, num_threads=1, capacity=32, enqueue_many=False,
                shapes=None, dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None,
                name=None):
    """`kf.train.batch` that enqueues only what `keep_input` keeps.

    Args:
        keep_input: a bool scalar (keep the example, or the whole batch with `enqueue_many`) or,
            with `enqueue_many`, a bool vector (keep row i where true).
        Others: as `kf.train.batch`.

    Raises:
        ValueError: keep_input of unknown rank, rank > 1, or a vector without `enqueue_many`.
    """
    return _maybe_batch(tensors, [tensors], keep_input, batch_size, num_threads,
                        capacity, enqueue_many, shapes, allow_smaller_final_batch, shared_name, name,
                        "batch", _fifo(capacity, dynamic_pad, shared_name))


def maybe_batch_join(tensors_list, keep_input, batch_size, capacity=32, enqueue_many=False, shapes=None,
                     dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """`kf.train.batch_join` that enqueues only what `keep_input` keeps (see `maybe_batch`)."""
    return _maybe_batch(tensors_list[0], tensors_list, keep_input,
                        batch_size, 1, capacity, enqueue_many, shapes, allow_smaller_final_batch,
                        shared_name, name, "batch_join", _fifo(capacity, dynamic_pad, shared_name))


def maybe_shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, keep_input, num_threads=1,
                        seed=None, enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                        shared_name=None, name=None):
    """`kf.train.shuffle_batch` that enqueues only what `keep_input` keeps (see `maybe_batch`)."""
    return _maybe_batch(tensors, [tensors], keep_input, batch_size, num_threads,
                        capacity, enqueue_many, shapes, allow_smaller_final_batch, shared_name, name,
                        "shuffle_batch", _shuffling(capacity, min_after_dequeue, seed, shared_name))


def maybe_shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, keep_input, seed=None,
                             enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                             shared_name=None, name=None):
    """`kf.train.shuffle_batch_join` that enqueues only what `keep_input` keeps (see `maybe_batch`)."""
    return _maybe_batch(tensors_list[0], tensors_list, keep_input,
                        batch_size, 1, capacity, enqueue_many, shapes, allow_smaller_final_batch,
                        shared_name, name, "shuffle_batch_join",
                        _shuffling(capacity, min_after_dequeue, seed, shared_name))

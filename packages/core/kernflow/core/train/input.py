"""`kf.train.batch`, `shuffle_batch` and their `_join` variants: batching through queues (TF1).

Each builds a queue (FIFO, padding FIFO or random shuffle), enqueue ops for the given tensors,
and a `QueueRunner` added to the QUEUE_RUNNERS collection; it returns the dequeued batch. The
batches flow once `kf.train.start_queue_runners` started the runner threads.

Example::

    image, label = read_one_example()
    images, labels = kf.train.shuffle_batch([image, label], batch_size=32, capacity=2000,
                                            min_after_dequeue=1000, num_threads=4)
    ...
    threads = kf.train.start_queue_runners(sess, coord)
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dt
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.ops import data_flow_ops
from kernflow.core.train.queue_runner import QueueRunner, add_queue_runner

__all__ = ["batch", "batch_join", "shuffle_batch", "shuffle_batch_join"]


def _as_tensor_list(tensors):
    if isinstance(tensors, dict):
        return [tensors[k] for k in sorted(tensors)]
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"tensors must be a list, tuple or dict of tensors, got "
                        f"{type(tensors).__name__}")
    return list(tensors)


def _as_tensor_list_list(tensors_list):
    if not tensors_list:
        raise ValueError("Expected at least one set of tensors")
    out = [_as_tensor_list(t) for t in tensors_list]
    if any(len(tl) != len(out[0]) for tl in out):
        raise ValueError(f"Expected all sets of tensors to have the same length, got "
                         f"{[len(tl) for tl in out]}")
    return out


def _validate(tensor_list):
    if not tensor_list:
        raise ValueError("Expected at least one tensor in batch().")
    return [_ops.convert_to_tensor(t) for t in tensor_list]


def _as_original_type(original, dequeued):
    if isinstance(original, dict):
        if len(original) == 1:
            dequeued = [dequeued]  # a queue of one component dequeues a tensor, not a list
        return {k: dequeued[i] for i, k in enumerate(sorted(original))}
    return dequeued


def _dtypes(tensor_list_list):
    types = [t.dtype.base_dtype for t in tensor_list_list[0]]
    for tl in tensor_list_list[1:]:
        other = [t.dtype.base_dtype for t in tl]
        if other != types:
            raise TypeError(f"Expected types to be consistent: {types} vs. {other}.")
    return types


def _shapes(tensor_list_list, shapes, enqueue_many):
    """The element shapes: given, or merged from the tensors' static shapes."""
    if shapes is not None:
        return [_ts.as_shape(s) for s in shapes]
    out = []
    for i, t0 in enumerate(tensor_list_list[0]):
        merged = _ts.TensorShape(None)
        for tl in tensor_list_list:
            s = tl[i].shape
            if s.rank is None:
                raise ValueError(f"Cannot infer Tensor's rank: {tl[i]}")
            if enqueue_many:
                s = s.with_rank_at_least(1)[1:]
            merged = merged.merge_with(s)
        out.append(merged)
    return out


def _enqueue_ops(queue, tensor_list_list, enqueue_many):
    enqueue = queue.enqueue_many if enqueue_many else queue.enqueue
    return [enqueue(tl) for tl in tensor_list_list]


def _dequeue(queue, batch_size, allow_smaller_final_batch, name):
    if allow_smaller_final_batch:
        return queue.dequeue_up_to(batch_size, name=name)
    return queue.dequeue_many(batch_size, name=name)


def _fraction_full_summary(queue, capacity, min_after_dequeue=0, summary_name=None):
    """TF1's queue-fill scalar summary: how full `queue` is, beyond `min_after_dequeue` (0..1)."""
    from kernflow.core.ops import math_ops
    from kernflow.core.summary import summary_ops
    size = math_ops.cast(queue.size(), _dt.float32)
    if min_after_dequeue:
        size = math_ops.maximum(0.0, size - float(min_after_dequeue))
        name = summary_name or (f"fraction_over_{min_after_dequeue}_of_"
                                f"{capacity - min_after_dequeue}_full")
    else:
        name = summary_name or f"fraction_of_{capacity}_full"
    return summary_ops.scalar(name, size * (1.0 / (capacity - min_after_dequeue)))


def _batch(original, tensor_list_list, batch_size, threads_per_list, capacity, enqueue_many,
           shapes, dynamic_pad, allow_smaller_final_batch, shared_name, name, default_name):
    flat = [t for tl in tensor_list_list for t in tl]
    with _ops.name_scope(name, default_name, flat) as scope:
        tensor_list_list = [_validate(tl) for tl in tensor_list_list]
        types = _dtypes(tensor_list_list)
        shapes = _shapes(tensor_list_list, shapes, enqueue_many)
        if dynamic_pad:
            queue = data_flow_ops.PaddingFIFOQueue(capacity, types, shapes, shared_name=shared_name)
        else:
            queue = data_flow_ops.FIFOQueue(capacity, types, shapes, shared_name=shared_name)
        ops = _enqueue_ops(queue, tensor_list_list, enqueue_many) * threads_per_list
        add_queue_runner(QueueRunner(queue, ops))
        _fraction_full_summary(queue, capacity)
        return _as_original_type(original, _dequeue(queue, batch_size, allow_smaller_final_batch,
                                                    scope))


def batch(tensors, batch_size, num_threads=1, capacity=32, enqueue_many=False, shapes=None,
          dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Creates batches of tensors through a FIFO queue filled by `num_threads` runner threads.

    Args:
        tensors: a list or dict of tensors (one example, or a batch with `enqueue_many`).
        batch_size: the batch size dequeued.
        num_threads: the number of threads enqueuing `tensors`.
        capacity: the most elements in the queue.
        enqueue_many: each tensor is a batch of examples (dimension 0).
        shapes: the example shapes (default: the tensors' static shapes, which must be fully
            defined unless `dynamic_pad`).
        dynamic_pad: allow variable example shapes; batches are padded with zeros.
        allow_smaller_final_batch: once the queue is closed, the last batch may be smaller (its
            static batch dimension is then None).
        shared_name: share the queue under this name.
        name: name scope.

    Returns:
        Tensors of the same structure as `tensors`, each with an extra leading batch dimension.

    Raises:
        ValueError: unknown shapes (without `dynamic_pad`) or no tensors.
    """
    return _batch(tensors, [_as_tensor_list(tensors)], batch_size, num_threads, capacity,
                  enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch, shared_name, name,
                  "batch")


def batch_join(tensors_list, batch_size, capacity=32, enqueue_many=False, shapes=None,
               dynamic_pad=False, allow_smaller_final_batch=False, shared_name=None, name=None):
    """Like `batch`, with one enqueuing thread per list of tensors in `tensors_list`.

    Returns:
        Tensors with the structure of ``tensors_list[0]``, batched.
    """
    return _batch(tensors_list[0], _as_tensor_list_list(tensors_list), batch_size, 1, capacity,
                  enqueue_many, shapes, dynamic_pad, allow_smaller_final_batch, shared_name, name,
                  "batch_join")


def _shuffle_batch(original, tensor_list_list, batch_size, threads_per_list, capacity,
                   min_after_dequeue, seed, enqueue_many, shapes, allow_smaller_final_batch,
                   shared_name, name, default_name):
    flat = [t for tl in tensor_list_list for t in tl]
    with _ops.name_scope(name, default_name, flat) as scope:
        tensor_list_list = [_validate(tl) for tl in tensor_list_list]
        types = _dtypes(tensor_list_list)
        shapes = _shapes(tensor_list_list, shapes, enqueue_many)
        queue = data_flow_ops.RandomShuffleQueue(capacity, min_after_dequeue, types, shapes,
                                                 seed=seed, shared_name=shared_name)
        ops = _enqueue_ops(queue, tensor_list_list, enqueue_many) * threads_per_list
        add_queue_runner(QueueRunner(queue, ops))
        _fraction_full_summary(queue, capacity, min_after_dequeue)
        return _as_original_type(original, _dequeue(queue, batch_size, allow_smaller_final_batch,
                                                    scope))


def shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, num_threads=1, seed=None,
                  enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                  shared_name=None, name=None):
    """Creates batches of randomly shuffled tensors through a RandomShuffleQueue.

    Args:
        tensors, batch_size, num_threads, enqueue_many, shapes, allow_smaller_final_batch,
            shared_name, name: as `batch`.
        capacity: the most elements in the queue.
        min_after_dequeue: the fewest elements left after a dequeue (until the queue closes): the
            pool batches are drawn from, so larger means better mixing.
        seed: the queue's random seed.

    Returns:
        Tensors of the same structure as `tensors`, batched.
    """
    return _shuffle_batch(tensors, [_as_tensor_list(tensors)], batch_size, num_threads, capacity,
                          min_after_dequeue, seed, enqueue_many, shapes, allow_smaller_final_batch,
                          shared_name, name, "shuffle_batch")


def shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, seed=None,
                       enqueue_many=False, shapes=None, allow_smaller_final_batch=False,
                       shared_name=None, name=None):
    """Like `shuffle_batch`, with one enqueuing thread per list of tensors in `tensors_list`."""
    return _shuffle_batch(tensors_list[0], _as_tensor_list_list(tensors_list), batch_size, 1,
                          capacity, min_after_dequeue, seed, enqueue_many, shapes,
                          allow_smaller_final_batch, shared_name, name, "shuffle_batch_join")

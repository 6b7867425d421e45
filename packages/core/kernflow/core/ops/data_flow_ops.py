"""TF1 queues: FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue and PriorityQueue.

A queue is a stateful op (``FIFOQueueV2``...) whose output is a `resource` handle; enqueue,
dequeue, close and size ops take that handle. Every op of a queue is colocated with the queue op,
so on a cluster each worker's enqueues and dequeues run on the queue's task. Blocking ops
(enqueue while full, dequeue while empty) are asynchronous kernels that hold no thread while they
wait (kernflow.kernels.cpu.queues).

Example::

    q = kf.FIFOQueue(10, [kf.float32, kf.int32], shapes=[[2], []])
    enq = q.enqueue_many([x_batch, labels])
    xs, ys = q.dequeue_many(4)          # static shapes [4, 2] and [4]
"""

from __future__ import annotations

import hashlib

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import random_seed
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["QueueBase", "FIFOQueue", "PaddingFIFOQueue", "RandomShuffleQueue", "PriorityQueue"]

QUEUE_OPS = ("FIFOQueueV2", "PaddingFIFOQueueV2", "RandomShuffleQueueV2", "PriorityQueueV2",
             "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2", "QueueDequeueManyV2",
             "QueueDequeueUpToV2", "QueueCloseV2", "QueueSizeV2", "QueueIsClosedV2")


# ---------------------------------------------------------------------------- op definitions
def _scalar(op):
    return [_ts.TensorShape([])]


def _no_outputs(op):
    return []


def _dequeue_shape(op):
    # The component shapes live on the queue op; the Python wrappers set them on the outputs.
    return [_ts.TensorShape(None)] * len(op.outputs)


def _dequeue_many_shape(op):
    n = op.inputs[1].shape
    if n.rank is not None and n.rank != 0:
        raise ValueError(f"n must be a scalar, got shape {n}")
    return [_ts.TensorShape(None)] * len(op.outputs)


_QUEUE_ATTRS = ["component_types: list(type)", "shapes: list(shape) = []", "capacity: int = -1",
                "container: string = ''", "shared_name: string = ''"]
_SHARED = (" The queue lives in the resource container `container` of its device, under "
           "`shared_name` (a private name when empty); sessions that name the same shared queue on "
           "one server share it. `capacity` -1 means unbounded.")

# The queue-creating ops: (op type, attrs, doc).
_QUEUE_KINDS = [
    ("FIFOQueueV2", _QUEUE_ATTRS,
     "A queue that produces elements in first-in first-out order. `shapes` (empty or one fully "
     "defined shape per component) constrains enqueued elements; DequeueMany needs it."),
    ("PaddingFIFOQueueV2", _QUEUE_ATTRS,
     "A FIFO queue whose `shapes` may have unknown (-1) dimensions: elements may vary there, and "
     "DequeueMany pads each component of a batch with zeros to the largest shape in it."),
    ("RandomShuffleQueueV2",
     _QUEUE_ATTRS + ["min_after_dequeue: int = 0", "seed: int = 0", "seed2: int = 0"],
     "A queue that dequeues elements in a random order. Until it is closed, a dequeue waits while "
     "no more than `min_after_dequeue` elements remain, so every dequeued element was drawn from a "
     "mix of at least that many. `seed`/`seed2` (both 0: random) make the order deterministic."),
    ("PriorityQueueV2", ["component_types: list(type) = []"] + _QUEUE_ATTRS[1:],
     "A queue that produces elements sorted by their first component, an int64 scalar priority "
     "(smallest first; equal priorities leave in insertion order). `component_types` and `shapes` "
     "describe the other components."),
]
for _name, _attrs, _doc in _QUEUE_KINDS:
    register_op(_name, outputs=["handle: resource"], attrs=_attrs, shape_fn=_scalar, stateful=True,
                doc=_doc + _SHARED)

# The blocking ops: (op type, extra inputs, outputs, type attr, shape function, doc).
_BLOCKING_OPS = [
    ("QueueEnqueueV2", ["components: Tcomponents"], [], "Tcomponents", _no_outputs,
     "Enqueues one element (a tuple of `components`). Blocks while the queue is full; fails with "
     "Cancelled once the queue is closed."),
    ("QueueEnqueueManyV2", ["components: Tcomponents"], [], "Tcomponents", _no_outputs,
     "Enqueues zero or more elements: each component is sliced along dimension 0, which must be "
     "the same for all. Blocks until every element is in the queue (elements enter as room "
     "appears)."),
    ("QueueDequeueV2", [], ["components: component_types"], "component_types", _dequeue_shape,
     "Dequeues one element. Blocks while the queue is empty (a RandomShuffleQueue: while it holds "
     "no more than min_after_dequeue elements); once the queue is closed and empty, fails with "
     "OutOfRange."),
    ("QueueDequeueManyV2", ["n: int32"], ["components: component_types"], "component_types",
     _dequeue_many_shape,
     "Dequeues `n` elements, each component concatenated along a new dimension 0. Waits until `n` "
     "elements arrived; fails with OutOfRange if the queue is closed with fewer (leaving them in "
     "the queue)."),
    ("QueueDequeueUpToV2", ["n: int32"], ["components: component_types"], "component_types",
     _dequeue_many_shape,
     "Like QueueDequeueManyV2, but once the queue is closed returns the remaining elements "
     "(between 1 and `n`); fails with OutOfRange only when none remain."),
]
for _name, _inputs, _outputs, _types, _shape_fn, _doc in _BLOCKING_OPS:
    register_op(_name, inputs=["handle: resource"] + _inputs, outputs=_outputs,
                attrs=[f"{_types}: list(type)", "timeout_ms: int = -1"], shape_fn=_shape_fn,
                stateful=True,
                doc=_doc + " `timeout_ms` > 0 fails with DeadlineExceeded after waiting that long.")
register_op("QueueCloseV2", inputs=["handle: resource"], attrs=["cancel_pending_enqueues: bool = false"],
            shape_fn=_no_outputs, stateful=True,
            doc="Closes the queue: later enqueues fail, dequeues drain what remains and then fail "
                "with OutOfRange. Without `cancel_pending_enqueues` the close waits behind enqueues "
                "already blocked (they still complete); with it, they fail with Cancelled.")
register_op("QueueSizeV2", inputs=["handle: resource"], outputs=["size: int32"], shape_fn=_scalar,
            stateful=True, doc="The number of elements in the queue.")
register_op("QueueIsClosedV2", inputs=["handle: resource"], outputs=["is_closed: bool"],
            shape_fn=_scalar, stateful=True, doc="True once the queue has been closed.")


# ---------------------------------------------------------------------------- argument helpers
def _as_type_list(dtypes):
    if isinstance(dtypes, (list, tuple)):
        return [_dtypes.as_dtype(d).base_dtype for d in dtypes]
    return [_dtypes.as_dtype(dtypes).base_dtype]


def _as_shape_list(shapes, unknown_dim_allowed=False, unknown_rank_allowed=False):
    """Normalizes `shapes` (None, one shape, or a list of shapes) to a list of TensorShapes."""
    if unknown_dim_allowed and (not isinstance(shapes, (list, tuple)) or not shapes or
                                any(s is None or isinstance(s, int) for s in shapes)):
        raise ValueError("When providing partial shapes, a list of shapes must be provided.")
    if shapes is None:
        return None
    if isinstance(shapes, _ts.TensorShape):
        shapes = [shapes]
    if not isinstance(shapes, (list, tuple)):
        raise TypeError("shapes must be a TensorShape or a list or tuple of TensorShapes.")
    if all(s is None or isinstance(s, int) for s in shapes):
        shapes = [shapes]  # a single shape given as a list of dims
    shapes = [_ts.as_shape(s) for s in shapes]
    if not unknown_dim_allowed and any(not s.is_fully_defined() for s in shapes):
        raise ValueError(f"All shapes must be fully defined: {shapes}")
    if not unknown_rank_allowed and any(s.rank is None for s in shapes):
        raise ValueError(f"All shapes must have a defined rank: {shapes}")
    return shapes


def _as_name_list(names, dtypes):
    if names is None:
        return None
    if not isinstance(names, (list, tuple)):
        names = [names]
    if len(names) != len(dtypes):
        raise ValueError("List of names must have the same length as the list of dtypes")
    return list(names)


def _shape_attr(shapes):
    return [] if shapes is None else list(shapes)


# ---------------------------------------------------------------------------- Python classes
class QueueBase:
    """Base class of the queue classes: the ops that use a queue handle.

    Args:
        dtypes: the component types.
        shapes: the component shapes (None: unconstrained).
        names: optional component names; enqueue then takes and dequeue returns dicts.
        queue_ref: the queue's `resource` handle tensor.
    """

    def __init__(self, dtypes, shapes, names, queue_ref):
        self._dtypes = list(dtypes)
        if shapes is not None:
            if len(shapes) != len(self._dtypes):
                raise ValueError("Queue shapes must have the same length as dtypes")
            self._shapes = [_ts.as_shape(s) for s in shapes]
        else:
            self._shapes = [_ts.TensorShape(None) for _ in self._dtypes]
        if names is not None:
            if len(names) != len(self._dtypes):
                raise ValueError("Queue names must have the same length as dtypes")
            self._names = list(names)
        else:
            self._names = None
        self._queue_ref = queue_ref
        self._name = queue_ref.op.name.split("/")[-1]

    @property
    def queue_ref(self):
        """The queue's handle tensor."""
        return self._queue_ref

    @property
    def name(self) -> str:
        """The name of the queue op."""
        return self._queue_ref.op.name

    @property
    def dtypes(self) -> list:
        return self._dtypes

    @property
    def shapes(self) -> list:
        return self._shapes

    @property
    def names(self):
        return self._names

    def _check_enqueue_dtypes(self, vals):
        """Converts `vals` (a tensor, list, tuple or dict) to one tensor per component."""
        if isinstance(vals, dict):
            if not self._names:
                raise ValueError("Queue must have names to enqueue a dictionary")
            if sorted(self._names, key=str) != sorted(vals.keys(), key=str):
                raise ValueError(f"Keys in dictionary to enqueue do not match names of Queue.  "
                                 f"Dictionary: ({sorted(vals.keys(), key=str)}),Queue: "
                                 f"({sorted(self._names, key=str)})")
            vals = [vals[k] for k in self._names]
        else:
            if self._names:
                raise ValueError("You must enqueue a dictionary in a Queue with names")
            if not isinstance(vals, (list, tuple)):
                vals = [vals]
        if len(vals) != len(self._dtypes):
            raise ValueError(f"Expected {len(self._dtypes)} components for queue {self.name}, got "
                             f"{len(vals)}")
        return [_ops.convert_to_tensor(v, dtype=dt, name=f"component_{i}")
                for i, (v, dt) in enumerate(zip(vals, self._dtypes))]

    def _scope_vals(self, vals):
        if isinstance(vals, (list, tuple)):
            return list(vals)
        if isinstance(vals, dict):
            return list(vals.values())
        return [vals]

    def _dequeue_return_value(self, tensors):
        if self._names:
            return dict(zip(self._names, tensors))
        if len(tensors) == 1:
            return tensors[0]
        return list(tensors)

    def enqueue(self, vals, name=None):
        """Enqueues one element.

        Args:
            vals: a tensor, a list or tuple of tensors, or a dict (for a queue with names).
            name: op name.

        Returns:
            The enqueue Operation (it blocks while the queue is full).

        Raises:
            ValueError: a component's static shape does not match the queue's.
        """
        with _ops.name_scope(name, f"{self._name}_enqueue", self._scope_vals(vals)) as scope:
            vals = self._check_enqueue_dtypes(vals)
            for val, shape in zip(vals, self._shapes):
                if not val.shape.is_compatible_with(shape):
                    raise ValueError(f"Shape {val.shape} of component {val.name} is incompatible "
                                     f"with the shape {shape} of queue {self.name}")
            with _ops.colocate_with(self._queue_ref):
                return apply_op("QueueEnqueueV2", [self._queue_ref, vals],
                                {"Tcomponents": self._dtypes}, name=scope)

    def enqueue_many(self, vals, name=None):
        """Enqueues the slices of `vals` along dimension 0 as separate elements.

        Returns:
            The enqueue Operation.

        Raises:
            ValueError: components of rank 0, differing batch sizes, or element shapes that do
                not match the queue's.
        """
        with _ops.name_scope(name, f"{self._name}_EnqueueMany", self._scope_vals(vals)) as scope:
            vals = self._check_enqueue_dtypes(vals)
            batch_dim = _ts.Dimension(None)
            for val, shape in zip(vals, self._shapes):
                vshape = val.shape.with_rank_at_least(1)
                batch_dim = batch_dim.merge_with(vshape.dim_values[0]) if vshape.rank is not None \
                    else batch_dim
                if vshape.rank is not None and not vshape[1:].is_compatible_with(shape):
                    raise ValueError(f"Shape {val.shape} of component {val.name} is incompatible "
                                     f"with [batch] + {shape} for queue {self.name}")
            with _ops.colocate_with(self._queue_ref):
                return apply_op("QueueEnqueueManyV2", [self._queue_ref, vals],
                                {"Tcomponents": self._dtypes}, name=scope)

    def dequeue(self, name=None):
        """Dequeues one element: a tensor, a list of tensors, or a dict (queue with names)."""
        if name is None:
            name = f"{self._name}_Dequeue"
        with _ops.colocate_with(self._queue_ref):
            op = apply_op("QueueDequeueV2", [self._queue_ref], {"component_types": self._dtypes},
                          name=name)
        for out, shape in zip(op.outputs, self._shapes):
            out.set_shape(shape)
        return self._dequeue_return_value(op.outputs)

    def _dequeue_n(self, op_type, n, name, static_batch):
        with _ops.colocate_with(self._queue_ref):
            n_t = _ops.convert_to_tensor(n, dtype=_dtypes.int32, name="n")
            op = apply_op(op_type, [self._queue_ref, n_t], {"component_types": self._dtypes},
                          name=name)
        batch = None
        if static_batch:
            v = tensor_util.constant_value(n_t)
            batch = int(v) if v is not None else None
        for out, shape in zip(op.outputs, self._shapes):
            out.set_shape(_ts.TensorShape([batch]).concatenate(shape))
        return self._dequeue_return_value(op.outputs)

    def dequeue_many(self, n, name=None):
        """Dequeues `n` elements, concatenated along a new dimension 0 (static size `n`)."""
        return self._dequeue_n("QueueDequeueManyV2", n, name or f"{self._name}_DequeueMany", True)

    def dequeue_up_to(self, n, name=None):
        """Dequeues up to `n` elements: fewer once the queue is closed (batch dimension None)."""
        return self._dequeue_n("QueueDequeueUpToV2", n, name or f"{self._name}_DequeueUpTo", False)

    def close(self, cancel_pending_enqueues=False, name=None):
        """Closes the queue (see `QueueCloseV2`); returns the close Operation."""
        if name is None:
            name = f"{self._name}_Close"
        with _ops.colocate_with(self._queue_ref):
            return apply_op("QueueCloseV2", [self._queue_ref],
                            {"cancel_pending_enqueues": bool(cancel_pending_enqueues)}, name=name)

    def is_closed(self, name=None):
        """A scalar bool tensor: whether the queue is closed."""
        if name is None:
            name = f"{self._name}_IsClosed"
        with _ops.colocate_with(self._queue_ref):
            return apply_op("QueueIsClosedV2", [self._queue_ref], {}, name=name).outputs[0]

    def size(self, name=None):
        """A scalar int32 tensor: the number of elements in the queue."""
        if name is None:
            name = f"{self._name}_Size"
        with _ops.colocate_with(self._queue_ref):
            return apply_op("QueueSizeV2", [self._queue_ref], {}, name=name).outputs[0]


def _create_queue(op_type, attrs, name):
    with _ops.init_scope():
        return apply_op(op_type, [], attrs, name=name).outputs[0]


def _capacity(capacity) -> int:
    capacity = int(capacity)
    if capacity == 0 or capacity < -1:
        raise ValueError(f"capacity must be positive (or -1 for unbounded), got {capacity}")
    return capacity


class FIFOQueue(QueueBase):
    """A queue that dequeues elements in first-in first-out order.

    Args:
        capacity: the most elements the queue holds (enqueues block beyond).
        dtypes: the component types (a DType or a list).
        shapes: None, or one fully defined shape per component (needed by dequeue_many).
        names: optional component names.
        shared_name: share the queue, under this name, with other sessions of the same server.
        name: op name.
    """

    def __init__(self, capacity, dtypes, shapes=None, names=None, shared_name=None,
                 name="fifo_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        ref = _create_queue("FIFOQueueV2", {"component_types": dtypes, "shapes": _shape_attr(shapes),
                                            "capacity": _capacity(capacity),
                                            "shared_name": shared_name or ""}, name)
        super().__init__(dtypes, shapes, names, ref)


class PaddingFIFOQueue(QueueBase):
    """A FIFO queue whose shapes may have unknown dimensions; dequeue_many pads batches with zeros.

    Args:
        capacity, dtypes, names, shared_name, name: as `FIFOQueue`.
        shapes: one shape per component, of known rank; None dimensions may vary per element.
    """

    def __init__(self, capacity, dtypes, shapes, names=None, shared_name=None,
                 name="padding_fifo_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes, unknown_dim_allowed=True)
        names = _as_name_list(names, dtypes)
        if len(dtypes) != len(shapes):
            raise ValueError(f"Shapes must be provided for all components, but received "
                             f"{len(dtypes)} dtypes and {len(shapes)} shapes.")
        ref = _create_queue("PaddingFIFOQueueV2",
                            {"component_types": dtypes, "shapes": shapes,
                             "capacity": _capacity(capacity), "shared_name": shared_name or ""},
                            name)
        super().__init__(dtypes, shapes, names, ref)


class RandomShuffleQueue(QueueBase):
    """A queue that dequeues elements in a random order.

    Args:
        capacity: the most elements the queue holds.
        min_after_dequeue: until the queue is closed, a dequeue leaves at least this many.
        dtypes, shapes, names, shared_name, name: as `FIFOQueue`.
        seed: op-level seed (combined with the graph seed as for random ops).
    """

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, names=None, seed=None,
                 shared_name=None, name="random_shuffle_queue"):
        dtypes = _as_type_list(dtypes)
        shapes = _as_shape_list(shapes)
        names = _as_name_list(names, dtypes)
        seed1, seed2 = random_seed.get_seed(seed)
        if seed1 is None and seed2 is None:
            seed1, seed2 = 0, 0
        elif seed is None and shared_name is not None:
            # A graph seed without an op seed: seed2 depends only on it and the shared name, so
            # every graph that shares the queue builds it with the same seeds.
            digest = hashlib.md5(f"{seed1}{shared_name}".encode("utf-8")).hexdigest()
            seed2 = int(digest[:8], 16) & 0x7FFFFFFF
        ref = _create_queue("RandomShuffleQueueV2",
                            {"component_types": dtypes, "shapes": _shape_attr(shapes),
                             "capacity": _capacity(capacity),
                             "min_after_dequeue": int(min_after_dequeue), "seed": int(seed1),
                             "seed2": int(seed2), "shared_name": shared_name or ""}, name)
        super().__init__(dtypes, shapes, names, ref)


class PriorityQueue(QueueBase):
    """A queue that dequeues elements by priority, smallest first.

    Every element's first component is an int64 scalar priority, followed by components of
    `types` (so enqueue takes ``(priority, v1, ...)`` and dequeue returns the same tuple).

    Args:
        capacity: the most elements the queue holds.
        types: the types of the components after the priority.
        shapes: None, or one fully defined shape per component of `types`.
        names, shared_name, name: as `FIFOQueue` (names cover the priority too).
    """

    def __init__(self, capacity, types, shapes=None, names=None, shared_name=None,
                 name="priority_queue"):
        types = _as_type_list(types)
        shapes = _as_shape_list(shapes)
        ref = _create_queue("PriorityQueueV2",
                            {"component_types": types, "shapes": _shape_attr(shapes),
                             "capacity": _capacity(capacity), "shared_name": shared_name or ""},
                            name)
        all_types = [_dtypes.int64] + types
        all_shapes = [_ts.TensorShape([])] + shapes if shapes is not None else None
        super().__init__(all_types, all_shapes, _as_name_list(names, all_types), ref)

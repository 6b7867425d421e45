"""`GraphExecutionState`: a session's graph on its way to partitions (TF's class of that name).

The one step pipeline of the embedded runtime (`DirectSession`) and of the master (`Master`):

1. **place** the whole graph once per key (graph version, and for the master the devices'
   incarnations): every stateful node (variable, queue) is pinned to the device it was first placed
   on, so state keeps its home when the graph grows and is placed again; the caller may rewrite the
   pinned graph first (the master's default task for nodes without a job);
2. for each step signature, **prune** the placed graph to what the fetches and targets need (feeds
   become `_Arg`, fetches `_Retval` nodes, on the client device), decide once where the feeds and
   fetches live (`feeds_fetches.place_feeds_and_fetches`: each `_Arg` on the devices that read it,
   each `_Retval` on its producer's device, or a `_Send` there to the device that pulls the
   fetches), **rewrite** it (the remapper's conv fusion, then elementwise fusion; both off with
   `global_jit_level=OFF`), and **partition** it per device with Send/Recv pairs. Nothing is moved
   after partitioning: the callers find the feeds and fetches of a partition in it.

What differs between the two callers is only policy, passed in: the master's default task and its
placement-failure diagnosis wrap `place`, it places by the kernels each task advertises rather
than its own registry, and its streamed steps name a pull device for their fetches.

`FeedCheck` holds what a signature's feeds must be (each fed tensor's dtype, a placeholder's
declared shape), for a server that receives feeds it did not check itself (the master: the client
library checks its own feeds, but a request may come from any client).
"""

from __future__ import annotations

from kernflow.core.framework import dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.framework.node_def_util import parse_input
from kernflow.core.runtime import arithmetic, fusion, remapper, summary_fusion
from kernflow.core.runtime.feeds_fetches import place_feeds_and_fetches
from kernflow.core.runtime.partition import partition
from kernflow.core.runtime.placer import PlacementOptions, place
from kernflow.core.runtime.prune import output_dtypes_of, prune

__all__ = ["GraphExecutionState", "FeedCheck"]

# Ops whose `shape` attr declares the static shape of the value fed in their place.
_SHAPED_FEED_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})


class GraphExecutionState:
    """Places a session's graph and turns step signatures into partitions.

    Args:
        kernels: what placement and the rewrites ask about kernels: the `KernelRegistry` (the
            embedded runtime), or a `placer.KernelSupport` that also answers the registry's
            ``find(op_type, device_type, attrs)`` (the master's `ClusterKernels`: placement asks per
            device, the rewrites which fused kernels a device type has).
        jit_level: OptimizerOptions.global_jit_level of the session's config.

    Not thread-safe: callers hold their session's lock around `placed` and `step`.
    """

    def __init__(self, kernels, jit_level: int):
        self._kernels = kernels
        self.jit_level = jit_level
        self.stateful_devices: dict[str, str] = {}
        self._placed = None
        self._placed_key = None

    def placed(self, graph_def, devices, options: PlacementOptions, key, transform=None):
        """The whole graph placed over `devices`, recomputed only when `key` changes.

        Args:
            graph_def: the session's full GraphDef (not modified).
            devices: the `Device`s (or descriptions with `name`, `device_type`) to place on.
            options: the `PlacementOptions`.
            key: anything comparable; the last placement is reused while it is equal.
            transform: optional fn(GraphDef) -> GraphDef applied after pinning, before placing.

        Raises:
            InvalidArgumentError: a node cannot be placed (from the placer).
        """
        if self._placed is not None and self._placed_key == key:
            return self._placed
        names = {d.name for d in devices}
        pinned = type(graph_def)()
        pinned.CopyFrom(graph_def)
        for nd in pinned.node:
            dev = self.stateful_devices.get(nd.name)
            if dev is not None and dev in names:   # a device that went away is placed anew
                nd.device = dev
        if transform is not None:
            pinned = transform(pinned)
        placed = place(pinned, devices, self._kernels, options)
        for nd in placed.node:
            if op_def_registry.get(nd.op).stateful:
                self.stateful_devices[nd.name] = nd.device
        self._placed, self._placed_key = placed, key
        return placed

    def invalidate(self) -> None:
        """Forgets the placement (the next `placed` call places again)."""
        self._placed = self._placed_key = None

    def step(self, placed, feeds, fetches, targets, client_device: str, devices_by_name: dict,
             incarnations: dict, pull_device: str | None = None):
        """(pruned and rewritten GraphDef, {device name: partition GraphDef}) of one signature.

        Args:
            placed: what `placed` returned.
            feeds, fetches, targets: tensor and op names of the signature.
            client_device: where prune puts `_Arg`/`_Retval` nodes; a feed read nowhere else stays.
            devices_by_name: device name -> Device (the rewrites look at device types).
            incarnations: device name -> incarnation (rendezvous keys).
            pull_device: None, or the device that pulls every fetch: each fetch is then a `_Send`
                to it from its producer's device instead of a `_Retval`.
        """
        pruned = prune(placed, feeds, fetches, targets, client_device=client_device)
        place_feeds_and_fetches(pruned, client_device, pull_device, incarnations)
        pruned = arithmetic.simplify_arithmetic(pruned, devices_by_name, self._kernels,
                                                self.jit_level, keep=targets)
        pruned = remapper.remap(pruned, devices_by_name, self._kernels, self.jit_level)
        pruned = summary_fusion.fuse_scalar_summaries(pruned, devices_by_name, self._kernels,
                                                      self.jit_level, keep=targets)
        pruned = fusion.fuse_elementwise(pruned, devices_by_name, self._kernels, self.jit_level)
        return pruned, partition(pruned, incarnations)


class FeedCheck:
    """What the feeds of one step signature must be: the fed tensor's dtype and, for a placeholder,
    the shape its `shape` attr declares (unknown dimensions match any size).

    Built once per signature from the session's graph; `check_protos` then costs a dtype and a
    shape compare per feed.

    Args:
        graph_def: the session's graph (unpruned: fed placeholders are still there).
        feeds: the signature's fed tensor names ("op:0"), all present in `graph_def` (prune
            has checked them).
    """

    def __init__(self, graph_def, feeds):
        wanted: dict[str, list] = {}
        for i, f in enumerate(feeds):
            name, idx, _ = parse_input(f)
            wanted.setdefault(name, []).append((i, idx))
        # Per feed: (tensor name, node, op, dtype enum, rank or None, ((dim, size), ...) known).
        self._specs = [None] * len(feeds)
        for nd in graph_def.node:
            got = wanted.get(nd.name)
            if got is None:
                continue
            dts = output_dtypes_of(nd)
            dims = _declared_dims(nd)
            for i, idx in got:
                d = dims if idx == 0 else None
                self._specs[i] = (feeds[i], nd.name, nd.op, dts[idx].base_dtype.as_datatype_enum,
                                  None if d is None else len(d),
                                  () if d is None else tuple((k, n) for k, n in enumerate(d) if n >= 0))

    def check_protos(self, named_tensors) -> None:
        """Checks the feeds of one step, given as `NamedTensor`s in signature order.

        Raises:
            InvalidArgumentError: a feed's dtype differs from its tensor's, or its shape
                contradicts the placeholder's declared shape; the message names the tensor, its
                node and op, and the expected and actual dtype or shape.
        """
        for spec, nt in zip(self._specs, named_tensors):
            if spec is None:
                continue
            t = nt.tensor
            if t.dtype != spec[3]:
                raise errors.InvalidArgumentError(
                    None, None, f"Cannot feed value of dtype {_dtype_name(t.dtype)} for Tensor "
                    f"{spec[0]} of {spec[2]} '{spec[1]}', which has dtype {_dtype_name(spec[3])}")
            rank = spec[4]
            if rank is not None:
                dim = t.tensor_shape.dim
                if len(dim) != rank:
                    self._shape_error(spec, dim)
                for k, n in spec[5]:
                    if dim[k].size != n:
                        self._shape_error(spec, dim)

    @staticmethod
    def _shape_error(spec, dim):
        want = [None] * spec[4]
        for k, n in spec[5]:
            want[k] = n
        raise errors.InvalidArgumentError(
            None, None, f"Cannot feed value of shape {tuple(d.size for d in dim)} for Tensor "
            f"{spec[0]} of {spec[2]} '{spec[1]}', which has shape {tuple(want)}")


def _declared_dims(nd) -> list | None:
    """The sizes (-1 unknown) a placeholder's `shape` attr declares, or None when unknown."""
    if nd.op not in _SHAPED_FEED_OPS or "shape" not in nd.attr \
            or nd.attr["shape"].WhichOneof("value") != "shape":
        return None
    shape = nd.attr["shape"].shape
    if shape.unknown_rank:
        return None
    return [d.size for d in shape.dim]


def _dtype_name(enum: int) -> str:
    try:
        return dtypes.as_dtype(enum).name
    except (TypeError, ValueError, KeyError):
        return f"<DataType {enum}>"

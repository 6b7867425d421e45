"""`GraphExecutionState`: a session's graph on its way to partitions (TF's class of that name).

The one step pipeline of the embedded runtime (`DirectSession`) and of the master (`Master`):

1. **place** the whole graph once per key (graph version, and for the master the devices'
   incarnations): every stateful node (variable, queue) is pinned to the device it was first placed
   on, so state keeps its home when the graph grows and is placed again; the caller may rewrite the
   pinned graph first (the master's default task for nodes without a job);
2. for each step signature, **prune** the placed graph to what the fetches and targets need (feeds
   become `_Arg`, fetches `_Retval` nodes), let the caller decide where the feeds and fetches
   live (`arg_policy`), **rewrite** it (the remapper's conv fusion, then elementwise fusion; both off
   with `global_jit_level=OFF`), and **partition** it per device with Send/Recv pairs.

What differs between the two callers is only policy, passed in: the master's default task and its
placement-failure diagnosis wrap `place`; DirectSession's `arg_policy` puts in-process feeds and
fetches next to their consumers and producers.
"""

from __future__ import annotations

from kernflow.core.framework import op_def_registry
from kernflow.core.runtime import fusion, remapper
from kernflow.core.runtime.partition import partition
from kernflow.core.runtime.placer import PlacementOptions, place
from kernflow.core.runtime.prune import prune

__all__ = ["GraphExecutionState"]


class GraphExecutionState:
    """Places a session's graph and turns step signatures into partitions.

    Args:
        kernels: the `KernelRegistry` (placement asks which devices have kernels; the rewrites ask
            which fused kernels exist).
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
             incarnations: dict, arg_policy=None):
        """(pruned and rewritten GraphDef, {device name: partition GraphDef}) of one signature.

        Args:
            placed: what `placed` returned.
            feeds, fetches, targets: tensor and op names of the signature.
            client_device: where `_Arg`/`_Retval` nodes go unless `arg_policy` moves them.
            devices_by_name: device name -> Device (the rewrites look at device types).
            incarnations: device name -> incarnation (rendezvous keys).
            arg_policy: optional fn(pruned GraphDef, client_device) that moves `_Arg`/`_Retval`
                nodes in place before the graph is rewritten and partitioned.
        """
        pruned = prune(placed, feeds, fetches, targets, client_device=client_device)
        if arg_policy is not None:
            arg_policy(pruned, client_device)
        pruned = remapper.remap(pruned, devices_by_name, self._kernels, self.jit_level)
        pruned = fusion.fuse_elementwise(pruned, devices_by_name, self._kernels, self.jit_level)
        return pruned, partition(pruned, incarnations)

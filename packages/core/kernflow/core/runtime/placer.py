"""Place: assign every node of a (pruned) GraphDef to a device.

Heuristics, in order (TF's placer.cc, plus the whitepaper's simulated greedy placement):

1. *Colocation groups*: nodes named in each other's ``_class`` ("loc:@name") attr, and any node with
   a reference input and that reference's producer (a stateful op sits with its variable), form one
   group placed as a unit.
2. *Constraints*: a group may only go to devices matching every member's requested device (partial
   specs like "/device:CPU:1" or "/job:ps" match many) and having a kernel for every member.
   ``allow_soft_placement`` drops an unsatisfiable device type/index instead of failing. Whether a
   device has a kernel is a `KernelSupport`'s answer for that device: the process's registry by
   device type in the embedded runtime (`RegistryKernels`), what the device's task advertises on a
   cluster (the master's `ClusterKernels`), so a missing kernel fails here, naming the devices.
3. *Greedy simulation*: groups are visited in topological order; each goes to the candidate where
   the simulated step would finish it earliest: when the device (or the hardware it shares, see
   `Device.resource_key`) is free, plus the time its inputs take to arrive from other devices, plus
   the group's estimated cost there (measured costs when the cost model has them, static estimates
   otherwise). Ties prefer the higher-priority device type, then the lower device.
4. *Generators follow their consumer*: a group of nodes without inputs that holds no state (a
   Const, a Placeholder) is placed after the rest, on its first consumer's device when it may go
   there (TF placer.cc's generator heuristic), so a constant never costs a transfer.
5. *State prefers the accelerator*: an unconstrained group holding state (a variable and the ops
   updating it) goes to the highest-priority device type that can take it, as TF keeps variables
   on GPU:0; everything that reads it then weighs the transfer to move elsewhere.
With ``log_device_placement`` each node's line also says why it is not on the preferred device type
when that type has no kernel for it.
"""

from __future__ import annotations

import dataclasses
import logging
import sys

from kernflow.core.framework import device_spec
from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.runtime import cost_model as _cost
from kernflow.core.runtime.executor import node_attrs, parse_input

__all__ = ["place", "colocation_groups", "PlacementOptions", "ANY_DEVICE_OPS", "KernelSupport",
           "RegistryKernels", "kernel_support", "dtype_attrs_str"]

_log = logging.getLogger(__name__)
# Ops handled by the executor itself: they run on whatever device they are put on.
ANY_DEVICE_OPS = frozenset({"_Arg", "_Retval"})


@dataclasses.dataclass
class PlacementOptions:
    allow_soft_placement: bool = False
    log_device_placement: bool = False
    client_device: str = ""
    cost_model: _cost.CostModel | None = None
    # Device types to prefer when costs tie, highest first.
    type_priority: dict = dataclasses.field(default_factory=dict)


class KernelSupport:
    """Which devices can run a node: what heuristic 2 asks, per device.

    Subclasses answer `has_kernel` for one device and explain a node no allowed device can run.
    """

    def has_kernel(self, device, op_type: str, attrs: dict) -> bool:
        """True if `device` has a kernel for a node of `op_type` with these typed attrs."""
        raise NotImplementedError

    def no_kernel_message(self, node_name: str, op_type: str, attrs: dict, requested: str,
                          lacking: list, devices: list) -> str:
        """Why node `node_name` cannot be placed: no device of `lacking` (those matching its
        group's device request, `requested`, "(any)" when none) has a kernel for it. `devices` are
        all the placer's devices. The placer puts "Cannot assign a device for operation X: " first.
        """
        raise NotImplementedError


class RegistryKernels(KernelSupport):
    """Kernel support from this process's `KernelRegistry`: a device has a kernel when its type
    has one (the embedded runtime, whose devices run this process's kernels)."""

    def __init__(self, kernels):
        self.kernels = kernels

    def has_kernel(self, device, op_type, attrs):
        return self.kernels.find(op_type, device.device_type, attrs) is not None

    def no_kernel_message(self, node_name, op_type, attrs, requested, lacking, devices):
        have = self.kernels.device_types_for(op_type, attrs)
        return (f"Could not satisfy explicit device specification '{requested}' because no supported "
                f"kernel for {lacking[0].device_type} devices is available (op {node_name} of type "
                f"{op_type}; devices with a kernel: {', '.join(have) or 'none'}).")


def kernel_support(kernels) -> KernelSupport:
    """`kernels` itself when it is a `KernelSupport`, else `RegistryKernels` of that registry."""
    return kernels if isinstance(kernels, KernelSupport) else RegistryKernels(kernels)


def dtype_attrs_str(attrs: dict) -> str:
    """A node's dtype attrs as TF's kernel errors show them: ``{T=float32, Tidx=int32}``."""
    parts = []
    for k, v in sorted((attrs or {}).items()):
        vals = v if isinstance(v, list) else [v]
        if vals and all(getattr(x, "base_dtype", None) is not None for x in vals):
            shown = ", ".join(x.name for x in vals)
            parts.append(f"{k}={'[' + shown + ']' if isinstance(v, list) else shown}")
    return "{" + ", ".join(parts) + "}"


class _UnionFind:
    def __init__(self, n):
        self.parent = list(range(n))

    def find(self, x):
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _classes(nd, attrs) -> list:
    """The ``_class`` colocation names of a node (from its typed attrs when known, else raw)."""
    if attrs is not None:
        return attrs.get("_class", []) or []
    if "_class" not in nd.attr:
        return []
    return [c.decode() if isinstance(c, bytes) else c for c in nd.attr["_class"].list.s]


def colocation_groups(nds, op_defs, attrs):
    """TF's colocation rules over a graph's nodes: the group root of every node.

    Nodes named in each other's ``_class`` ("loc:@name") attr share a group, and so does a node with
    the producer of each of its reference inputs (a stateful op sits with its variable). The placer
    and the master (its default task per group) both use this.

    Args:
        nds: the NodeDefs.
        op_defs: their OpDefs; None for an op that is not registered (only its ``_class`` counts).
        attrs: their typed attrs (`node_attrs`); None where the OpDef is None.

    Returns:
        (roots, yielding): ``roots[i]`` is the index of node i's group root (the smallest index in
        the group); `yielding` holds the nodes that joined a group only through a reference input
        (an Assign built under another device scope), whose own device request gives way.
    """
    index = {nd.name: i for i, nd in enumerate(nds)}
    uf = _UnionFind(len(nds))
    yielding: set[int] = set()
    for i, nd in enumerate(nds):
        classes = _classes(nd, attrs[i])
        for c in classes:
            if c.startswith("loc:@") and c[5:] in index:
                uf.union(i, index[c[5:]])
        if op_defs[i] is None:
            continue
        ref_flags = [a.is_ref for a, _ in op_defs[i].expand_inputs(attrs[i])]
        data_inputs = [parse_input(s) for s in nd.input if not s.startswith("^")]
        for (name, _, _), is_ref in zip(data_inputs, ref_flags):
            if is_ref and name in index:
                uf.union(i, index[name])
                if not any(c.startswith("loc:@") for c in classes):
                    yielding.add(i)
    return [uf.find(i) for i in range(len(nds))], yielding


def _merge_specs(members, nds, specs, yielding=frozenset()):
    """The device request every member of a colocation group agrees on.

    Members in `yielding` (ops that only join the group through a reference input, like an Assign
    built under another device scope) give way: as in TF, their own request is ignored when it
    conflicts with their variable's group.
    """
    merged = device_spec.DeviceSpec()
    owner = {}
    for m in sorted(members, key=lambda m: m in yielding):
        s = specs[m]
        if s is None:
            continue
        fields = [(f, getattr(s, f)) for f in ("job", "replica", "task", "device_type", "device_index")]
        if m in yielding and any(v is not None and getattr(merged, f) not in (None, v) for f, v in fields):
            continue
        for f, v in fields:
            if v is None:
                continue
            cur = getattr(merged, f)
            if cur is not None and cur != v:
                raise errors.InvalidArgumentError(
                    None, None, f"Cannot colocate nodes {nds[owner[f]].name} and {nds[m].name}: "
                    f"their devices conflict ('{nds[owner[f]].device}' vs '{nds[m].device}').")
            setattr(merged, f, v)
            owner.setdefault(f, m)
    return merged


def _matches(spec, dev) -> bool:
    d = dev.spec
    return all(getattr(spec, f) is None or getattr(spec, f) == getattr(d, f)
               for f in ("job", "replica", "task", "device_type", "device_index"))


def place(graph_def, devices, kernels, options: PlacementOptions | None = None):
    """Returns a copy of `graph_def` with every node's device set to a full device name.

    Args:
        graph_def: the GraphDef to place (not modified).
        devices: the `Device`s (or descriptions with `name`, `device_type`, `spec`, `resource_key`).
        kernels: a `KernelSupport` deciding per device whether it can run a node, or a
            `KernelRegistry` (then `RegistryKernels` of it: by device type).
        options: `PlacementOptions`.

    Raises:
        InvalidArgumentError: when a node's constraints cannot be satisfied (the message names the
            node, the requested device and what is available; for a missing kernel, the
            `KernelSupport`'s explanation).
    """
    options = options or PlacementOptions()
    kernels = kernel_support(kernels)
    out = type(graph_def)()
    out.CopyFrom(graph_def)
    nds = list(out.node)
    n = len(nds)
    index = {nd.name: i for i, nd in enumerate(nds)}
    op_defs = [op_def_registry.get(nd.op) for nd in nds]
    attrs = [node_attrs(nd, od) for nd, od in zip(nds, op_defs)]
    specs = []
    for nd in nds:
        dev = nd.device or (options.client_device if nd.op in ANY_DEVICE_OPS else "")
        specs.append(device_spec.DeviceSpec.from_string(dev) if dev else None)
    roots, yielding = colocation_groups(nds, op_defs, attrs)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(roots[i], []).append(i)
    candidates = {}
    for root, members in groups.items():
        cands = _candidates(members, nds, op_defs, attrs, specs, devices, kernels, options, yielding)
        if any(op_defs[m].stateful for m in members) and options.type_priority:
            top = max(options.type_priority.get(d.device_type, 0) for d in cands)
            cands = [d for d in cands if options.type_priority.get(d.device_type, 0) == top]
        candidates[root] = cands
    generators = {root for root, members in groups.items()
                  if all(not nds[m].input and not op_defs[m].stateful for m in members)}
    _greedy_assign(nds, attrs, groups, roots, candidates, index, options, generators)
    if options.log_device_placement:
        preferred = [t for t, _ in sorted(options.type_priority.items(), key=lambda kv: -kv[1])
                     if any(d.device_type == t for d in devices)]
        for i, nd in enumerate(nds):
            line = f"{nd.name}: ({nd.op}): {nd.device}"
            dev_type = device_spec.DeviceSpec.from_string(nd.device).device_type
            better = [t for t in preferred[:preferred.index(dev_type)] if dev_type in preferred] \
                if nd.op not in ANY_DEVICE_OPS else []
            missing = [t for t in better if not any(kernels.has_kernel(d, nd.op, attrs[i])
                                                    for d in devices if d.device_type == t)]
            if missing:
                line += f" (no {'/'.join(missing)} kernel for {nd.op})"
            _log.info(line)
            print(line, file=sys.stderr)
    return out


def _candidates(members, nds, op_defs, attrs, specs, devices, kernels, options, yielding=frozenset()):
    spec = _merge_specs(members, nds, specs, yielding)
    ops = [m for m in members if nds[m].op not in ANY_DEVICE_OPS]

    def supported(dev):
        return all(kernels.has_kernel(dev, nds[m].op, attrs[m]) for m in ops)

    matching = [d for d in devices if _matches(spec, d)]
    ok = [d for d in matching if supported(d)]
    if ok:
        return ok
    if options.allow_soft_placement:
        soft = spec.replace(device_type=None, device_index=None)
        ok = [d for d in devices if _matches(soft, d) and supported(d)]
        if ok:
            return ok
    first = nds[members[0]]
    requested = spec.to_string() or "(any)"
    if not matching:
        avail = ", ".join(d.name for d in devices)
        raise errors.InvalidArgumentError(
            None, None, f"Cannot assign a device for operation {first.name}: Could not satisfy explicit "
            f"device specification '{requested}' because no devices matching that specification are "
            f"registered in this process; available devices: {avail}")
    bad = next((m for m in ops if not any(kernels.has_kernel(d, nds[m].op, attrs[m]) for d in matching)),
               None)
    if bad is None:   # each member runs somewhere, but no device runs them all
        where = "; ".join(f"{nds[m].name} ({nds[m].op}): "
                          f"{', '.join(d.name for d in matching if kernels.has_kernel(d, nds[m].op, attrs[m]))}"
                          for m in ops)
        raise errors.InvalidArgumentError(
            None, None, f"Cannot assign a device for operation {first.name}: its colocation group must "
            f"share one device, and no device matching '{requested}' has a kernel for every member "
            f"(devices with a kernel: {where}).")
    raise errors.InvalidArgumentError(
        None, None, f"Cannot assign a device for operation {first.name}: " + kernels.no_kernel_message(
            nds[bad].name, nds[bad].op, attrs[bad], requested, matching, devices))


def _topo(nds, index):
    indeg = [0] * len(nds)
    outs = [[] for _ in nds]
    for j, nd in enumerate(nds):
        for s in nd.input:
            name, _, _ = parse_input(s)
            if name in index:
                indeg[j] += 1
                outs[index[name]].append(j)
    order = [j for j in range(len(nds)) if indeg[j] == 0]
    k = 0
    while k < len(order):
        for j in outs[order[k]]:
            indeg[j] -= 1
            if indeg[j] == 0:
                order.append(j)
        k += 1
    # Nodes on cycles (loops, added later) keep their GraphDef order at the end.
    seen = set(order)
    order.extend(j for j in range(len(nds)) if j not in seen)
    return order


def _greedy_assign(nds, attrs, groups, roots, candidates, index, options, generators=frozenset()):
    cm = options.cost_model or _cost.CostModel()
    prio = options.type_priority
    finish = [0.0] * len(nds)
    device_of = [None] * len(nds)
    ready: dict[str, float] = {}
    dev_rank = {}
    for lst in candidates.values():
        for d in lst:
            dev_rank.setdefault(d.name, len(dev_rank))
    order = _topo(nds, index)
    for i in order:
        root = roots[i]
        if device_of[i] is not None or root in generators:
            continue
        members = groups[root]
        mset = set(members)
        best = None
        for d in candidates[root]:
            start = ready.get(d.resource_key, 0.0)
            for m in members:
                for s in nds[m].input:
                    name, idx, ctrl = parse_input(s)
                    j = index.get(name)
                    if j is None or j in mset or device_of[j] is None:
                        continue
                    arrive = finish[j]
                    if device_of[j] is not d and not ctrl:
                        arrive += cm.transfer_seconds(nds[j], idx, device_of[j], d)
                    start = max(start, arrive)
            cost = sum(cm.node_seconds(nds[m], attrs[m], d) for m in members)
            key = (start + cost, -prio.get(d.device_type, 0), dev_rank[d.name])
            if best is None or key < best[0]:
                best = (key, d, start + cost)
        _, dev, end = best
        for m in members:
            device_of[m] = dev
            finish[m] = end
            nds[m].device = dev.name
        ready[dev.resource_key] = end
    _place_generators(nds, groups, roots, candidates, index, generators, device_of, dev_rank, prio)


def _place_generators(nds, groups, roots, candidates, index, generators, device_of, dev_rank, prio):
    """Puts each generator group on the device of its first placed consumer, if allowed there."""
    first_consumer: dict[int, object] = {}
    for j, nd in enumerate(nds):
        for s in nd.input:
            name, _, _ = parse_input(s)
            k = index.get(name)
            if k is not None and device_of[j] is not None:
                first_consumer.setdefault(roots[k], device_of[j])
    for root in generators:
        cands = candidates[root]
        dev = first_consumer.get(root)
        if dev is None or dev not in cands:
            dev = min(cands, key=lambda d: (-prio.get(d.device_type, 0), dev_rank[d.name]))
        for m in groups[root]:
            device_of[m] = dev
            nds[m].device = dev.name

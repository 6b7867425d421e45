"""What the master places ops by: the kernels each task advertises in GetStatus.

The master runs no kernels, and the plugins installed where it runs say nothing about the workers:
a master without a plugin must still place the plugin's ops on the workers that have it, and a
worker without it must never be given them. So every task lists its kernels (GetStatus with
`list_kernels`: per device type, the op types with an unconstrained kernel and each dtype-constrained
kernel, `kernflow.worker.worker.advertised_kernels`) and the placer asks, per device, whether that
device's task has a kernel matching the node (`ClusterKernels.has_kernel`). A node no allowed device
can run fails placement, at the session's first step and before any RegisterGraph, with an
`InvalidArgumentError` naming the op, its type and the tasks that lack it.

The list is sent once per task and plugin set: the master sends the digest of the list it holds
for the task, and the task answers with the list only when its own digest differs (a restart with
other plugins). Tasks with equal digests share one parsed list. Health checks do not ask for it.
"""

from __future__ import annotations

import threading

from kernflow.core.framework import device_spec
from kernflow.core.framework import dtypes
from kernflow.core.framework import errors
from kernflow.core.runtime.placer import KernelSupport, dtype_attrs_str

from kernflow.client.protobuf import worker_pb2
from kernflow.master.devices import canonical_task, task_of, task_sort_key

__all__ = ["TypeKernels", "TaskKernels", "ClusterKernels", "SessionKernels"]

# How many devices with a kernel a placement error lists.
_LISTED = 8


class TypeKernels:
    """The kernels one task has for one device type, from its `KernelList`."""

    def __init__(self, kernel_list: worker_pb2.KernelList):
        self.device_type = kernel_list.device_type
        self._free = frozenset(kernel_list.op_types)
        self._constrained: dict[str, list[tuple]] = {}
        for ck in kernel_list.constrained:
            cons = tuple((c.attr, frozenset(c.allowed)) for c in ck.constraints)
            self._constrained.setdefault(ck.op_type, []).append(cons)

    def supports(self, op_type: str, attrs: dict) -> bool:
        """Whether a kernel matches a node of `op_type` with these typed attrs (as
        `KernelDef.matches`: an attr the node lacks constrains nothing)."""
        if op_type in self._free:
            return True
        return any(_matches(cons, attrs) for cons in self._constrained.get(op_type, ()))

    def has_op(self, op_type: str) -> bool:
        """Whether any kernel of `op_type` exists here, whatever its dtypes."""
        return op_type in self._free or op_type in self._constrained

    def registered(self, op_type: str) -> list[str]:
        """TF's "Registered kernels" lines of `op_type`: ``device='CPU'; T in [float32, ...]``."""
        if op_type in self._free:
            return [f"device='{self.device_type}'"]
        return [f"device='{self.device_type}'; " + "; ".join(
            f"{attr} in [{', '.join(sorted(_dtype_name(e) for e in allowed))}]" for attr, allowed in cons)
            for cons in self._constrained.get(op_type, ())]


def _matches(cons, attrs) -> bool:
    for attr, allowed in cons:
        v = attrs.get(attr)
        if v is None:
            continue
        for x in (v if isinstance(v, list) else [v]):
            base = getattr(x, "base_dtype", None)
            if base is None or base.as_datatype_enum not in allowed:
                return False
    return True


def _dtype_name(enum: int) -> str:
    try:
        return dtypes.as_dtype(enum).name
    except (TypeError, ValueError, KeyError):
        return f"<DataType {enum}>"


class TaskKernels:
    """Everything one task advertised: `TypeKernels` per device type, and the list's digest."""

    def __init__(self, kernel_lists, digest: str):
        self.digest = digest
        self.by_type = {kl.device_type: TypeKernels(kl) for kl in kernel_lists}

    def supports(self, device_type: str, op_type: str, attrs: dict) -> bool:
        k = self.by_type.get(device_type)
        return k is not None and k.supports(op_type, attrs)


class ClusterKernels:
    """The kernels of every task the master has heard from (thread-safe; shared by its sessions).

    `request` builds the GetStatusRequest of a device refresh and `observe` reads its answer;
    `has_kernel` is what the placer asks (through a session's `SessionKernels`).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._by_task: dict[str, TaskKernels] = {}

    def request(self, task: str) -> worker_pb2.GetStatusRequest:
        """GetStatus asking `task` for its kernels, unless it still has those the master holds."""
        held = self._by_task.get(task)
        return worker_pb2.GetStatusRequest(list_kernels=True, kernels_digest=held.digest if held else "")

    def observe(self, task: str, resp: worker_pb2.GetStatusResponse) -> None:
        """Takes in `task`'s answer to `request` (the held list stays when the digests agree)."""
        with self._lock:
            held = self._by_task.get(task)
            if held is not None and held.digest == resp.kernels_digest and not resp.kernels:
                return
            shared = next((k for k in self._by_task.values() if k.digest == resp.kernels_digest), None)
            if shared is None:   # equal digests, equal lists: tasks with the same plugins share one
                shared = TaskKernels(resp.kernels, resp.kernels_digest)
            self._by_task[task] = shared

    def of(self, task: str) -> TaskKernels | None:
        """What `task` advertised, or None when it was never asked."""
        return self._by_task.get(task)

    def check_graph(self, nodes, tasks) -> None:
        """At session creation and extension (as TF's master places the graph then): a node whose op
        type no task of the session has any kernel for, on any device type, fails now, before any
        step. (Which devices a node may use, and its dtypes, are decided at placement, the first
        step's.) Tasks never asked for their kernels are not judged.

        Raises:
            InvalidArgumentError: naming the first such node, its op and the tasks.
        """
        known = [self._by_task.get(t) for t in tasks]
        if not tasks or any(k is None for k in known):
            return
        have: set = set()
        for k in {id(k): k for k in known}.values():
            for t in k.by_type.values():
                have.update(t._free, t._constrained)
        for nd in nodes:
            if nd.op not in have:
                raise errors.InvalidArgumentError(
                    None, None, f"No OpKernel was registered to support Op '{nd.op}' used by node "
                    f"{nd.name}: none of the session's tasks ({', '.join(sorted(tasks))}) advertises a "
                    f"kernel for it in GetStatus, so the plugin that provides it is not installed "
                    f"there, or was installed after they started. Install the plugin on every worker "
                    f"and ps task that may run '{nd.op}', and restart them.")

    def has_kernel(self, device, op_type: str, attrs: dict) -> bool:
        """Whether `device` (a `RemoteDevice`) has a kernel matching the node, by its task's list."""
        k = self._by_task.get(device.task)
        return k is not None and k.supports(device.device_type, op_type, attrs)


class SessionKernels(KernelSupport):
    """A session's kernel support: `ClusterKernels`' answers over the session's devices, and the
    message of a node none of them can run.

    Args:
        cluster: the master's `ClusterKernels`.
        session: the master's session (its `devices`, `client_device` and `graph_def` are read when
            asked, so they may change between placements).
    """

    def __init__(self, cluster: ClusterKernels, session):
        self._cluster = cluster
        self._session = session

    def has_kernel(self, device, op_type, attrs):
        return self._cluster.has_kernel(device, op_type, attrs)

    def find(self, op_type: str, device_type: str, attrs: dict) -> bool:
        """Whether every task of the session with devices of `device_type` has a kernel matching the
        node: what the rewrites ask before introducing a fused op (a `KernelRegistry`'s `find`)."""
        tasks = {d.task for d in self._session.devices or () if d.device_type == device_type}
        return bool(tasks) and all(
            (k := self._cluster.of(t)) is not None and k.supports(device_type, op_type, attrs) for t in tasks)

    def no_kernel_message(self, node_name, op_type, attrs, requested, lacking, devices):
        lacking_types: dict[str, list[str]] = {}
        for d in lacking:
            types = lacking_types.setdefault(d.task, [])
            if d.device_type not in types:
                types.append(d.device_type)
        tasks = sorted(lacking_types, key=task_sort_key)
        where = ", ".join(f"{t} ({', '.join(lacking_types[t])})" for t in tasks)
        allows = "" if requested == "(any)" else f", the devices its device specification '{requested}' allows"
        shown_attrs = dtype_attrs_str(attrs)
        with_attrs = f" with these attrs {shown_attrs}" if shown_attrs != "{}" else ""
        msg = (f"No OpKernel was registered to support Op '{op_type}' used by node {node_name}{with_attrs} "
               f"on {where}{allows}: ")
        registered = self._registered(op_type, lacking_types)
        one = len(tasks) == 1
        if registered:
            msg += (f"{'that task advertises' if one else 'those tasks advertise'} kernels of '{op_type}' "
                    f"for other attrs only. Registered kernels: {'; '.join(registered)}.")
        else:
            msg += (f"{'that task does' if one else 'those tasks do'} not advertise a kernel for it (in "
                    f"GetStatus), so the plugin that provides it is not installed there, or was installed "
                    f"after the task started. Install the plugin on every worker and ps task that may run "
                    f"'{op_type}', and restart them.")
        have = [d.name for d in devices if self.has_kernel(d, op_type, attrs)]
        shown = ", ".join(have[:_LISTED]) + (f" and {len(have) - _LISTED} more" if len(have) > _LISTED else "")
        return msg + f" Devices with a kernel: {shown or 'none'}." + self._default_task_hint(node_name, requested)

    def _registered(self, op_type: str, lacking_types: dict) -> list[str]:
        out = []
        for task, types in sorted(lacking_types.items(), key=lambda kv: task_sort_key(kv[0])):
            k = self._cluster.of(task)
            for t in types:
                tk = k.by_type.get(t) if k is not None else None
                if tk is not None and tk.has_op(op_type):
                    out += [f"{line} on {task}" for line in tk.registered(op_type)]
        return out

    def _default_task_hint(self, node_name: str, requested: str) -> str:
        """Says so when the node named no job or task and was sent to the client task for that
        (`apply_default_task`), which is why it asks for a task without the kernel."""
        client = self._session.client_device
        nd = next((nd for nd in self._session.graph_def.node if nd.name == node_name), None)
        if nd is None or not client or requested == "(any)":
            return ""
        try:
            own = device_spec.DeviceSpec.from_string(nd.device) if nd.device else None
            merged = device_spec.DeviceSpec.from_string(requested)
        except ValueError:
            return ""
        if own is not None and (own.job is not None or own.task is not None):
            return ""
        client_task = task_of(client)
        if merged.job is None or merged.task is None or canonical_task(merged.to_string()) != client_task:
            return ""
        return (f" Node {node_name} names no job or task, so it runs on the client task {client_task}: "
                f"place it on a task with the kernel (kf.device), or install the plugin there.")

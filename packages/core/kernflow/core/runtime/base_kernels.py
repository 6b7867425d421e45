"""Kernels every device type needs, written once against the `Device` interface.

A device plugin calls ``register(registry, "MYDEV")`` from its `kernflow_register_kernels` hook to
get Const, Placeholder, Identity, Snapshot, NoOp and the in-process _Send/_Recv pair (which copy
through host memory when the two ends are devices of different kinds).
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import create_key

__all__ = ["register"]


def _placeholder(ctx):
    dt, shape, name = ctx.get_attr("dtype"), ctx.get_attr("shape"), ctx.name
    dims = "unknown" if shape.rank is None else \
        "[" + ",".join("?" if d is None else str(d) for d in shape.dim_values) + "]"

    def compute():
        raise errors.InvalidArgumentError(None, None, f"You must feed a value for placeholder tensor "
                                          f"'{name}' with dtype {dt.name} and shape {dims}")
    return compute


def _const(ctx):
    value = ctx.device.to_device(ctx.get_attr("value"))
    return lambda: value


def _key(ctx):
    """The rendezvous key without its last field (``frame:iteration``, added per invocation)."""
    key = create_key(ctx.get_attr("send_device"), ctx.get_attr("send_device_incarnation"),
                     ctx.get_attr("recv_device"), ctx.get_attr("tensor_name"))
    return key[:key.rindex(";") + 1]


def _shares_memory(device, other: str) -> bool:
    """True if tensors can pass from `device` to the device named `other` as they are: both sit in
    host memory, or both are devices of one kind in the same task (a GPU reads a peer GPU's array).
    Anything that leaves the task goes through host memory, as the wire carries host bytes."""
    other_type = other.rsplit("/", 1)[-1].split(":")[1]
    if not getattr(device, "has_device_memory", False):
        return other_type == "CPU" or other_type == device.device_type
    return other_type == device.device_type and other.rsplit("/", 1)[0] == device.name.rsplit("/", 1)[0]


def _send(ctx):
    prefix = _key(ctx)
    device = ctx.device
    as_is = _shares_memory(device, ctx.get_attr("recv_device"))
    to_host = device.to_host

    def compute(step, value):
        # Inside loops the key ends with the invocation's frame and iteration; a dead input
        # (an untaken branch) is sent as dead so the receiver's consumers do not run either.
        if step.is_input_dead:
            step.rendezvous.send(prefix + step.frame_key, None, True)
        else:
            step.rendezvous.send(prefix + step.frame_key, value if as_is else to_host(value))
    return compute


def _recv(ctx):
    prefix = _key(ctx)
    device = ctx.device
    # Handles (resources: stacks, TensorArrays, queues) and strings stay where they are.
    to_device = device.to_device if getattr(device, "has_device_memory", False) and \
        not _host_only(ctx.get_attr("T")) else None

    def compute(step, inputs, done):
        def got(value, is_dead, err):
            # Runs on the sender's thread: anything raised here must reach `done`, or this Recv
            # would never complete and its step would hang.
            if err is not None:
                done(err)
            elif is_dead:
                from kernflow.core.runtime.control_flow_executor import DEAD
                done(DEAD)
            elif to_device is None:
                done(value)
            else:
                try:
                    value = to_device(value)
                except Exception as e:  # noqa: BLE001 - the step fails naming this Recv
                    done(e)
                    return
                done(value)
        step.rendezvous.recv_async(prefix + step.frame_key, got)
    return compute


def _host_only(dtype) -> bool:
    """True for types no device memory holds: resource handles, variants, strings."""
    base = getattr(dtype, "base_dtype", dtype)
    return getattr(base, "name", "") in ("resource", "variant", "string")


def _never(ctx):
    op = ctx.op_type

    def compute(*args):
        raise errors.InternalError(None, None, f"{op} is run by the executor itself, not as a kernel")
    return compute


def _assert(ctx):
    summarize = ctx.get_attr("summarize")
    name = ctx.name

    def compute(condition, *data):
        if bool(condition):
            return None
        import numpy as np
        shown = []
        for d in data:
            a = np.asarray(d)
            if a.dtype.kind in "SUO" and a.ndim == 0:
                v = a.item()
                shown.append("[" + (v.decode() if isinstance(v, bytes) else str(v)) + "]")
            else:
                flat = a.reshape(-1)[:summarize]
                shown.append("[" + " ".join(str(x) for x in flat.tolist()) +
                             ("..." if a.size > summarize else "") + "]")
        raise errors.InvalidArgumentError(None, None, f"assertion failed: {' '.join(shown)} "
                                          f"(node {name})")
    return compute


def _snapshot(x):
    """A copy of `x` (a numpy or device array, or a numpy scalar); a 0-d numpy array's is a numpy
    scalar (immutable: the global step's read for the hooks, fetched and handed over as it is)."""
    if type(x) is np.ndarray and x.ndim == 0:
        return x[()]
    return x.copy()


def register(registry, device_type: str) -> None:
    """Registers the device-independent kernels for `device_type`."""
    registry.register("Placeholder", device_type, _placeholder)
    registry.register("Const", device_type, _const)
    registry.register_simple("Identity", device_type, lambda x: x, forwards=True)
    registry.register_simple("Snapshot", device_type, _snapshot)
    registry.register_simple("NoOp", device_type, lambda: None)
    # _Send moves its input to host memory itself when the receiver needs it there.
    registry.register("_Send", device_type, _send, needs_ctx=True, host_memory=("?tensor",))
    registry.register("_Recv", device_type, _recv, is_async=True)
    # Control-flow primitives: the executor (runtime/control_flow_executor.py) runs them itself; the
    # kernels exist so placement and lookup treat them like any op. Predicates stay in host memory.
    for ref in ("", "Ref"):
        registry.register(f"{ref}Switch", device_type, _never, forwards=True, host_memory=("pred",))
        registry.register(f"{ref}Merge", device_type, _never, forwards=True,
                          host_memory=("value_index",))
        for op in ("Enter", "Exit", "NextIteration"):
            registry.register(f"{ref}{op}", device_type, _never, forwards=True)
    registry.register("LoopCond", device_type, _never, host_memory=("*",))
    registry.register("ControlTrigger", device_type, _never)
    registry.register("Assert", device_type, _assert, host_memory=("*",))

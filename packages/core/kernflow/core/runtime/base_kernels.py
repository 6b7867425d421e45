"""Kernels every device type needs, written once against the `Device` interface.

A device plugin calls ``register(registry, "MYDEV")`` from its `kernflow_register_kernels` hook to
get Const, Placeholder, Identity, NoOp and the in-process _Send/_Recv pair (which copy through host
memory when the two ends are devices of different kinds).
"""

from __future__ import annotations

from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import create_key

__all__ = ["register"]


def _placeholder(ctx):
    dt, shape, name = ctx.get_attr("dtype"), ctx.get_attr("shape"), ctx.name
    dims = "unknown" if shape.rank is None else \
        "[" + ",".join("?" if d is None else str(d) for d in shape.dims) + "]"

    def compute():
        raise errors.InvalidArgumentError(None, None, f"You must feed a value for placeholder tensor "
                                          f"'{name}' with dtype {dt.name} and shape {dims}")
    return compute


def _const(ctx):
    value = ctx.device.to_device(ctx.get_attr("value"))
    return lambda: value


def _key(ctx):
    return create_key(ctx.get_attr("send_device"), ctx.get_attr("send_device_incarnation"),
                      ctx.get_attr("recv_device"), ctx.get_attr("tensor_name"))


def _shares_memory(device, other: str) -> bool:
    """True if tensors can pass from `device` to the device named `other` as they are: both sit in
    host memory, or both are devices of one kind in the same task (a GPU reads a peer GPU's array).
    Anything that leaves the task goes through host memory, as the wire carries host bytes."""
    other_type = other.rsplit("/", 1)[-1].split(":")[1]
    if not getattr(device, "has_device_memory", False):
        return other_type == "CPU" or other_type == device.device_type
    return other_type == device.device_type and other.rsplit("/", 1)[0] == device.name.rsplit("/", 1)[0]


def _send(ctx):
    key = _key(ctx)
    device = ctx.device
    as_is = _shares_memory(device, ctx.get_attr("recv_device"))
    to_host = device.to_host

    def compute(step, value):
        step.rendezvous.send(key, value if as_is else to_host(value))
    return compute


def _recv(ctx):
    key = _key(ctx)
    device = ctx.device
    to_device = None if not getattr(device, "has_device_memory", False) else device.to_device

    def compute(step, inputs, done):
        def got(value, is_dead, err):
            if err is not None:
                done(err)
            else:
                done(value if to_device is None else to_device(value))
        step.rendezvous.recv_async(key, got)
    return compute


def register(registry, device_type: str) -> None:
    """Registers the device-independent kernels for `device_type`."""
    registry.register("Placeholder", device_type, _placeholder)
    registry.register("Const", device_type, _const)
    registry.register_simple("Identity", device_type, lambda x: x, forwards=True)
    registry.register_simple("NoOp", device_type, lambda: None)
    # _Send moves its input to host memory itself when the receiver needs it there.
    registry.register("_Send", device_type, _send, needs_ctx=True, host_memory=("?tensor",))
    registry.register("_Recv", device_type, _recv, is_async=True)

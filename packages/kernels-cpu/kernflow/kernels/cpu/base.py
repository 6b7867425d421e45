"""Executor-level kernels: constants with control inputs, placeholders, identity, Send/Recv, NoOp."""

from __future__ import annotations

from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import create_key

DEVICE = "CPU"


def _placeholder(ctx):
    dt, shape, name = ctx.get_attr("dtype"), ctx.get_attr("shape"), ctx.name

    def compute():
        dims = "unknown" if shape.rank is None else "[" + ",".join("?" if d is None else str(d) for d in shape.dims) + "]"
        raise errors.InvalidArgumentError(None, None, f"You must feed a value for placeholder tensor "
                                          f"'{name}' with dtype {dt.name} and shape {dims}")
    return compute


def _const(ctx):
    value = ctx.device.to_device(ctx.get_attr("value"))
    return lambda: value


def _send(ctx):
    key = create_key(ctx.get_attr("send_device"), ctx.get_attr("send_device_incarnation"),
                     ctx.get_attr("recv_device"), ctx.get_attr("tensor_name"))

    def compute(step, value):
        step.rendezvous.send(key, value)
    return compute


def _recv(ctx):
    key = create_key(ctx.get_attr("send_device"), ctx.get_attr("send_device_incarnation"),
                     ctx.get_attr("recv_device"), ctx.get_attr("tensor_name"))

    def compute(step, inputs, done):
        def got(value, is_dead, err):
            done(err if err is not None else value)
        step.rendezvous.recv_async(key, got)
    return compute


def register(registry, device=DEVICE):
    registry.register("Placeholder", device, _placeholder)
    registry.register("Const", device, _const)
    registry.register_simple("Identity", device, lambda x: x)
    registry.register_simple("NoOp", device, lambda: None)
    registry.register("_Send", device, _send, needs_ctx=True)
    registry.register("_Recv", device, _recv, is_async=True)

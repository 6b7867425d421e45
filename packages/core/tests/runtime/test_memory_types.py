"""Memory types on a device with its own memory (runtime/memory_types.py, `_Recv`), on a fake device
whose "device memory" is an ndarray subclass: values reaching a device-memory input must have been
converted, through forwarding and control-flow ops too; handles are never converted; a failed
conversion in a Recv fails the step instead of leaving it waiting."""

import threading

import numpy as np

import kernflow.core as kf
from kernflow.core.runtime import base_kernels
from kernflow.core.runtime.executor import _Node
from kernflow.core.runtime.memory_types import MemoryTypes
from kernflow.core.plugins.registry import KernelRegistry
from kernflow.kernels.cpu.device import CPUDevice


class _DeviceArray(np.ndarray):
    pass


class _Accelerator(CPUDevice):
    has_device_memory = True

    def to_device(self, v):
        if type(v) is _DeviceArray:
            return v
        a = np.asarray(v)
        if a.dtype.kind == "O":
            raise TypeError(f"cannot move a {type(v).__name__} to the device")
        return a.view(_DeviceArray)

    def to_host(self, v):
        return np.asarray(v).view(np.ndarray) if type(v) is _DeviceArray else v


def _bind(mem, op_type, inputs, dtypes=()):
    reg = KernelRegistry()
    base_kernels.register(reg, "CPU")
    from kernflow.core.framework import op_def_registry
    od = op_def_registry.get(op_type)
    attrs = {"T": kf.float32}
    kd = reg.lookup(op_type, "CPU", attrs)
    node = _Node(0, op_type.lower(), op_type, None, list(inputs), [False] * len(inputs), [],
                 100 + len(mem.kind), len(od.outputs))
    mem.bind(node, kd, od, attrs, {}, 1000, list(dtypes))
    return node


def test_forwarding_ops_pass_on_unknown_memory_so_consumers_convert():
    mem = MemoryTypes(_Accelerator("/job:localhost/replica:0/task:0/device:CPU:0", "CPU"))
    # slot 1: a feed (memory unknown), slot 2: a predicate in host memory
    mem.kind[2] = "host"
    sw = _bind(mem, "Switch", [1, 2], [kf.float32, kf.bool])
    for i in range(2):
        assert (sw.out_base + i) not in mem.kind      # unknown: consumers convert what arrives
    mem.kind[7] = "device"
    ident = _bind(mem, "Identity", [7], [kf.float32])
    assert mem.kind[ident.out_base] == "device"


def test_a_merge_of_known_and_unknown_inputs_has_no_fixed_memory():
    mem = MemoryTypes(_Accelerator("/job:localhost/replica:0/task:0/device:CPU:0", "CPU"))
    mem.kind[3] = "device"
    merge = _bind(mem, "Merge", [3, 9], [kf.float32, kf.float32])   # 9: a back edge, not known yet
    assert merge.out_base not in mem.kind
    assert mem.kind[merge.out_base + 1] == "host"                     # value_index


def _recv_step(dtype, tensor):
    """A _Recv kernel on the fake accelerator, its step, and the key a sender uses."""
    dev = _Accelerator("/job:localhost/replica:0/task:0/device:CPU:0", "CPU")

    class Ctx:
        device = dev
        attrs = {"send_device": "/job:localhost/replica:0/task:0/device:CPU:1",
                 "send_device_incarnation": 1, "recv_device": dev.name, "tensor_name": tensor,
                 "T": dtype}

        def get_attr(self, k):
            return self.attrs[k]

    from kernflow.core.runtime.executor import StepContext
    from kernflow.core.runtime.rendezvous import LocalRendezvous
    step = StepContext(1, LocalRendezvous())
    return base_kernels._recv(Ctx()), step, base_kernels._key(Ctx()) + step.frame_key


def test_recv_conversion_failure_reaches_the_step():
    recv, step, key = _recv_step(kf.float32, "t")
    got = []
    done = threading.Event()
    recv(step, [], lambda v: (got.append(v), done.set()))
    step.rendezvous.send(key, object())        # not convertible: an error for the Recv, no raise here
    assert done.wait(5)
    assert isinstance(got[0], TypeError)


def test_recv_of_a_handle_passes_it_on_unconverted():
    recv, step, key = _recv_step(kf.resource, "h")
    handle = object()
    got = []
    recv(step, [], got.append)
    step.rendezvous.send(key, handle)
    assert got == [handle]

"""runtime/placer.place with a `KernelSupport`: kernels decided per device, and what a failure says."""

import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.plugins import registries
from kernflow.core.runtime.placer import KernelSupport, PlacementOptions, RegistryKernels, place

TWO_CPUS = kf.ConfigProto(device_count={"CPU": 2, "GPU": 0})


class _Without(KernelSupport):
    """The registry's answers, except that the devices named in `lacking` have no kernel of `op`."""

    def __init__(self, op, lacking):
        self.inner = RegistryKernels(registries().kernels)
        self.op, self.lacking = op, set(lacking)
        self.asked = []

    def has_kernel(self, device, op_type, attrs):
        self.asked.append((device.name, op_type))
        if op_type == self.op and device.name in self.lacking:
            return False
        return self.inner.has_kernel(device, op_type, attrs)

    def no_kernel_message(self, node_name, op_type, attrs, requested, lacking, devices):
        return f"{node_name}/{op_type} lacks a kernel on {[d.name for d in lacking]} (asked '{requested}')"


def _devices():
    return registries().devices.create_devices(TWO_CPUS)


def test_kernel_support_is_asked_per_device():
    cpu0, cpu1 = (d.name for d in _devices())
    g = kf.Graph()
    with g.as_default():
        with kf.device("/device:CPU:0"):
            a = kf.constant([1.0, 2.0], name="a")
        kf.square(a, name="sq")                                   # free to go anywhere
    support = _Without("Square", [cpu0])
    placed = place(g.as_graph_def(), _devices(), support, PlacementOptions())
    devices = {nd.name: nd.device for nd in placed.node}
    assert devices["sq"] == cpu1 and devices["a"] == cpu0
    assert (cpu0, "Square") in support.asked and (cpu1, "Square") in support.asked
    # A KernelRegistry still works: a device has a kernel when its type does.
    placed = place(g.as_graph_def(), _devices(), registries().kernels, PlacementOptions())
    assert {nd.name: nd.device for nd in placed.node}["sq"] == cpu0


def test_the_kernel_support_explains_a_node_no_allowed_device_can_run():
    cpu0, _ = (d.name for d in _devices())
    g = kf.Graph()
    with g.as_default():
        with kf.device("/device:CPU:0"):
            kf.square(kf.constant([1.0]), name="sq")
    with pytest.raises(errors.InvalidArgumentError) as e:
        place(g.as_graph_def(), _devices(), _Without("Square", [cpu0]), PlacementOptions())
    assert e.value.message == (f"Cannot assign a device for operation sq: sq/Square lacks a kernel on "
                               f"['{cpu0}'] (asked '/device:CPU:0')")


def test_a_colocation_group_whose_members_share_no_device_names_each_members_devices():
    cpu0, cpu1 = (d.name for d in _devices())

    class Split(_Without):
        def has_kernel(self, device, op_type, attrs):
            if op_type == "Neg" and device.name == cpu1:
                return False
            return super().has_kernel(device, op_type, attrs)

    g = kf.Graph()
    with g.as_default():
        a = kf.constant([1.0], name="a")
        sq = kf.square(a, name="sq")
        with kf.colocate_with(sq):
            kf.negative(a, name="neg")
    with pytest.raises(errors.InvalidArgumentError) as e:
        place(g.as_graph_def(), _devices(), Split("Square", [cpu0]), PlacementOptions())
    assert e.value.message == (
        f"Cannot assign a device for operation sq: its colocation group must share one device, and no "
        f"device matching '(any)' has a kernel for every member (devices with a kernel: sq (Square): "
        f"{cpu1}; neg (Neg): {cpu0}).")

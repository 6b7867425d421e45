"""Every op's GPU kernel against its numpy reference, shape function and gradient (the CPU kit).

Ops without a GPU kernel (checkpoint I/O, queues, conditional accumulators) run on the CPU through
soft placement; the meta-test below pins down exactly which ops those are. Stacks and TensorArrays
have GPU kernels (their elements stay in device memory); test_control_flow_gpu.py runs them in
loops.
"""

import pytest

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import HOST_ONLY_OPS, HOST_RESOURCE_OPS, KernelContractTests

pytestmark = pytest.mark.gpu

# Ops with no GPU kernel, by design (see CPU_ONLY_FAMILIES and CPU_ONLY_OPS in
# kernflow/kernels/gpu/kernels.py).
CPU_ONLY = {"SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "_FusedConv2D"} \
    | HOST_ONLY_OPS   # queues and accumulators hold host tensors, as in TF


def test_stacks_and_tensor_arrays_have_gpu_kernels(gpu_registry):
    gpu = gpu_registry.op_types("GPU")
    assert HOST_RESOURCE_OPS - HOST_ONLY_OPS <= gpu


def test_queues_and_accumulators_have_no_gpu_kernels(gpu_registry):
    assert sorted(HOST_ONLY_OPS & gpu_registry.op_types("GPU")) == []


class TestGPUKernels(KernelContractTests):
    device_type = "GPU"
    config = kf.ConfigProto(allow_soft_placement=True)


def test_every_cpu_op_has_a_gpu_kernel_or_is_cpu_only(gpu_registry):
    from kernflow.core.plugins.registry import KernelRegistry
    from kernflow.kernels.cpu import plugin as cpu_plugin
    ours = KernelRegistry()   # the CPU plugin's kernels alone (tests register CPU-only test ops)
    cpu_plugin.kernflow_register_kernels(ours)
    gpu = gpu_registry.op_types("GPU")
    assert sorted(ours.op_types("CPU") - gpu - CPU_ONLY) == []

"""Every op's GPU kernel against its numpy reference, shape function and gradient (the CPU kit).

Ops without a GPU kernel (checkpoint I/O) run on the CPU through soft placement; the meta-test
below pins down exactly which ops those are.
"""

import pytest

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import HOST_RESOURCE_OPS, KernelContractTests

pytestmark = pytest.mark.gpu

# Ops with no GPU kernel, by design (see kernflow/kernels/gpu/kernels.py).
CPU_ONLY = {"SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "DynamicPartition",
            "SegmentSum", "SegmentMean", "SegmentProd", "SegmentMin", "SegmentMax",
            "UnsortedSegmentSum", "UnsortedSegmentProd", "UnsortedSegmentMin", "UnsortedSegmentMax",
            # not yet: see CPU_ONLY_OPS in kernflow/kernels/gpu/kernels.py
            "ConcatV2", "SplitV", "GatherNd", "ScatterNd", "TopKV2", "MaxPool", "MaxPoolGrad",
            "MaxPoolGradGrad", "SparseApplyGradientDescent", "SparseApplyMomentum",
            "SparseApplyAdagrad", "SparseApplyRMSProp", "SparseApplyCenteredRMSProp",
            "SparseApplyAdam"} | HOST_RESOURCE_OPS   # queues, stacks, TensorArrays


class TestGPUKernels(KernelContractTests):
    device_type = "GPU"
    config = kf.ConfigProto(allow_soft_placement=True)


def test_every_cpu_op_has_a_gpu_kernel_or_is_cpu_only(gpu_registry):
    cpu = gpu_registry.op_types("CPU")
    gpu = gpu_registry.op_types("GPU")
    third_party = {"ExampleSoftClip"}  # the example plugin registers a CPU kernel only
    assert sorted(cpu - gpu - CPU_ONLY - third_party) == []

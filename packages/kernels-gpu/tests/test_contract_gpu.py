"""Every op's GPU kernel against its numpy reference, shape function and gradient (the CPU kit).

Ops without a GPU kernel (checkpoint I/O) run on the CPU through soft placement; the meta-test
below pins down exactly which ops those are.
"""

import pytest

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import KernelContractTests

pytestmark = pytest.mark.gpu

# Ops with no GPU kernel, by design (see kernflow/kernels/gpu/kernels.py).
CPU_ONLY = {"SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename", "DynamicPartition",
            "SegmentSum", "SegmentMean", "SegmentProd", "SegmentMin", "SegmentMax",
            "UnsortedSegmentSum", "UnsortedSegmentProd", "UnsortedSegmentMin", "UnsortedSegmentMax",
            # not yet: see CPU_ONLY_OPS in kernflow/kernels/gpu/kernels.py
            "ConcatV2", "SplitV", "GatherNd", "ScatterNd", "TopKV2", "MaxPool", "MaxPoolGrad",
            "MaxPoolGradGrad", "SparseApplyGradientDescent", "SparseApplyMomentum",
            "SparseApplyAdagrad", "SparseApplyRMSProp", "SparseApplyCenteredRMSProp",
            "SparseApplyAdam",
            # host-side resources by design (TF keeps queues, stacks and TensorArrays of the
            # kernels here in host memory too): the placer puts these ops on the CPU
            "FIFOQueueV2", "PaddingFIFOQueueV2", "PriorityQueueV2", "RandomShuffleQueueV2",
            "QueueCloseV2", "QueueDequeueManyV2", "QueueDequeueUpToV2", "QueueDequeueV2",
            "QueueEnqueueManyV2", "QueueEnqueueV2", "QueueIsClosedV2", "QueueSizeV2",
            "StackV2", "StackPushV2", "StackPopV2", "StackCloseV2",
            "TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3",
            "TensorArrayScatterV3", "TensorArrayConcatV3", "TensorArraySplitV3",
            "TensorArraySizeV3", "TensorArrayCloseV3", "TensorArrayGradV3"}


class TestGPUKernels(KernelContractTests):
    device_type = "GPU"
    config = kf.ConfigProto(allow_soft_placement=True)


def test_every_cpu_op_has_a_gpu_kernel_or_is_cpu_only(gpu_registry):
    cpu = gpu_registry.op_types("CPU")
    gpu = gpu_registry.op_types("GPU")
    third_party = {"ExampleSoftClip"}  # the example plugin registers a CPU kernel only
    assert sorted(cpu - gpu - CPU_ONLY - third_party) == []

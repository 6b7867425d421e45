"""Every op's CPU kernel against its numpy reference, shape function and gradient."""

from kernflow.core.testing.kernel_contract import KernelContractTests


class TestCPUKernels(KernelContractTests):
    device_type = "CPU"

"""Executor-level kernels (Const, Placeholder, Identity, NoOp, _Send/_Recv) from core's shared set."""

from kernflow.core.runtime import base_kernels

DEVICE = "CPU"


def register(registry, device=DEVICE):
    base_kernels.register(registry, device)

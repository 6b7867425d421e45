"""Numpy kernels of the random ops (kernflow.core.ops.random_ops)."""

DEVICE = "CPU"


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""

"""Numpy kernels of the nn ops (kernflow.core.ops.nn_ops)."""

DEVICE = "CPU"


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""

"""Numpy kernels of the segment ops (kernflow.core.ops.segment_ops)."""

DEVICE = "CPU"


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""

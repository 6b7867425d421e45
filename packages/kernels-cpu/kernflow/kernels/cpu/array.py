"""Numpy kernels of the array ops (kernflow.core.ops.array_ops)."""

from __future__ import annotations

import numpy as np

DEVICE = "CPU"


def register(registry, device=DEVICE):
    registry.register_simple("PlaceholderWithDefault", device, lambda x: x)

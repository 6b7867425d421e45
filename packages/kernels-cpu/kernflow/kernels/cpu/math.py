"""Numpy kernels of the math ops (kernflow.core.ops.math_ops)."""

from __future__ import annotations

import numpy as np

DEVICE = "CPU"

# op type -> numpy callable taking the op's inputs positionally.
ELEMENTWISE = {
    "AddV2": np.add,
}


def register(registry, device=DEVICE):
    for op, fn in ELEMENTWISE.items():
        registry.register_simple(op, device, fn)

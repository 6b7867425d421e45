"""Gradients of the random ops: none. Samples do not depend differentiably on their parameters
(shape, seeds, logits), and TF marks these ops not differentiable alike."""

from kernflow.core.framework.gradient_registry import NotDifferentiable

for _op in ("RandomStandardNormal", "RandomUniform", "TruncatedNormal", "RandomUniformInt",
            "RandomShuffle", "Multinomial"):
    NotDifferentiable(_op)

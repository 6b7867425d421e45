"""Gradients of the candidate samplers and ComputeAccidentalHits: none. Their outputs are class
ids, counts and constants that do not depend differentiably on the true classes (as in TF)."""

from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.ops.candidate_sampling_ops import CANDIDATE_SAMPLING_OPS

for _op in CANDIDATE_SAMPLING_OPS:
    NotDifferentiable(_op)

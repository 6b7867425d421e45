"""Gradients of the checkpoint I/O ops: none (they read and write files, as in TF)."""

from kernflow.core.framework.gradient_registry import NotDifferentiable

for _op in ("SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename"):
    NotDifferentiable(_op)

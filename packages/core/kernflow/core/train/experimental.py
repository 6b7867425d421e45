"""`kf.train.experimental` (TF1.15's tf.train.experimental): loss scales and the loss-scaling
optimizer for mixed-precision training. `PythonState` is not provided (see docs/architecture.md)."""

from kernflow.core.train.loss_scale import DynamicLossScale, FixedLossScale, LossScale
from kernflow.core.train.loss_scale_optimizer import (MixedPrecisionLossScaleOptimizer,
                                                      disable_mixed_precision_graph_rewrite,
                                                      enable_mixed_precision_graph_rewrite)

__all__ = ["LossScale", "FixedLossScale", "DynamicLossScale", "MixedPrecisionLossScaleOptimizer",
           "enable_mixed_precision_graph_rewrite", "disable_mixed_precision_graph_rewrite"]

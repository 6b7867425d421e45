"""`kf.mixed_precision` (tf.compat.v1.mixed_precision).

TF1.15's namespace holds only `experimental` (LossScale, FixedLossScale, DynamicLossScale); the
top-level names are the ones later tf.compat.v1 releases add here (the loss scales, the optimizer
and enable/disable_mixed_precision_graph_rewrite), the same objects as `kf.train.experimental`'s.
"""

import types as _types

from kernflow.core.train.loss_scale import DynamicLossScale, FixedLossScale, LossScale
from kernflow.core.train.loss_scale_optimizer import (MixedPrecisionLossScaleOptimizer,
                                                      disable_mixed_precision_graph_rewrite,
                                                      enable_mixed_precision_graph_rewrite)

experimental = _types.ModuleType(__name__ + ".experimental",
                                 "`kf.mixed_precision.experimental`: the TF1 loss scales.")
experimental.LossScale = LossScale
experimental.FixedLossScale = FixedLossScale
experimental.DynamicLossScale = DynamicLossScale
experimental.__all__ = ["LossScale", "FixedLossScale", "DynamicLossScale"]

__all__ = ["experimental", "LossScale", "FixedLossScale", "DynamicLossScale",
           "MixedPrecisionLossScaleOptimizer", "enable_mixed_precision_graph_rewrite",
           "disable_mixed_precision_graph_rewrite"]

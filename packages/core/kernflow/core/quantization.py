"""`kf.quantization`: TF1's `tf.quantization` namespace (kernflow.core.ops.quantization_ops; the
fake-quantization ops of kernflow.core.ops.misc_ops_more)."""

from kernflow.core.ops.misc_ops_more import (fake_quant_with_min_max_args,
                                             fake_quant_with_min_max_args_gradient,
                                             fake_quant_with_min_max_vars,
                                             fake_quant_with_min_max_vars_gradient,
                                             fake_quant_with_min_max_vars_per_channel,
                                             fake_quant_with_min_max_vars_per_channel_gradient)
from kernflow.core.ops.quantization_ops import (dequantize, quantize, quantize_and_dequantize,
                                                quantized_concat)

__all__ = ["dequantize", "fake_quant_with_min_max_args", "fake_quant_with_min_max_args_gradient",
           "fake_quant_with_min_max_vars", "fake_quant_with_min_max_vars_gradient",
           "fake_quant_with_min_max_vars_per_channel", "fake_quant_with_min_max_vars_per_channel_gradient",
           "quantize", "quantize_and_dequantize", "quantized_concat"]

"""Gradients of the quantization ops (kernflow.core.ops.quantization_ops) and of the quantized nn
ops (kernflow.core.ops.nn_ops_quantized).

QuantizeAndDequantize passes the gradient straight through to its input and gives the range
inputs none, as TF1; quantizing to integers and back is not differentiable.
"""

from __future__ import annotations

from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient

for _op in ("QuantizeV2", "Dequantize", "QuantizedConcat", "QuantizedReluX", "QuantizedMaxPool",
            "QuantizedAvgPool", "QuantizedConv2D"):
    NotDifferentiable(_op)


@RegisterGradient("QuantizeAndDequantizeV2")
@RegisterGradient("QuantizeAndDequantizeV3")
def _quantize_and_dequantize_grad(op, grad):
    return [grad] + [None] * (len(op.inputs) - 1)

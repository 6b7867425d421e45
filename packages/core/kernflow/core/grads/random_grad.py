"""Gradients of the random ops. Most samples do not depend differentiably on their parameters
(shape, seeds, logits), and TF marks these ops not differentiable alike; the parameterized truncated
normal is differentiated by implicit reparameterization, as TF does."""

import numpy as np

from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.grads.math_grad import _dense, _reduce_pair
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops as mo
from kernflow.core.ops import math_ops_special as sp

for _op in ("RandomStandardNormal", "RandomUniform", "TruncatedNormal", "RandomUniformInt",
            "RandomShuffle", "Multinomial"):
    NotDifferentiable(_op)


def _std_normal(t):
    """(pdf, cdf, t * pdf) of the standard normal at t; infinite t gives zero pdf and t * pdf."""
    finite = sp.is_finite(t)
    safe = mo.where(finite, t, array_ops.zeros_like(t))
    pdf = mo.exp(-0.5 * safe * safe) * float(1 / np.sqrt(2 * np.pi))
    pdf = mo.where(finite, pdf, array_ops.zeros_like(t))
    cdf = 0.5 * sp.erfc(-t * float(np.sqrt(0.5)))
    return pdf, cdf, safe * pdf


@RegisterGradient("StatelessParameterizedTruncatedNormal")
def _stateless_parameterized_truncated_normal_grad(op, grad):
    """x = mean + stddev * z holds u = (cdf(z) - cdf(alpha)) / (cdf(beta) - cdf(alpha)) fixed, with
    alpha, beta the standardized bounds; dx/dparam = -(du/dparam) / (du/dx)."""
    means, stddevs, minvals, maxvals = op.inputs[2:]
    x = op.outputs[0]
    z = (x - means) / stddevs
    pz, cz, _ = _std_normal(z)
    pa, ca, apa = _std_normal((minvals - means) / stddevs)
    pb, cb, bpb = _std_normal((maxvals - means) / stddevs)
    u = (cz - ca) / (cb - ca)
    d_min = pa * (1 - u) / pz
    d_max = u * pb / pz
    d_mean = 1 - d_min - d_max
    d_std = z - (apa * (1 - u) + u * bpb) / pz
    g = _dense(grad)
    return [None, None] + [_reduce_pair(p, x, g * d, None)[0]
                           for p, d in zip((means, stddevs, minvals, maxvals), (d_mean, d_std, d_min, d_max))]

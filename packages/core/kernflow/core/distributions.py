"""`kf.distributions`: TF1's `tf.distributions` (``tf.compat.v1.distributions``).

Probability distributions built from graph ops: `Distribution` and its families (Normal, Bernoulli,
Categorical, Uniform, Beta, Dirichlet, DirichletMultinomial, Exponential, Gamma, Laplace, Multinomial,
StudentT), the KL registry (`kl_divergence`, `RegisterKL`) and the reparameterization markers.
The implementations live in `kernflow.core.distributions_impl`.
"""

from kernflow.core.distributions_impl.continuous import (Beta, Exponential, Gamma, Laplace, Normal,
                                                         StudentT, Uniform)
from kernflow.core.distributions_impl.dirichlet import Dirichlet, DirichletMultinomial
from kernflow.core.distributions_impl.discrete import Bernoulli, Categorical, Multinomial
from kernflow.core.distributions_impl.distribution import (FULLY_REPARAMETERIZED, NOT_REPARAMETERIZED,
                                                           Distribution, ReparameterizationType)
from kernflow.core.distributions_impl.kullback_leibler import RegisterKL, kl_divergence

__all__ = ["Bernoulli", "Beta", "Categorical", "Dirichlet", "DirichletMultinomial", "Distribution",
           "Exponential", "FULLY_REPARAMETERIZED", "Gamma", "Laplace", "Multinomial", "NOT_REPARAMETERIZED",
           "Normal", "RegisterKL", "ReparameterizationType", "StudentT", "Uniform", "kl_divergence"]

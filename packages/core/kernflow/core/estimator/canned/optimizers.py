"""How a canned estimator's `optimizer` argument becomes an Optimizer (TF1's canned/optimizers.py).

A string names a class and takes the estimator's default learning rate ('Adagrad', 'Adam',
'Ftrl', 'RMSProp', 'SGD'); a callable is called (so the optimizer is made inside the model's
graph); anything else must already be a `kf.train.Optimizer`.
"""

from __future__ import annotations

from kernflow.core.train import optimizers, optimizers_more
from kernflow.core.train.optimizer import Optimizer

__all__ = ["get_optimizer_instance"]

_OPTIMIZER_CLS_NAMES = {
    "Adagrad": optimizers.AdagradOptimizer,
    "Adam": optimizers.AdamOptimizer,
    "Ftrl": optimizers_more.FtrlOptimizer,
    "RMSProp": optimizers.RMSPropOptimizer,
    "SGD": optimizers.GradientDescentOptimizer,
}


def get_optimizer_instance(opt, learning_rate=None):
    """The Optimizer `opt` names or makes.

    Args:
        opt: a name in ('Adagrad', 'Adam', 'Ftrl', 'RMSProp', 'SGD'), an Optimizer, or a
            callable returning one.
        learning_rate: the learning rate of a named optimizer.

    Raises:
        ValueError: an unknown name, a name without a learning rate, or no Optimizer.
    """
    if isinstance(opt, str):
        if opt not in _OPTIMIZER_CLS_NAMES:
            raise ValueError(f"Unsupported optimizer name: {opt}. Supported names are: "
                             f"{tuple(sorted(_OPTIMIZER_CLS_NAMES))}")
        if not learning_rate:
            raise ValueError("learning_rate must be specified when opt is string.")
        return _OPTIMIZER_CLS_NAMES[opt](learning_rate=learning_rate)
    if callable(opt) and not isinstance(opt, Optimizer):
        opt = opt()
    if not isinstance(opt, Optimizer):
        raise ValueError(f"The given object is not an Optimizer instance. Given: {opt}")
    return opt

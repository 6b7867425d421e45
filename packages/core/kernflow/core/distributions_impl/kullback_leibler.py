"""The KL-divergence registry of `kf.distributions` (TF1 `tf.distributions.kl_divergence`, `RegisterKL`).

KL functions are registered for a pair of distribution classes; a lookup walks both classes' MROs and
takes the registered pair closest to the actual types (so `Exponential` uses the `Gamma` pair).
"""

import kernflow.core as kf  # partly imported here; its attributes are used only at call time

__all__ = ["RegisterKL", "kl_divergence", "cross_entropy"]

_DIVERGENCES = {}


def _registered_kl(type_a, type_b):
    """The registered KL function whose class pair is nearest (by MRO distance) to the types."""
    best, best_dist = None, None
    for dist_a, parent_a in enumerate(type_a.__mro__):
        for dist_b, parent_b in enumerate(type_b.__mro__):
            fn = _DIVERGENCES.get((parent_a, parent_b))
            if fn is not None and (best is None or dist_a + dist_b < best_dist):
                best, best_dist = fn, dist_a + dist_b
    return best


def kl_divergence(distribution_a, distribution_b, allow_nan_stats=True, name=None):
    """``KL(distribution_a || distribution_b)``, batched.

    Args:
        distribution_a: the first `Distribution`.
        distribution_b: the second `Distribution`.
        allow_nan_stats: when False, the result is checked for NaN (InvalidArgumentError when run).
        name: the name scope of the KL function's ops.

    Returns:
        A tensor of shape ``batch_shape``.

    Raises:
        NotImplementedError: no KL function is registered for the two types.
    """
    kl_fn = _registered_kl(type(distribution_a), type(distribution_b))
    if kl_fn is None:
        raise NotImplementedError(
            f"No KL(distribution_a || distribution_b) registered for distribution_a type "
            f"{type(distribution_a).__name__} and distribution_b type {type(distribution_b).__name__}")
    with kf.name_scope("KullbackLeibler"):
        kl_t = kl_fn(distribution_a, distribution_b, name=name)
        if allow_nan_stats:
            return kl_t
        kl_t = kf.identity(kl_t, name="kl")
        message = (f"KL calculation between {distribution_a.name} and {distribution_b.name} returned NaN "
                   f"values (and was called with allow_nan_stats=False). Values:")
        check = kf.Assert(kf.logical_not(kf.reduce_any(kf.is_nan(kl_t))), [message, kl_t])
        with kf.control_dependencies([check]):
            return kf.identity(kl_t, name="checked_kl")


def cross_entropy(ref, other, allow_nan_stats=True, name=None):
    """``H[ref, other] = entropy(ref) + KL(ref || other)``."""
    with kf.name_scope(name, "cross_entropy"):
        return ref.entropy() + kl_divergence(ref, other, allow_nan_stats=allow_nan_stats)


class RegisterKL:
    """A decorator registering a KL function ``fn(dist_a, dist_b, name=None)`` for two classes.

    Args:
        dist_cls_a: the class of the first distribution.
        dist_cls_b: the class of the second distribution.
    """

    def __init__(self, dist_cls_a, dist_cls_b):
        self._key = (dist_cls_a, dist_cls_b)

    def __call__(self, kl_fn):
        """Registers `kl_fn` and returns it.

        Raises:
            TypeError: `kl_fn` is not callable.
            ValueError: the pair is already registered.
        """
        if not callable(kl_fn):
            raise TypeError(f"kl_fn must be callable, received: {kl_fn}")
        if self._key in _DIVERGENCES:
            raise ValueError(f"KL({self._key[0].__name__} || {self._key[1].__name__}) has already been "
                             f"registered to: {_DIVERGENCES[self._key]}")
        _DIVERGENCES[self._key] = kl_fn
        return kl_fn

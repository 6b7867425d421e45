"""The gradient registry: op type -> gradient function, or an explicit "not differentiable" mark.

A gradient function takes the forward `Operation` and one gradient per output (None for outputs
nothing depends on, unless the op has several outputs: then zeros are passed) and returns one
gradient per input (None where there is none)::

    @RegisterGradient("Mul")
    def _mul_grad(op, grad):
        x, y = op.inputs
        return [grad * y, grad * x]    # (then reduced for broadcasting)
"""

from __future__ import annotations

import threading

from kernflow.core.framework.op_def_registry import call_site

__all__ = ["RegisterGradient", "NotDifferentiable", "NoGradient", "get_gradient_function",
           "gradient_status"]

_lock = threading.Lock()
_grads: dict[str, tuple] = {}   # op type -> (fn or None, site)


class RegisterGradient:
    """Decorator registering the gradient function of `op_type`.

    Raises:
        KeyError: if `op_type` already has a gradient (naming both call sites).
    """

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, fn):
        _register(self._op_type, fn, call_site())
        return fn


def _register(op_type, fn, site):
    with _lock:
        old = _grads.get(op_type)
        if old is not None:
            raise KeyError(f"gradient for {op_type!r} registered twice: first at {old[1]}, again at {site}")
        _grads[op_type] = (fn, site)


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TF name
    """Marks `op_type` as having no gradient (its inputs get None)."""
    _register(op_type, None, call_site())


NoGradient = NotDifferentiable


def _override_attr(op):
    """The ``_gradient_op_type`` attr of an imported op (how a GraphDef carries gradient_override_map)."""
    try:
        v = op.get_attr("_gradient_op_type")
    except (ValueError, KeyError, AttributeError):
        return None
    return v.decode() if isinstance(v, bytes) else v


def get_gradient_function(op):
    """Returns the gradient function for `op` (honouring gradient_override_map), or None.

    Raises:
        LookupError: if the op type has neither a gradient nor a NotDifferentiable mark.
    """
    op_type = getattr(op, "_gradient_op_type", None) or _override_attr(op) or op.type
    try:
        return _grads[op_type][0]
    except KeyError:
        _load_families()
        if op_type in _grads:
            return _grads[op_type][0]
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: {op_type}). "
                          f"Register one with kf.RegisterGradient({op_type!r}) or mark it with "
                          f"kf.NotDifferentiable({op_type!r}).") from None


def gradient_status(op_type: str) -> str:
    """Returns "gradient", "not_differentiable" or "missing" (for the meta-test)."""
    _load_families()
    e = _grads.get(op_type)
    if e is None:
        return "missing"
    return "gradient" if e[0] is not None else "not_differentiable"


_loaded = False
_load_lock = threading.RLock()  # re-entrant: a grads module may look a gradient up while loading


def _load_families() -> None:
    """Imports every kernflow.core.grads module so their registrations exist.

    `_loaded` is set only once every module is imported, so a thread that finds it set (graphs
    built concurrently) never sees a half-filled registry.
    """
    global _loaded
    if _loaded:
        return
    import importlib
    import pkgutil
    from kernflow.core import grads
    with _load_lock:
        if _loaded:
            return
        for info in pkgutil.iter_modules(grads.__path__):
            importlib.import_module(f"{grads.__name__}.{info.name}")
        _loaded = True

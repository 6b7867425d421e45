"""A third-party kernflow plugin: the op "ExampleSoftClip" and its CPU kernel.

``ExampleSoftClip(x, limit) = limit * tanh(x / limit)``, shipped exactly as any outside package would:
one entry-point line in pyproject.toml and two hook implementations.
"""

import numpy as np

from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.plugins import hookimpl

__all__ = ["soft_clip"]


@hookimpl
def kernflow_register_ops(registry):
    registry.register_op(
        "ExampleSoftClip", inputs=["x: T"], outputs=["y: T"],
        attrs=["T: {float, double}", "limit: float = 1.0"],
        shape_fn=lambda op: [op.inputs[0].shape],
        doc="limit * tanh(x / limit): squashes x smoothly into (-limit, limit).")


@hookimpl
def kernflow_register_kernels(registry):
    def factory(ctx):
        limit = ctx.get_attr("limit")
        dtype = ctx.output_dtypes[0].as_numpy_dtype
        return lambda x: (limit * np.tanh(x / limit)).astype(dtype, copy=False)
    registry.register("ExampleSoftClip", "CPU", factory)


def soft_clip(x, limit=1.0, name=None):
    """The user wrapper a plugin would export."""
    return apply_op("ExampleSoftClip", [x], {"limit": limit}, name=name).outputs[0]


def _sign_sgd():
    from kernflow.core.train.optimizer import Optimizer

    class SignSGD(Optimizer):
        """var -= lr * sign(grad): an optimizer built from existing ops, shipped by a plugin."""

        def __init__(self, learning_rate, use_locking=False, name="SignSGD"):
            super().__init__(use_locking, name)
            self._lr = learning_rate

        def _apply_dense(self, grad, var):
            import kernflow.core as kf
            lr = self._hyper(self._lr, "learning_rate", var.dtype.base_dtype)
            return kf.assign_sub(var, lr * kf.sign(grad), use_locking=self._use_locking).op

        def _apply_sparse(self, grad, var):
            import kernflow.core as kf
            lr = self._hyper(self._lr, "learning_rate", var.dtype.base_dtype)
            return kf.scatter_sub(var, grad.indices, lr * kf.sign(grad.values)).op

    return SignSGD


@hookimpl
def kernflow_register_optimizers(registry):
    registry.register("ExampleSignSGD", _sign_sgd())

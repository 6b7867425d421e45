"""GPU kernels of the sparse optimizer updates (SparseApplyGradientDescent ... SparseApplyAdam).

As on the CPU (``kernels/cpu/training.py``, whose update rules run here on the array module `am`):
duplicate indices first sum their gradient rows, then the rule updates each touched row of var and
its slots once, in place; `use_locking` holds the variable's lock. Without a host-side unique: the
indices are sorted, each run of equal indices sums its rows (a scatter-add at the run's first
position), and every duplicate then computes the same new row, so the duplicate writes agree.

One device->host read per step checks the indices are in range (the CPU kernel's
InvalidArgumentError; an unchecked index would write outside the variable) and says whether any
repeat. Hyperparameters are host scalars (host memory).
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors, op_def_registry
from kernflow.kernels.cpu.training import _AFTER_GRAD, RULES
from kernflow.kernels.gpu.array_module import cupy_module, device_dtypes, segment_sum

__all__ = ["register"]


def _invalid(ctx, msg):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} {ctx.name}: {msg}")


def _scalar(dtype, v):
    """A host scalar of `dtype` (numpy scalars combine with device arrays, 0-d host arrays do not)."""
    return dtype.type(np.asarray(v).reshape(-1)[0])


def _check(am, ctx, idx, n, indices):
    """Sorts the flat indices; raises for any outside [0, n) as the CPU kernel does.

    Returns (sort order, sorted indices, whether any index repeats).
    """
    xp = am.xp
    order = am.argsort(idx)
    s = idx[order]
    bad = ((s[0] < 0) | (s[-1] >= n)).astype(np.int64)
    dups = xp.any(s[1:] == s[:-1]).astype(np.int64)
    bad, dups = am.to_host(xp.stack([bad, dups]))   # the one device->host read
    if bad:
        host = np.asarray(am.to_host(indices))
        raise _invalid(ctx, f"indices out of range [0, {n}): {host[(host < 0) | (host >= n)][:5]}")
    return order, s, bool(dups)


def _sparse(name):
    nslots = RULES[name][0]
    after = _AFTER_GRAD.get(name, 0)

    def factory(ctx, am=None):
        am = am or cupy_module()
        xp = am.xp
        rule = am.training_rules[name][1](ctx)
        locking = ctx.get_attr("use_locking")
        dtype = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)

        def compute(var, *args):
            bufs = [var.read()] + [s.read() for s in args[:nslots]]
            rest = list(args[nslots:])
            gi = len(rest) - 2 - after           # grad, then indices
            grad, indices = rest[gi], am.device(rest[gi + 1])
            if grad.dtype != dtype:
                grad = grad.astype(dtype)
            idx = indices.reshape(-1)
            n = bufs[0].shape[0]
            if idx.size:
                order, s, dups = _check(am, ctx, idx, n, indices)
            if grad.shape[1:] != bufs[0].shape[1:] or grad.shape[0] != idx.size:
                raise _invalid(ctx, f"grad shape {list(grad.shape)} does not match indices "
                                    f"{list(indices.shape)} and var {list(bufs[0].shape)}")
            if not idx.size:
                return var
            hyper = [_scalar(dtype, a) for a in rest[:gi] + rest[gi + 2:]]
            g = xp.take(grad, order, axis=0)
            if dups:
                first = xp.searchsorted(s, s)   # each row's run start
                total = xp.zeros_like(g)
                segment_sum(am, total, first, g)
                g = xp.take(total, first, axis=0)

            def update():
                rows = [xp.take(b, s, axis=0) for b in bufs]
                rule(*rows, *hyper[:gi], g, *hyper[gi:])
                for b, r in zip(bufs, rows):
                    b[s] = r
            if locking:
                with var.lock:
                    update()
            else:
                update()
            return var
        return compute
    return factory


def _hypers(op) -> tuple:
    """Names of the hyperparameter inputs (every input but the refs, the gradient and indices)."""
    return tuple(a.name for a in op_def_registry.get(op).inputs
                 if not a.is_ref and a.name not in ("grad", "delta", "indices"))


def register(registry, device="GPU") -> set:
    """Registers the sparse updates (float types); returns the op types they cover."""
    ops = set()
    for name in RULES:
        op = f"SparseApply{name}"
        registry.register(op, device, _sparse(name), constraints={"T": device_dtypes(op)},
                          host_memory=_hypers(op))
        ops.add(op)
    return ops

"""Variable kernels: state in the device's resource container, updated in place."""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.runtime.resource_mgr import Var

DEVICE = "CPU"


def _variable(ctx):
    container = ctx.get_attr("container")
    name = ctx.get_attr("shared_name") or ctx.name
    dtype, shape = ctx.get_attr("dtype"), ctx.get_attr("shape")
    return ctx.resource_mgr.cached_getter(container, name, lambda: Var(name, dtype, shape))


def _locked(use_locking, fn):
    if not use_locking:
        return fn

    def locked(var, *args):
        with var.lock:
            return fn(var, *args)
    return locked


def _assign(ctx):
    validate = ctx.get_attr("validate_shape")
    name = ctx.name

    def compute(var, value):
        value = np.asarray(value)
        if validate and var.shape is not None and var.shape.rank is not None and \
                not var.shape.is_compatible_with(value.shape):
            raise errors.InvalidArgumentError(
                None, None, f"Assign requires shapes of both tensors to match. lhs shape= "
                f"{var.shape.as_list()} rhs shape= {list(value.shape)} (node {name})")
        buf = var.value
        if buf is not None and buf.shape == value.shape and buf.dtype == value.dtype:
            np.copyto(buf, value)
        else:
            var.assign(np.array(value, copy=True))
        return var
    return _locked(ctx.get_attr("use_locking"), compute)


def _inplace(ufunc, verb):
    def factory(ctx):
        name = ctx.name

        def compute(var, value):
            buf = var.read()
            if np.shape(value) != buf.shape:
                raise errors.InvalidArgumentError(
                    None, None, f"{ctx.op_type} {name}: Must have the same shape: lhs shape= "
                    f"{list(buf.shape)} rhs shape= {list(np.shape(value))}")
            ufunc(buf, value, out=buf)
            return var
        return _locked(ctx.get_attr("use_locking"), compute)
    return factory


def _check_indices(op, name, idx, n):
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = int(idx.reshape(-1)[np.argmax((idx.reshape(-1) < 0) | (idx.reshape(-1) >= n))])
        raise errors.InvalidArgumentError(None, None, f"{op} {name}: indices contains {bad} which "
                                          f"is not in [0, {n})")


def _scatter(kind):
    def factory(ctx):
        name, op = ctx.name, ctx.op_type

        def compute(var, indices, updates):
            buf = var.read()
            idx = np.asarray(indices)
            _check_indices(op, name, idx, buf.shape[0])
            want = idx.shape + buf.shape[1:]
            upd = np.asarray(updates)
            if upd.shape != want and upd.ndim != 0:
                raise errors.InvalidArgumentError(
                    None, None, f"{op} {name}: updates must have shape indices.shape + "
                    f"ref.shape[1:] = {list(want)}, got {list(upd.shape)}")
            if kind == "update":
                buf[idx] = upd
            elif kind == "add":
                np.add.at(buf, idx, upd)
            else:
                np.subtract.at(buf, idx, upd)
            return var
        return _locked(ctx.get_attr("use_locking"), compute)
    return factory


def register(registry, device=DEVICE):
    registry.register("VariableV2", device, _variable)
    registry.register("Assign", device, _assign)
    registry.register("AssignAdd", device, _inplace(np.add, "add"))
    registry.register("AssignSub", device, _inplace(np.subtract, "sub"))
    registry.register("ScatterUpdate", device, _scatter("update"))
    registry.register("ScatterAdd", device, _scatter("add"))
    registry.register("ScatterSub", device, _scatter("sub"))
    registry.register_simple("IsVariableInitialized", device, lambda var: np.bool_(var.is_initialized))

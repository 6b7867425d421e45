"""Fused optimizer updates: one kernel per variable per step (TF's ApplyAdam and friends).

Each op updates `var` and its slot variables in place and outputs `var` (a reference). The Sparse*
variants take gradient rows `grad` for `indices` and touch only those rows.
"""

from __future__ import annotations

from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["apply_gradient_descent", "apply_momentum", "apply_adagrad", "apply_rms_prop",
           "apply_centered_rms_prop", "apply_adam", "sparse_apply_gradient_descent",
           "sparse_apply_momentum", "sparse_apply_adagrad", "sparse_apply_rms_prop",
           "sparse_apply_centered_rms_prop", "sparse_apply_adam"]

_T = "T: {half, float, double}"
_IDX = "Tindices: {int32, int64}"

# name -> (slot refs after var, scalar hyper-parameters before grad, hyper-parameters after grad,
#          extra bool attrs, formula for the doc)
_FAMILY = {
    "GradientDescent": ([], ["alpha"], [], [], "var -= alpha * delta"),
    "Momentum": (["accum"], ["lr"], ["momentum"], ["use_nesterov: bool = false"],
                 "accum = accum * momentum + grad; var -= lr * accum (Nesterov: var -= lr * (grad + "
                 "momentum * accum))"),
    "Adagrad": (["accum"], ["lr"], [], ["update_slots: bool = true"],
                "accum += grad ** 2; var -= lr * grad / sqrt(accum)"),
    "RMSProp": (["ms", "mom"], ["lr", "rho", "momentum", "epsilon"], [], [],
                "ms = rho * ms + (1 - rho) * grad ** 2; mom = momentum * mom + lr * grad / "
                "sqrt(ms + epsilon); var -= mom"),
    "CenteredRMSProp": (["mg", "ms", "mom"], ["lr", "rho", "momentum", "epsilon"], [], [],
                        "mg = rho * mg + (1 - rho) * grad; ms = rho * ms + (1 - rho) * grad ** 2; "
                        "mom = momentum * mom + lr * grad / sqrt(ms - mg ** 2 + epsilon); var -= mom"),
    "Adam": (["m", "v"], ["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"], [],
             ["use_nesterov: bool = false"],
             "lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power); m = beta1 * m + (1 - beta1) * "
             "grad; v = beta2 * v + (1 - beta2) * grad ** 2; var -= lr_t * m / (sqrt(v) + epsilon)"),
}


def _register_family():
    for name, (slots, before, after, extra, formula) in _FAMILY.items():
        grad_name = "delta" if name == "GradientDescent" else "grad"
        dense_inputs = (["var: Ref(T)"] + [f"{s}: Ref(T)" for s in slots] + [f"{h}: T" for h in before]
                        + [f"{grad_name}: T"] + [f"{h}: T" for h in after])
        attrs = [_T, "use_locking: bool = false"] + extra
        register_op(f"Apply{name}", inputs=dense_inputs, outputs=["out: Ref(T)"], attrs=attrs,
                    shape_fn=lambda op: [op.inputs[0].shape],
                    doc=f"Fused {name} update of var (and its slots) in place: {formula}.")
        sparse_inputs = (["var: Ref(T)"] + [f"{s}: Ref(T)" for s in slots] + [f"{h}: T" for h in before]
                         + [f"{grad_name}: T", f"indices: Tindices"] + [f"{h}: T" for h in after])
        register_op(f"SparseApply{name}", inputs=sparse_inputs, outputs=["out: Ref(T)"],
                    attrs=attrs + [_IDX], shape_fn=lambda op: [op.inputs[0].shape],
                    doc=f"{name} update of the rows `indices` of var (and its slots) only, with "
                        f"gradient rows `{grad_name}`; duplicate indices are summed first: {formula}.")


_register_family()


def _apply(op_type, args, use_locking, extra=None, name=None):
    attrs = {"use_locking": use_locking}
    attrs.update(extra or {})
    return apply_op(op_type, args, attrs, name=name).outputs[0]


def apply_gradient_descent(var, alpha, delta, use_locking=False, name=None):
    return _apply("ApplyGradientDescent", [var, alpha, delta], use_locking, name=name)


def apply_momentum(var, accum, lr, grad, momentum, use_locking=False, use_nesterov=False, name=None):
    return _apply("ApplyMomentum", [var, accum, lr, grad, momentum], use_locking,
                  {"use_nesterov": use_nesterov}, name)


def apply_adagrad(var, accum, lr, grad, use_locking=False, update_slots=True, name=None):
    return _apply("ApplyAdagrad", [var, accum, lr, grad], use_locking, {"update_slots": update_slots}, name)


def apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad, use_locking=False, name=None):
    return _apply("ApplyRMSProp", [var, ms, mom, lr, rho, momentum, epsilon, grad], use_locking, name=name)


def apply_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, epsilon, grad, use_locking=False,
                            name=None):
    return _apply("ApplyCenteredRMSProp", [var, mg, ms, mom, lr, rho, momentum, epsilon, grad],
                  use_locking, name=name)


def apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, use_locking=False,
               use_nesterov=False, name=None):
    return _apply("ApplyAdam", [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad],
                  use_locking, {"use_nesterov": use_nesterov}, name)


def sparse_apply_gradient_descent(var, alpha, delta, indices, use_locking=False, name=None):
    return _apply("SparseApplyGradientDescent", [var, alpha, delta, indices], use_locking, name=name)


def sparse_apply_momentum(var, accum, lr, grad, indices, momentum, use_locking=False,
                          use_nesterov=False, name=None):
    return _apply("SparseApplyMomentum", [var, accum, lr, grad, indices, momentum], use_locking,
                  {"use_nesterov": use_nesterov}, name)


def sparse_apply_adagrad(var, accum, lr, grad, indices, use_locking=False, update_slots=True, name=None):
    return _apply("SparseApplyAdagrad", [var, accum, lr, grad, indices], use_locking,
                  {"update_slots": update_slots}, name)


def sparse_apply_rms_prop(var, ms, mom, lr, rho, momentum, epsilon, grad, indices, use_locking=False,
                          name=None):
    return _apply("SparseApplyRMSProp", [var, ms, mom, lr, rho, momentum, epsilon, grad, indices],
                  use_locking, name=name)


def sparse_apply_centered_rms_prop(var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices,
                                   use_locking=False, name=None):
    return _apply("SparseApplyCenteredRMSProp",
                  [var, mg, ms, mom, lr, rho, momentum, epsilon, grad, indices], use_locking, name=name)


def sparse_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices,
                      use_locking=False, use_nesterov=False, name=None):
    return _apply("SparseApplyAdam",
                  [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices],
                  use_locking, {"use_nesterov": use_nesterov}, name)

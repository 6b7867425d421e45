"""Gradients of the ops core's skeleton owns: Identity, Snapshot, PlaceholderWithDefault, state and updates."""

from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient


@RegisterGradient("Identity")
def _identity_grad(op, grad):
    return [grad]


@RegisterGradient("Snapshot")
def _snapshot_grad(op, grad):
    return [grad]


@RegisterGradient("PlaceholderWithDefault")
def _placeholder_with_default_grad(op, grad):
    return [grad]


# State changes and executor plumbing have no gradient (TF marks them the same way).
for _op in ("Assign", "AssignAdd", "AssignSub", "ScatterUpdate", "ScatterAdd", "ScatterSub",
            "IsVariableInitialized", "_Send", "_Recv", "_Retval"):
    NotDifferentiable(_op)
for _name in ("GradientDescent", "Momentum", "Adagrad", "RMSProp", "CenteredRMSProp", "Adam"):
    NotDifferentiable(f"Apply{_name}")
    NotDifferentiable(f"SparseApply{_name}")

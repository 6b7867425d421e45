"""Meta-tests: every op declared by kernflow-core has a CPU kernel, a doc and a contract case."""

import os

import kernflow.core  # noqa: F401 - declares every core op
from kernflow.core.framework import op_def_registry
from kernflow.core.plugins import registries
from kernflow.core.runtime.placer import ANY_DEVICE_OPS
from kernflow.core.testing.kernel_contract import HOST_RESOURCE_OPS, op_types_with_cases

CORE_DIR = os.path.dirname(kernflow.core.__file__)
# Ops with no CPU kernel on purpose: the executor itself implements them.
EXECUTOR_OPS = set(ANY_DEVICE_OPS)
# Ops exercised by the runtime tests rather than contract cases (transfers between devices).
RUNTIME_TESTED = {"_Send", "_Recv", "Placeholder", "VariableV2", "Assign", "AssignAdd", "AssignSub",
                  "ScatterUpdate", "ScatterAdd", "ScatterSub", "IsVariableInitialized",
                  # control flow: run by the executor itself (tests/runtime, tests/control_flow)
                  "Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
                  "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger", "Assert",
                  } | HOST_RESOURCE_OPS   # queues, stacks, TensorArrays: their own tests


def core_ops():
    return {n: op for n, op in op_def_registry.registered_ops().items()
            if op.site.startswith(CORE_DIR)}


def test_every_core_op_has_a_cpu_kernel():
    kernels = registries().kernels
    missing = sorted(n for n in core_ops() if n not in EXECUTOR_OPS and not kernels.device_types_for(n, {}))
    missing = [n for n in missing if "CPU" not in kernels.device_types_for(n, {})]
    assert not missing, f"ops without a CPU kernel: {missing}"


def test_every_core_op_has_a_doc():
    missing = sorted(n for n, op in core_ops().items() if not op.doc.strip())
    assert not missing, f"ops without a doc: {missing}"


def test_every_core_op_has_a_contract_case():
    covered = op_types_with_cases()
    missing = sorted(n for n in core_ops() if n not in covered | EXECUTOR_OPS | RUNTIME_TESTED)
    assert not missing, f"ops without a contract case in kernflow/core/testing/op_cases: {missing}"


def test_every_core_op_with_inputs_has_a_gradient_or_is_marked_not_differentiable():
    from kernflow.core.framework.gradient_registry import gradient_status
    missing = sorted(n for n, op in core_ops().items()
                     if op.inputs and gradient_status(n) == "missing")
    assert not missing, ("ops with inputs but neither a gradient nor NotDifferentiable "
                         f"(kernflow/core/grads/): {missing}")

"""The GPU plugin's registration rules, checked without a GPU (so CI runs them).

`kernels.register` builds every GPU kernel definition without touching a device; only its imports
need cupy. A child process stands a numpy-backed stand-in for cupy in (the kernels are never run)
and reports what was registered; the rules below are those the GPU tests check on a real GPU
(test_contract_gpu.py), where a bad registration surfaced as a failed step on the GPU machine only:
a string GatherV2 placed on the GPU (every MonitoredTrainingSession failed), Unique gaining GPU
kernels by moving family.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from kernflow.core.testing.kernel_contract import HOST_ONLY_OPS

_CHILD = textwrap.dedent("""
    import json, sys, types
    import numpy

    class _Any:
        def __init__(self, *a, **k): pass
        def __call__(self, *a, **k): return _Any()
        def __getattr__(self, name): return _Any()

    fake = types.ModuleType("cupy")
    fake.__getattr__ = lambda name: getattr(numpy, name, _Any())
    sys.modules["cupy"] = fake

    from kernflow.core.framework import op_def_registry
    from kernflow.core.plugins.registry import KernelRegistry
    from kernflow.kernels.gpu import kernels
    from kernflow.kernels.gpu.array_module import DEVICE_DTYPES

    registry = KernelRegistry()
    source = kernels.register(registry)
    device = {t.name for t in DEVICE_DTYPES}
    string_on_device = []
    for (op, dev), defs in registry._kernels.items():
        if source.get(op) == "base":   # Placeholder, _Send/_Recv, Identity...: any dtype, by design
            continue
        od = op_def_registry.get(op)
        for kd in defs:
            host = {h.lstrip("?") for h in kd.host_memory}   # ("?x": only x's metadata is read)
            if "*" in host or kd.forwards:
                continue
            for attr in od.attrs.values():
                if attr.type != "type":
                    continue
                if not any(a.type_attr == attr.name and a.name not in host for a in od.inputs + od.outputs):
                    continue
                allowed = kd.constraints.get(attr.name) or attr.allowed
                names = {t.name for t in allowed} if allowed else {"<any dtype>"}
                if names - device:
                    string_on_device.append([op, attr.name, sorted(names - device)])
    print(json.dumps({"ops": sorted(registry.op_types("GPU")), "not_device": string_on_device}))
""")


@pytest.fixture(scope="module")
def registered():
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_no_gpu_kernel_takes_a_dtype_without_device_memory_in_device_memory(registered):
    # Strings, resources and variants are host objects: an op on them goes to the CPU (as in TF),
    # unless its kernel keeps those args in host memory or hands its input on unchanged.
    assert registered["not_device"] == []


def test_host_only_ops_have_no_gpu_kernel(registered):
    assert sorted(HOST_ONLY_OPS & set(registered["ops"])) == []
    assert "MatMul" in registered["ops"] and "GatherV2" in registered["ops"]

"""The plugin without a GPU (what CI sees): it registers nothing and says why in one debug line."""

import logging

from kernflow.core.plugins.registry import DeviceRegistry, KernelRegistry
from kernflow.kernels.gpu import device, plugin


def test_kernflow_register_devices_registers_nothing_without_a_gpu(monkeypatch):
    monkeypatch.setattr(device, "visible_gpus", lambda: 0)
    reg = DeviceRegistry()
    plugin.kernflow_register_devices(reg)
    assert reg.device_types() == []


def test_kernflow_register_kernels_registers_nothing_without_a_gpu(monkeypatch, caplog):
    monkeypatch.setattr(device, "visible_gpus", lambda: 0)
    reg = KernelRegistry()
    with caplog.at_level(logging.DEBUG, logger="kernflow.kernels.gpu.plugin"):
        plugin.kernflow_register_kernels(reg)
    assert reg.op_types() == set()
    assert any("no usable GPU" in r.getMessage() for r in caplog.records)


def test_visible_gpus_is_zero_without_cupy_or_device(monkeypatch):
    import builtins
    real = builtins.__import__

    def no_cupy(name, *a, **k):
        if name == "cupy":
            raise ImportError("No module named 'cupy'")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_cupy)
    assert device.visible_gpus() == 0


def test_create_gpu_devices_is_empty_without_a_gpu(monkeypatch):
    monkeypatch.setattr(device, "visible_gpus", lambda: 0)
    assert device.create_gpu_devices(None, None, "localhost", 0, 0) == []

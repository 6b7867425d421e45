"""One test per hook, each through a plugin module registered exactly as an entry point would be."""

import importlib
import inspect
import pathlib
import re
import types

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.plugins import hookimpl, hookspecs, manager
from kernflow.core.runtime.device import Device

ROOT = pathlib.Path(__file__).resolve().parents[4]


def _plugin(**hooks):
    mod = types.ModuleType("kernflow_test_plugin")
    for name, fn in hooks.items():
        setattr(mod, name, hookimpl(fn))
    return mod


@pytest.fixture
def with_plugin(monkeypatch):
    """Rebuilds the registries with core's built-ins, the installed plugins, and `plugin`."""
    def install(plugin):
        pm = manager.KernflowPluginManager()
        base = manager.get_plugin_manager()
        for name, p in base.list_name_plugin():
            pm.register(p, name=name)
        pm.register(plugin, name="kernflow_test_plugin")
        regs = manager.Registries(pm)
        monkeypatch.setattr(manager, "_registries", regs)
        return regs
    yield install


class XPUDevice(Device):
    seconds_per_flop = 1.0 / 1e12  # much faster than the CPU: placement should prefer it


def test_kernflow_register_devices(with_plugin):
    def kernflow_register_devices(registry):
        registry.register_device_factory(
            "XPU", lambda n, config, job, replica, task: [XPUDevice(
                f"/job:{job}/replica:{replica}/task:{task}/device:XPU:0", "XPU")], priority=100)

    def kernflow_register_kernels(registry):
        from kernflow.core.runtime import base_kernels
        base_kernels.register(registry, "XPU")
        registry.register_simple("AddV2", "XPU", lambda a, b: np.add(a, b))

    with_plugin(_plugin(kernflow_register_devices=kernflow_register_devices,
                        kernflow_register_kernels=kernflow_register_kernels))
    g = kf.Graph()
    with g.as_default():
        with kf.device("/device:XPU:0"):
            y = kf.constant(1.0) + 2.0
        with kf.Session() as s:
            # (a GPU plugin, when installed, adds its GPUs between the two)
            assert [d.device_type for d in s.list_devices() if d.device_type != "GPU"] == ["XPU", "CPU"]
            md = kf.RunMetadata()
            assert s.run(y, options=kf.RunOptions(output_partition_graphs=True), run_metadata=md) == 3.0
    devices = {n.name: n.device for p in md.partition_graphs for n in p.node}
    assert devices[y.op.name].endswith("device:XPU:0")


def test_kernflow_register_kernels(with_plugin):
    calls = []

    def kernflow_register_kernels(registry):
        from kernflow.core.framework import op_def_registry
        if op_def_registry.lookup("TestTriple") is None:
            op_def_registry.register_op("TestTriple", inputs=["x: float"], outputs=["y: float"],
                                        shape_fn=lambda op: [op.inputs[0].shape], doc="3x")
        registry.register_simple("TestTriple", "CPU", lambda x: (calls.append(1), x * 3)[1])

    regs = with_plugin(_plugin(kernflow_register_kernels=kernflow_register_kernels))
    with pytest.raises(ValueError, match="registered twice: first at .*test_hooks.py"):
        regs.kernels.register_simple("TestTriple", "CPU", lambda x: x)
    from kernflow.core.framework.op_def_library import apply_op
    g = kf.Graph()
    with g.as_default():
        y = apply_op("TestTriple", [kf.constant(2.0)]).outputs[0]
        with kf.Session() as s:
            assert s.run(y) == 6.0
    assert calls == [1]


def test_kernflow_register_ops(with_plugin):
    def kernflow_register_ops(registry):
        registry.register_op("TestHookOp", inputs=["x: T"], outputs=["y: T"], attrs=["T: {float}"],
                             shape_fn=lambda op: [op.inputs[0].shape], doc="Test op from a hook.")

    from kernflow.core.framework import op_def_registry
    with_plugin(_plugin(kernflow_register_ops=kernflow_register_ops))
    op = op_def_registry.get("TestHookOp")
    assert op.doc == "Test op from a hook." and "test_hooks.py" in op.site


def test_missing_kernel_lists_devices_that_have_one():
    from kernflow.core.plugins import registries
    with pytest.raises(errors.NotFoundError, match="No registered 'AddV2' OpKernel for 'TPU' devices.*CPU"):
        registries().kernels.lookup("AddV2", "TPU", {"T": kf.float32})
    with pytest.raises(errors.NotFoundError, match="Similar ops with kernels: AddV2"):
        registries().kernels.lookup("AddV3", "CPU", {})


def test_kernflow_register_optimizers(with_plugin):
    class MyOpt:
        pass

    def kernflow_register_optimizers(registry):
        registry.register("MyOpt", MyOpt)

    regs = with_plugin(_plugin(kernflow_register_optimizers=kernflow_register_optimizers))
    assert regs.optimizers.get("MyOpt") is MyOpt
    with pytest.raises(errors.NotFoundError, match="registered: .*'MyOpt'"):
        regs.optimizers.get("Nope")


def test_kernflow_register_transports(with_plugin, monkeypatch):
    from kernflow.core.runtime import transport

    class Pigeon(transport.Transport):
        """Reaches a peer whose offer echoes the challenge."""

        def probe(self):
            probe = transport.Probe(b"coo")
            probe.accepts = lambda params: params == b"coo"
            return probe

        def offer(self, challenge):
            return challenge

    def kernflow_register_transports(registry):
        registry.register("pigeon", Pigeon, priority=1000)

    regs = with_plugin(_plugin(kernflow_register_transports=kernflow_register_transports))
    monkeypatch.delenv(transport.TRANSPORT_ENV, raising=False)
    probes = {}
    try:
        with pytest.raises(ValueError, match="transport 'pigeon' registered twice: first at .*test_hooks.py"):
            regs.transports.register("pigeon", Pigeon)
        pigeon = transport.transports()[0]
        assert isinstance(pigeon, Pigeon) and pigeon.name == "pigeon"
        probes = transport.open_probes()
        offers = {"pigeon": pigeon.offer(probes["pigeon"].challenge), "grpc": b""}
        assert transport.select("", offers, probes) is pigeon          # both ends serve it
        assert transport.select("", {"pigeon": b"hoot", "grpc": b""}, probes).name == "grpc"
    finally:
        for p in probes.values():
            p.close()
        transport.reset_for_tests()


def test_kernflow_register_session_factories(with_plugin):
    class EchoSession:
        def __init__(self, target, graph, config):
            self.target = target

        def run(self, feeds, feed_values, fetches, targets, options=None, run_metadata=None):
            return [np.asarray(len(self.target), np.int32) for _ in fetches]

        def close(self):
            pass

    def kernflow_register_session_factories(registry):
        registry.register("echo", EchoSession)

    with_plugin(_plugin(kernflow_register_session_factories=kernflow_register_session_factories))
    g = kf.Graph()
    with g.as_default():
        c = kf.constant(1.0)
        with kf.Session("echo://abc") as s:
            assert s.run(c) == len("echo://abc")


def test_kernflow_register_servers(with_plugin):
    made = []

    class RecordingServer:
        """Serves nothing; records what kf.train.Server asks of it."""

        def __init__(self, cluster, job_name, task_index, config):
            self.cluster_spec, self.calls = cluster, []
            self.target = f"loop://{cluster.task_address(job_name, task_index)}"
            made.append(self)

        def start(self):
            self.calls.append("start")

        def join(self, timeout=None):
            self.calls.append(("join", timeout))

        def stop(self):
            self.calls.append("stop")

    def kernflow_register_servers(registry):
        registry.register("test-loop", RecordingServer)

    regs = with_plugin(_plugin(kernflow_register_servers=kernflow_register_servers))
    with pytest.raises(ValueError, match="registered twice: first at .*test_hooks.py.*again at"):
        regs.servers.register("test-loop", RecordingServer)
    cluster = {"w": ["h:1", "h:2"]}
    with kf.train.Server(cluster, job_name="w", task_index=1, protocol="test-loop") as server:
        assert server.target == "loop://h:2"
        assert server.server_def.protocol == "test-loop" and server.server_def.task_index == 1
        assert server.cluster_spec == cluster
        server.join(0.1)
    server.stop()  # idempotent: the plugin's server is stopped once
    assert made[0].calls == ["start", ("join", 0.1), "stop"]
    assert kf.train.Server(cluster, "w", 0, protocol="test-loop", start=False) and made[1].calls == []
    with pytest.raises(ValueError, match="Unsupported protocol 'rdma'.*'test-loop'"):
        kf.train.Server(cluster, "w", 0, protocol="rdma")


def test_kernflow_register_commands(with_plugin, capsys):
    def kernflow_register_commands(registry):
        registry.register("hello", "say hello", lambda p: p.add_argument("--who", default="world"),
                          lambda args: print(f"hello {args.who}") or 0)

    with_plugin(_plugin(kernflow_register_commands=kernflow_register_commands))
    from kernflow.core import cli
    assert cli.main(["hello", "--who", "kernflow"]) == 0
    assert "hello kernflow" in capsys.readouterr().out


def test_every_hook_has_a_test_and_a_doc_section():
    hooks = [n for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("kernflow_")]
    assert len(hooks) == 8
    tests = {n for n, _ in inspect.getmembers(importlib.import_module(__name__)) if n.startswith("test_")}
    doc = (ROOT / "docs" / "plugins.md").read_text()
    for h in hooks:
        assert f"test_{h}" in tests, f"hook {h} has no test named test_{h}"
        assert re.search(rf"^## `{h}`", doc, re.M), f"docs/plugins.md has no section for {h}"

"""Workers advertise their kernels in GetStatus; the master places by them, not by its own registry.

In-process workers share the process's kernel registry, so each test gives a worker the registry it
would have with or without a plugin (`Worker(kernels=...)`): the kernels it compiles with are the
ones it advertises. The last test runs the workers in child processes, one with a plugin and one
without, and a master in this process that lacks the plugin's kernel.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client.protobuf import worker_pb2
from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.plugins import get_plugin_manager, registries
from kernflow.core.plugins.registry import KernelRegistry
from kernflow.core.testing.processes import ChildProcess, free_ports
from kernflow.worker.worker import Worker

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"
HALF = "KaTestHalve"      # kernels only where a test says so: never in this process's registry
DOUBLE = "KaTestDouble"   # the master's process has this one (registered below), a worker may not
SCALE = "KaTestScale"     # a kernel for float32 only


def _declare_ops():
    for name in (HALF, DOUBLE, SCALE):
        if op_def_registry.lookup(name) is None:
            op_def_registry.register_op(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: {float, double}"],
                                        shape_fn=lambda op: [op.inputs[0].shape],
                                        doc="Test op of the kernel advertisement tests.")
    k = registries().kernels
    if k.find(DOUBLE, "CPU", {}) is None:
        k.register_simple(DOUBLE, "CPU", lambda x: x * 2)


_declare_ops()


def _registry(*ops) -> KernelRegistry:
    """The kernels of a process with the installed plugins and a test plugin providing `ops`."""
    reg = KernelRegistry()
    get_plugin_manager().hook.kernflow_register_kernels(registry=reg)
    for op in ops:
        if op == HALF:
            reg.register_simple(HALF, "CPU", lambda x: x / 2)
        elif op == DOUBLE:
            reg.register_simple(DOUBLE, "CPU", lambda x: x * 2)
        elif op == SCALE:
            reg.register_simple(SCALE, "CPU", lambda x: x * 3, constraints={"T": [kf.float32]})
    return reg


def _with_worker(cluster, task: str, kernels: KernelRegistry):
    """Gives `task` a fresh worker with `kernels` (what a restart with other plugins does)."""
    spy = cluster.spies[task]
    spec = kf.DeviceSpec.from_string(task)
    spy.inner.close()
    spy.inner = Worker(spec.job, spec.task, resolver=cluster.resolve, recv_timeout_s=30, kernels=kernels)
    return spy


def _op(op_type, x, device=None):
    if device is None:
        return apply_op(op_type, [x]).outputs[0]
    with kf.device(device):
        return apply_op(op_type, [x]).outputs[0]


def test_get_status_lists_the_kernels_only_when_asked_and_only_when_changed():
    w = Worker("worker", 0, kernels=_registry(HALF, SCALE))
    other = Worker("worker", 1, kernels=_registry())
    try:
        plain = w.get_status(worker_pb2.GetStatusRequest())
        assert not plain.kernels and not plain.kernels_digest   # health checks carry no list
        full = w.get_status(worker_pb2.GetStatusRequest(list_kernels=True))
        assert [kl.device_type for kl in full.kernels] == ["CPU"]
        cpu = full.kernels[0]
        assert HALF in cpu.op_types and "MatMul" in cpu.op_types and DOUBLE not in cpu.op_types
        assert list(cpu.op_types) == sorted(cpu.op_types)
        scale = [ck for ck in cpu.constrained if ck.op_type == SCALE]
        assert len(scale) == 1 and [(c.attr, list(c.allowed)) for c in scale[0].constraints] == \
            [("T", [kf.float32.as_datatype_enum])]
        assert full.ByteSize() < 64 * 1024
        # The caller holds this list: only the digest comes back.
        again = w.get_status(worker_pb2.GetStatusRequest(list_kernels=True, kernels_digest=full.kernels_digest))
        assert not again.kernels and again.kernels_digest == full.kernels_digest
        # Other plugins, another digest; the same plugins, the same digest.
        assert other.get_status(worker_pb2.GetStatusRequest(list_kernels=True)).kernels_digest != \
            full.kernels_digest
        twin = Worker("worker", 2, kernels=_registry(SCALE, HALF))
        try:
            assert twin.get_status(worker_pb2.GetStatusRequest(list_kernels=True)).kernels_digest == \
                full.kernels_digest
        finally:
            twin.close()
    finally:
        w.close()
        other.close()


def test_a_master_without_the_kernel_places_the_op_on_the_worker_that_has_it(make_cluster):
    assert registries().kernels.find(HALF, "CPU", {}) is None   # not in the master's process
    c = make_cluster()
    _with_worker(c, T1, _registry(HALF))
    g = kf.Graph()
    with g.as_default():
        x = kf.constant([1.0, 4.0])
        y = _op(HALF, x, "/job:worker/task:1") + 1.0
    np.testing.assert_allclose(c.session(g).run(y), [1.5, 3.0])
    assert c.spies[T1].calls["run_graph"] == 1
    # The embedded runtime still places by its own process's registry, which lacks the kernel.
    with kf.Graph().as_default() as local:
        z = _op(HALF, kf.constant([1.0]))
    with pytest.raises(errors.InvalidArgumentError, match=f"type {HALF}; devices with a kernel: none"):
        with kf.Session(graph=local) as s:
            s.run(z)


def test_a_worker_without_the_kernel_fails_placement_before_any_register_graph(make_cluster):
    c = make_cluster()
    _with_worker(c, T1, _registry())   # the master's process and task 0 have DOUBLE, task 1 not
    g = kf.Graph()
    with g.as_default():
        x = kf.constant([1.0, 4.0])
        y = _op(DOUBLE, x, "/job:worker/task:1")
    s = c.session(g)
    for _ in range(2):   # a failed placement is not kept: the next run asks again, and fails alike
        with pytest.raises(errors.InvalidArgumentError) as e:
            s.run(y)
        msg = e.value.message
        assert f"No OpKernel was registered to support Op '{DOUBLE}' used by node {y.op.name}" in msg
        assert f"attrs {{T=float32}} on {T1} (CPU), the devices its device specification " \
               f"'/job:worker/task:1' allows" in msg
        assert "not advertise a kernel for it" in msg and "Install the plugin on every worker" in msg
        assert f"Devices with a kernel: {T0}/device:CPU:0." in msg
        assert "RegisterGraph" not in msg
        assert c.spies[T0].calls["register_graph"] == 0 and c.spies[T1].calls["register_graph"] == 0
    # Task 1 restarts with the plugin installed: the same session now runs the op there.
    _with_worker(c, T1, _registry(DOUBLE))
    np.testing.assert_allclose(s.run(y), [2.0, 8.0])
    assert c.spies[T1].calls["run_graph"] == 1


def test_an_op_no_task_has_a_kernel_for_fails_at_session_creation_and_extension(make_cluster):
    c = make_cluster()
    for task in (T0, T1):
        _with_worker(c, task, _registry())   # neither task has HALF, whatever the master has
    g = kf.Graph()
    with g.as_default():
        x = kf.constant([1.0, 4.0])
        y = _op(HALF, x)
    with pytest.raises(errors.InvalidArgumentError) as e:
        c.session(g)   # CreateSession
    msg = e.value.message
    assert f"No OpKernel was registered to support Op '{HALF}' used by node {y.op.name}: none of the " \
           f"session's tasks ({T0}, {T1}) advertises a kernel for it in GetStatus" in msg
    assert f"Install the plugin on every worker and ps task that may run '{HALF}'" in msg
    g2 = kf.Graph()
    with g2.as_default():
        x = kf.constant([1.0, 4.0])
    s = c.session(g2)
    with g2.as_default():
        y = _op(HALF, x)
    with pytest.raises(errors.InvalidArgumentError, match=f"Op '{HALF}' used by node {y.op.name}: none"):
        s.run(y)   # ExtendSession
    assert c.spies[T0].calls["register_graph"] == 0 and c.spies[T1].calls["register_graph"] == 0


def test_an_op_naming_no_task_runs_on_the_client_task_and_the_error_says_so(make_cluster):
    c = make_cluster()
    _with_worker(c, T0, _registry())
    _with_worker(c, T1, _registry(HALF))
    g = kf.Graph()
    with g.as_default():
        y = _op(HALF, kf.constant([2.0]))
    with pytest.raises(errors.InvalidArgumentError) as e:
        c.session(g).run(y)
    msg = e.value.message
    assert f"on {T0} (CPU)" in msg and f"Devices with a kernel: {T1}/device:CPU:0." in msg
    assert f"Node {y.op.name} names no job or task, so it runs on the client task {T0}" in msg


def test_a_dtype_constrained_kernel_is_matched_against_the_node(make_cluster):
    c = make_cluster()
    _with_worker(c, T1, _registry(SCALE))
    g = kf.Graph()
    with g.as_default():
        f32 = _op(SCALE, kf.constant([1.0, 2.0]), "/job:worker/task:1")
    s = c.session(g)
    np.testing.assert_allclose(s.run(f32), [3.0, 6.0])
    with g.as_default():   # the whole graph is placed (as in TF): from now on every step fails
        f64 = _op(SCALE, kf.constant([1.0, 2.0], kf.float64), "/job:worker/task:1")
    with pytest.raises(errors.InvalidArgumentError) as e:
        s.run(f64)
    msg = e.value.message
    assert f"'{SCALE}' used by node {f64.op.name} with these attrs {{T=float64}} on {T1} (CPU)" in msg
    assert f"advertises kernels of '{SCALE}' for other attrs only. Registered kernels: device='CPU'; " \
           f"T in [float32] on {T1}." in msg


def test_the_kernel_list_is_sent_once_then_only_its_digest(make_cluster):
    c = make_cluster()
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:1"):
            ys = [x * float(i) for i in range(3)]
    s = c.session(g)
    for y in ys:   # three signatures: three device refreshes
        s.run(y, {x: [1.0, 2.0]})
    spy = c.spies[T1]
    asked = [r for r in spy.requests["get_status"] if r is not None and r.list_kernels]
    # CreateSession's wait for the tasks asks (the graph's op types are checked then), and so
    # does each device refresh
    assert len(asked) == 4
    assert asked[0].kernels_digest == ""
    digest = spy.inner.get_status(asked[0]).kernels_digest
    assert [r.kernels_digest for r in asked[1:]] == [digest] * 3
    assert not spy.inner.get_status(asked[1]).kernels   # answered with the digest alone


# A task of the last test: a worker server in its own process, with the test plugin when argv[2]
# says so (its hooks declare both ops and give both kernels), printing its address.
_TASK = """
import json, sys
import numpy as np
from kernflow.core.plugins import get_plugin_manager, hookimpl

@hookimpl
def kernflow_register_ops(registry):
    for name in ("KaProcHalve", "KaProcDouble"):
        registry.register_op(name, inputs=["x: float"], outputs=["y: float"],
                             shape_fn=lambda op: [op.inputs[0].shape], doc="test op")

@hookimpl
def kernflow_register_kernels(registry):
    registry.register_simple("KaProcHalve", "CPU", lambda x: x / 2)
    registry.register_simple("KaProcDouble", "CPU", lambda x: x * 2)

if sys.argv[2] == "plugin":
    get_plugin_manager().register(sys.modules[__name__])
from kernflow.worker.server import WorkerServer
cluster = json.loads(sys.argv[1])
task = int(sys.argv[3])
server = WorkerServer("worker", task, port=int(cluster["worker"][task].rsplit(":", 1)[1]), resolver=cluster)
print("serving", server.address, flush=True)
server.wait()
"""


@pytest.mark.slow
def test_worker_processes_with_and_without_a_plugin_and_a_master_without_its_kernel():
    from kernflow.master.master import Master
    from kernflow.master.server import MasterServer
    from kernflow.worker.server import static_resolver
    for name in ("KaProcHalve", "KaProcDouble"):   # this process (client, master) declares the ops...
        if op_def_registry.lookup(name) is None:
            op_def_registry.register_op(name, inputs=["x: float"], outputs=["y: float"],
                                        shape_fn=lambda op: [op.inputs[0].shape], doc="test op")
    if registries().kernels.find("KaProcDouble", "CPU", {}) is None:   # ...and has one kernel
        registries().kernels.register_simple("KaProcDouble", "CPU", lambda x: x * 2)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    tasks = [ChildProcess(f"task {i}", [sys.executable, "-c", _TASK, json.dumps(cluster), mode, str(i)])
             for i, mode in enumerate(("plugin", "bare"))]
    master = None
    try:
        for t in tasks:
            t.expect("serving", timeout=60)
        master = MasterServer(Master(static_resolver(cluster), tasks=[T0, T1]))
        g = kf.Graph()
        with g.as_default():
            x = kf.constant([1.0, 4.0])
            half = _op("KaProcHalve", x)                            # the client task 0 has it
        with kf.Session(master.target, graph=g) as s:
            np.testing.assert_allclose(s.run(half), [0.5, 2.0])
            with g.as_default():
                double = _op("KaProcDouble", x, "/job:worker/task:1")   # the master has it, task 1 not
            with pytest.raises(errors.InvalidArgumentError) as e:
                s.run(double)
        msg = e.value.message
        assert f"No OpKernel was registered to support Op 'KaProcDouble' used by node {double.op.name}" in msg
        assert f"on {T1} (CPU)" in msg and "Install the plugin on every worker" in msg
        assert "RegisterGraph" not in msg
    finally:
        if master is not None:
            master.stop()
        for t in tasks:
            t.kill()

"""The embedded runtime end to end: pruning, placement, partitioning, Send/Recv, the executor."""

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.plugins import registries

TWO_CPUS = kf.ConfigProto(device_count={"CPU": 2})
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"


def _register_test_ops():
    """Test-only ops: a kernel that waits until two copies run at once, and one that fails."""
    if op_def_registry.lookup("TestRendezvousBarrier") is not None:
        return
    op_def_registry.register_op("TestRendezvousBarrier", inputs=["x: float"], outputs=["y: float"],
                                shape_fn=lambda op: [op.inputs[0].shape],
                                doc="Test op: blocks until another instance runs concurrently.")
    op_def_registry.register_op("TestNeverDone", inputs=["x: float"], outputs=["y: float"],
                                shape_fn=lambda op: [op.inputs[0].shape],
                                doc="Test op: an asynchronous kernel that never completes.")
    op_def_registry.register_op("TestFail", inputs=["x: float"], outputs=["y: float"],
                                shape_fn=lambda op: [op.inputs[0].shape],
                                doc="Test op: always raises.")
    barrier = threading.Barrier(2, timeout=5)

    def barrier_kernel(ctx):
        def compute(x):
            barrier.wait()
            return x
        return compute

    def fail_kernel(ctx):
        def compute(x):
            raise errors.InvalidArgumentError(None, None, "TestFail always fails")
        return compute

    k = registries().kernels
    k.register("TestNeverDone", "CPU", lambda ctx: (lambda step, inputs, done: None), is_async=True)
    k.register("TestRendezvousBarrier", "CPU", barrier_kernel, expensive=True)
    k.register("TestFail", "CPU", fail_kernel)


_register_test_ops()


def _apply(op_type, x, name=None):
    from kernflow.core.framework.op_def_library import apply_op
    return apply_op(op_type, [x], name=name).outputs[0]


@pytest.fixture
def g():
    graph = kf.Graph()
    with graph.as_default():
        yield graph


def test_graph_over_two_cpus_uses_send_recv(g):
    x = kf.placeholder(kf.float32, [3], name="x")
    with kf.device("/cpu:0"):
        w = x - 1.0
    with kf.device("/cpu:1"):
        y = w + 2.0 + 0.0 * x
        v = kf.Variable(np.zeros(3, np.float32), name="v")
        upd = v.assign_add(y)
    with kf.device("/cpu:0"):
        z = y + v.value() + 0.0 * x
    opts = kf.RunOptions(output_partition_graphs=True)
    md = kf.RunMetadata()
    with kf.Session(config=TWO_CPUS) as s:
        s.run(v.initializer)
        out = s.run([z, upd], {x: [1, 2, 3]}, options=opts, run_metadata=md)
    np.testing.assert_allclose(out[1], [2, 3, 4])
    # z reads v with no ordering against the update (as in TF): before or after it.
    assert np.allclose(out[0], [2, 3, 4]) or np.allclose(out[0], [4, 6, 8]), out[0]
    parts = {tuple(sorted({n.device for n in p.node})): [n.op for n in p.node] for p in md.partition_graphs}
    assert set(parts) == {(CPU0,), (CPU1,)}
    assert "_Send" in parts[(CPU0,)] and "_Recv" in parts[(CPU1,)]
    assert "_Recv" in parts[(CPU0,)] and "_Send" in parts[(CPU1,)]
    # x feeds both devices: each has an _Arg of it, and x itself crosses no device.
    assert parts[(CPU0,)].count("_Arg") == 1 and parts[(CPU1,)].count("_Arg") == 1
    sent = [n.attr["tensor_name"].s for p in md.partition_graphs for n in p.node if n.op == "_Send"]
    assert not any(t.startswith(b"_arg_") for t in sent), sent
    # One Recv per (tensor, destination) however many consumers.
    recvs = [n for p in md.partition_graphs for n in p.node if n.op == "_Recv"]
    assert len({(n.attr["tensor_name"].s, n.device) for n in recvs}) == len(recvs)


def test_control_edge_across_devices(g):
    v = kf.Variable(0.0, name="v")
    with kf.device("/cpu:1"):
        inc = v.assign_add(1.0)
    with kf.control_dependencies([inc]):
        with kf.device("/cpu:0"):
            out = kf.identity(kf.constant(5.0))
    with kf.Session(config=TWO_CPUS) as s:
        s.run(v.initializer)
        assert s.run(out) == 5.0
        assert s.run(v) == 1.0


def test_variable_ops_colocate_with_variable(g):
    with kf.device("/cpu:1"):
        v = kf.Variable(1.0, name="v")
    inc = v.assign_add(2.0)  # no device requested: must sit with v
    md = kf.RunMetadata()
    with kf.Session(config=TWO_CPUS) as s:
        s.run(v.initializer)
        s.run(inc, options=kf.RunOptions(output_partition_graphs=True), run_metadata=md)
    placed = {n.name: n.device for p in md.partition_graphs for n in p.node}
    assert placed[inc.op.name] == CPU1


def test_unconstrained_ops_stay_on_first_device(g):
    x = kf.placeholder(kf.float32, [])
    y = x + 1.0 + 2.0
    md = kf.RunMetadata()
    with kf.Session(config=TWO_CPUS) as s:
        s.run(y, {x: 1.0}, options=kf.RunOptions(output_partition_graphs=True), run_metadata=md)
    assert len(md.partition_graphs) == 1
    assert {n.device for n in md.partition_graphs[0].node} == {CPU0}


def test_explicit_device_that_does_not_exist(g):
    with kf.device("/device:GPU:99"):   # GPU:0 exists where the GPU plugin finds a GPU
        y = kf.constant(1.0) + 1.0
    with kf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="Cannot assign a device for operation"):
            s.run(y)
    with kf.Session(config=kf.ConfigProto(allow_soft_placement=True)) as s:
        assert s.run(y) == 2.0


def test_log_device_placement(g, capsys):
    y = kf.constant(1.0, name="c") + 1.0
    with kf.Session(config=kf.ConfigProto(log_device_placement=True)) as s:
        s.run(y)
    err = capsys.readouterr().err
    assert f"c: (Const): {CPU0}" in err


def test_independent_expensive_branches_run_concurrently(g):
    x = kf.placeholder(kf.float32, [])
    a = _apply("TestRendezvousBarrier", x + 1.0)
    b = _apply("TestRendezvousBarrier", x + 2.0)
    with kf.Session(config=kf.ConfigProto(inter_op_parallelism_threads=2)) as s:
        assert s.run([a, b], {x: 0.0}) == [1.0, 2.0]  # a sequential run would time out at the barrier


def test_error_in_one_partition_aborts_the_step(g):
    x = kf.placeholder(kf.float32, [])
    with kf.device("/cpu:1"):
        bad = _apply("TestFail", x, name="boom")
    y = bad + 1.0  # cpu:0 waits on a Recv that never gets a value
    with kf.Session(config=TWO_CPUS) as s:
        t0 = time.monotonic()
        with pytest.raises(errors.InvalidArgumentError, match="boom"):
            s.run(y, {x: 1.0})
        assert time.monotonic() - t0 < 2.0


def test_kernel_error_names_the_node(g):
    x = kf.placeholder(kf.float32, [])
    y = _apply("TestFail", x, name="failing_node")
    with kf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="failing_node"):
            s.run(y, {x: 1.0})


def test_step_plans_are_cached(g):
    x = kf.placeholder(kf.float32, [])
    y = x + 1.0
    with kf.Session() as s:
        s.run(y, {x: 1.0})
        s.run(y, {x: 2.0})
        s.run([y], {x: 2.0})
        assert len(s._impl._steps) == 1


def test_graph_extended_after_first_run(g):
    x = kf.placeholder(kf.float32, [])
    y = x + 1.0
    with kf.Session() as s:
        assert s.run(y, {x: 1.0}) == 2.0
        z = y + 10.0
        assert s.run(z, {x: 1.0}) == 12.0


def test_run_metadata_step_stats(g):
    x = kf.placeholder(kf.float32, [])
    y = kf.add(x, 1.0, name="traced_add")
    md = kf.RunMetadata()
    with kf.Session() as s:
        s.run(y, {x: 1.0}, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE), run_metadata=md)
        assert s._impl.cost_model.measured("traced_add", "CPU") is not None
    names = [n.node_name for d in md.step_stats.dev_stats for n in d.node_stats]
    assert "traced_add" in names


def test_timeout_on_an_async_kernel_that_never_completes(g):
    x = kf.placeholder(kf.float32, [])
    a = _apply("TestNeverDone", x)
    with kf.Session() as s:
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            s.run(a, {x: 1.0}, options=kf.RunOptions(timeout_in_ms=300))
        assert time.monotonic() - t0 < 4.9


def test_intermediates_are_released(g):
    """A value is freed after its last consumer: peak live memory stays near one tensor."""
    import tracemalloc
    x = kf.placeholder(kf.float32, [1 << 18])  # 1 MiB
    y = x
    for _ in range(20):
        y = y + 1.0
    data = np.zeros(1 << 18, np.float32)
    with kf.Session() as s:
        s.run(y, {x: data})
        tracemalloc.start()
        s.run(y, {x: data})
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < 5 * (1 << 20), peak

"""The partition runner (kernflow/core/runtime/partition_runner.py), run directly on hand-written
partitions compiled with a registry of this file's kernels: two partitions exchanging a tensor
through the rendezvous (the inline one on the caller's thread), the first error winning and aborting
the others, an abort from outside, the deadline, the host/device feed rule on a fake device with
memory of its own, fetches copied to the host, and variables read for the worker."""

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.plugins.registry import KernelRegistry
from kernflow.core.protobuf import graph_pb2
from kernflow.core.protobuf import step_stats_pb2
from kernflow.core.runtime import base_kernels
from kernflow.core.runtime import partition_runner as pr
from kernflow.core.runtime.execution import StepContext
from kernflow.core.runtime.executor import ThreadPool, compile_partition
from kernflow.core.runtime.partition_runner import Partition, PartitionRunner
from kernflow.core.runtime.cost_model import CostModel
from kernflow.core.runtime.rendezvous import LocalRendezvous
from kernflow.core.runtime.resource_mgr import Var
from kernflow.core.runtime.step_stats_collector import StepStatsCollector
from kernflow.kernels.cpu.device import CPUDevice

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
CPU2 = "/job:localhost/replica:0/task:0/device:CPU:2"
F32 = kf.float32
I32 = kf.int32

_threads = {}   # node name -> thread id its kernel ran on
_hang_started = threading.Event()


def _register_ops():
    for name, doc in (("PRTestFail", "raises"), ("PRTestHang", "never completes unless cancelled"),
                      ("PRTestSlow", "sleeps 50 ms"), ("PRTestSlowPool", "sleeps 50 ms on the pool"),
                      ("PRTestVar", "returns a variable"),
                      ("PRTestThread", "records its thread")):
        if op_def_registry.lookup(name) is None:
            op_def_registry.register_op(name, inputs=["x: float"], outputs=["y: float"],
                                        shape_fn=lambda op: [op.inputs[0].shape],
                                        doc=f"Test op of test_partition_runner: {doc}.")


def _registry():
    reg = KernelRegistry()
    base_kernels.register(reg, "CPU")

    def fail(ctx):
        def compute(x):
            raise errors.InvalidArgumentError(None, None, "the first failure")
        return compute

    def hang(ctx):
        def compute(step, inputs, done):
            _hang_started.set()
            step.cancellation.register(
                lambda err: done(errors.CancelledError(None, None, "a later error: the hang was cancelled")))
        return compute

    def slow(ctx):
        def compute(x):
            time.sleep(0.05)
            return x
        return compute

    def var(ctx):
        def compute(x):
            v = Var("v")
            v._value = x + 1
            return v
        return compute

    def thread(ctx):
        def compute(x):
            _threads[ctx.name] = threading.get_ident()
            return x
        return compute

    reg.register("AddV2", "CPU", lambda ctx: _recording(ctx, lambda x, y: np.add(x, y)))
    reg.register("Reshape", "CPU", lambda ctx: _recording(ctx, lambda t, s: np.reshape(t, tuple(s))),
                 host_memory=("shape",))
    reg.register("PRTestFail", "CPU", fail)
    reg.register("PRTestHang", "CPU", hang, is_async=True)
    reg.register("PRTestSlow", "CPU", slow)
    reg.register("PRTestSlowPool", "CPU", slow, expensive=True)
    reg.register("PRTestVar", "CPU", var)
    reg.register("PRTestThread", "CPU", thread)
    return reg


_seen = {}   # node name -> types of the inputs its kernel got (the memory they were in)


def _recording(ctx, fn):
    def compute(*args):
        _seen.setdefault(ctx.name, []).append(tuple(type(a) for a in args))
        return fn(*args)
    return compute


_register_ops()
KERNELS = _registry()
POOL = ThreadPool(2, name="test-partition-runner")


def _attr(nd, k, v):
    if isinstance(v, kf.DType):
        nd.attr[k].type = v.as_datatype_enum
    elif isinstance(v, bool):
        nd.attr[k].b = v
    elif isinstance(v, int):
        nd.attr[k].i = v
    else:
        nd.attr[k].s = v.encode()


def _partition(device, *nodes, force_dataflow=False):
    """Compiles a partition of (name, op, inputs, attrs) nodes placed on `device`."""
    gd = graph_pb2.GraphDef()
    for name, op, inputs, attrs in nodes:
        nd = gd.node.add(name=name, op=op, input=list(inputs), device=device.name)
        for k, v in attrs.items():
            _attr(nd, k, v)
    return compile_partition(gd, device, KERNELS, POOL, {}, force_dataflow=force_dataflow)


def _arg(name, index, t=F32):
    return (name, "_Arg", [], {"T": t, "index": index})


def _ret(name, src, index, t=F32):
    return (name, "_Retval", [src], {"T": t, "index": index})


def _transfer(op, name, tensor, src=None, dst=None, inputs=()):
    return (name, op, list(inputs), {"T": F32, "tensor_name": tensor, "send_device": src.name,
                                     "send_device_incarnation": src.incarnation, "recv_device": dst.name})


@pytest.fixture
def cpus():
    return CPUDevice(CPU0, "CPU"), CPUDevice(CPU1, "CPU"), CPUDevice(CPU2, "CPU")


def _exchange_step(cpus):
    """CPU:0 computes y = x + x, sends it and fetches it (position 1); CPU:1 receives it and fetches
    z = y + a (position 0). Feeds: [x, a]."""
    c0, c1, _ = cpus
    p0 = _partition(c0, _arg("x", 0), ("y", "AddV2", ["x", "x"], {"T": F32}),
                    ("who", "PRTestThread", ["y"], {}),
                    _transfer("_Send", "send_y", "y:0", c0, c1, ["who"]), _ret("y_out", "who", 1))
    p1 = _partition(c1, _arg("a", 0), _transfer("_Recv", "recv_y", "y:0", c0, c1),
                    ("z", "AddV2", ["recv_y", "a"], {"T": F32}), _ret("z_out", "z", 0))
    return p0, p1


def test_two_partitions_exchange_through_the_rendezvous(cpus):
    p0, p1 = _exchange_step(cpus)
    assert p0.inline and not p1.inline
    # The receiving partition first: the runner starts it, then runs the sender on this thread.
    runner = PartitionRunner([Partition(p1, [1], [0]), Partition(p0, [0], [1])], 2, 2)
    assert runner.inline is None
    for step in (1, 2):   # one runner, many steps
        x, a = np.array([1.0, 2.0], np.float32), np.array([10.0, 20.0], np.float32)
        z, y = runner.run([x, a], LocalRendezvous(), step)
        np.testing.assert_array_equal(y, [2.0, 4.0])
        np.testing.assert_array_equal(z, [12.0, 24.0])
    assert _threads["who"] == threading.get_ident()


def test_with_stats_every_partition_runs_on_an_executor_that_records_them(cpus):
    p0, p1 = _exchange_step(cpus)
    runner = PartitionRunner([Partition(p0, [0], [1]), Partition(p1, [1], [0])], 2, 2)
    collector = StepStatsCollector(CostModel())
    _threads.clear()
    z, y = runner.run([np.ones(2, np.float32), np.ones(2, np.float32)], LocalRendezvous(), 3,
                      collector=collector)
    np.testing.assert_array_equal(z, [3.0, 3.0])
    np.testing.assert_array_equal(y, [2.0, 2.0])
    stats = step_stats_pb2.StepStats()
    collector.finalize(stats)
    ran = {d.device: {n.node_name for n in d.node_stats} for d in stats.dev_stats}
    assert {"y", "who", "send_y"} <= ran[CPU0] and {"recv_y", "z"} <= ran[CPU1]


def test_one_partition_with_the_steps_order_runs_inline_without_a_rendezvous(cpus):
    c0 = cpus[0]
    plan = _partition(c0, _arg("x", 0), _arg("w", 1), ("y", "AddV2", ["x", "w"], {"T": F32}),
                      _ret("y_out", "y", 0))
    runner = PartitionRunner([Partition.of(plan)], 2, 1)
    assert runner.inline is not None and runner.replay is None
    out = runner.inline([np.float32(1), np.float32(2)], StepContext(1, None, c0))
    assert out == [3.0]
    # Feeds in another order than the partition's: no inline function, run() still runs it here.
    swapped = PartitionRunner([Partition(plan, [1, 0], [0])], 2, 1)
    assert swapped.inline is None
    assert swapped.run([np.float32(5), np.float32(7)], LocalRendezvous(), 1) == [12.0]


def _slow_chain(device, n, op, force_dataflow=False):
    """A partition of `n` dependent kernels of 50 ms each: x -> ... -> out."""
    nodes, prev = [_arg("x", 0)], "x"
    for i in range(n):
        nodes.append((f"slow{i}", op, [prev], {}))
        prev = f"slow{i}"
    return _partition(device, *nodes, _ret("out", prev, 0), force_dataflow=force_dataflow)


def test_the_first_error_wins_and_aborts_the_other_partitions(cpus):
    c0, c1, c2 = cpus
    c3 = CPUDevice("/job:localhost/replica:0/task:0/device:CPU:3", "CPU")
    # CPU:0 fails before sending; CPU:1 waits for its value; CPU:2 hangs until cancelled, then fails
    # with an error of its own, which must not win; CPU:3 runs 2 s of kernels on the pool, and
    # stops when the step is aborted.
    p0 = _partition(c0, _arg("x", 0), ("boom", "PRTestFail", ["x"], {}),
                    _transfer("_Send", "send", "t:0", c0, c1, ["boom"]))
    p1 = _partition(c1, _transfer("_Recv", "recv", "t:0", c0, c1), _ret("r", "recv", 0))
    p2 = _partition(c2, _arg("x2", 0), ("hang", "PRTestHang", ["x2"], {}), _ret("h", "hang", 1))
    p3 = _slow_chain(c3, 40, "PRTestSlowPool", force_dataflow=True)
    runner = PartitionRunner([Partition(p1, [], [0]), Partition(p2, [0], [1]), Partition(p3, [0], [2]),
                              Partition(p0, [0], [])], 1, 3)
    _hang_started.clear()
    rdv = LocalRendezvous()
    t0 = time.monotonic()
    with pytest.raises(errors.InvalidArgumentError) as e:
        runner.run([np.ones(1, np.float32)], rdv, 7)
    assert time.monotonic() - t0 < 1.0
    assert _hang_started.is_set()
    assert "the first failure" in e.value.message and "boom" in e.value.message
    assert rdv.error is e.value


def test_an_abort_from_outside_stops_every_partition(cpus):
    # 2 s of kernels on the pool, blocked on nothing: only the runner can stop them (as the worker's
    # AbortStep and a session's close do, by aborting the step's rendezvous).
    plan = _slow_chain(cpus[1], 40, "PRTestSlowPool", force_dataflow=True)
    runner = PartitionRunner([Partition.of(plan)], 1, 1)
    rdv = LocalRendezvous()
    stop = errors.AbortedError(None, None, "step 9 was aborted by the test")
    threading.Timer(0.1, rdv.abort, (stop,)).start()
    t0 = time.monotonic()
    with pytest.raises(errors.AbortedError, match="aborted by the test"):
        runner.run([np.ones(1, np.float32)], rdv, 9)
    assert time.monotonic() - t0 < 1.0
    # A rendezvous aborted before the step: nothing runs.
    hang = PartitionRunner([Partition.of(_partition(cpus[1], _arg("x", 0), ("hang", "PRTestHang", ["x"], {}),
                                                    _ret("h", "hang", 0)))], 1, 1)
    _hang_started.clear()
    with pytest.raises(errors.AbortedError, match="aborted by the test"):
        hang.run([np.ones(1, np.float32)], rdv, 10)
    assert not _hang_started.is_set()


def test_the_deadline_names_the_partitions_still_running(cpus):
    c0, c1, _ = cpus
    p0 = _partition(c0, _arg("x", 0), ("y", "AddV2", ["x", "x"], {"T": F32}), _ret("y_out", "y", 0))
    p1 = _partition(c1, _arg("x1", 0), ("hang", "PRTestHang", ["x1"], {}), _ret("h", "hang", 1))
    runner = PartitionRunner([Partition(p0, [0], [0]), Partition(p1, [0], [1])], 1, 2)
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError) as e:
        runner.run([np.ones(1, np.float32)], LocalRendezvous(), 11, deadline=time.monotonic() + 0.2,
                   timeout_message="step 11 timed out after 200 ms")
    assert 0.15 < time.monotonic() - t0 < 2.0
    assert e.value.message == f"step 11 timed out after 200 ms (partitions still running on {CPU1})"


def test_the_deadline_stops_a_partition_running_on_the_callers_thread(cpus):
    # 40 kernels of 50 ms each, run by the dataflow executor on the thread that starts it.
    plan = _slow_chain(cpus[0], 40, "PRTestSlow", force_dataflow=True)
    runner = PartitionRunner([Partition.of(plan)], 1, 1)
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="took too long"):
        runner.run([np.ones(1, np.float32)], LocalRendezvous(), 12, deadline=time.monotonic() + 0.2,
                   timeout_message="took too long")
    assert time.monotonic() - t0 < 1.0


class _DeviceArray(np.ndarray):
    """An array in the fake accelerator's memory."""


class _Accelerator(CPUDevice):
    """A CPU that pretends to have memory of its own: uploads and downloads are counted."""

    has_device_memory = True

    def __init__(self, name):
        super().__init__(name, "CPU")
        self.uploads = 0
        self.downloads = 0

    def to_device(self, v):
        if type(v) is _DeviceArray:
            return v
        self.uploads += 1
        return np.array(v).view(_DeviceArray)

    def to_host(self, v):
        if type(v) is _DeviceArray:
            self.downloads += 1
            return np.array(v).view(np.ndarray)
        return v


class _FakeCupyArray:
    """A device array (cupy-like) an in-process caller feeds."""

    __cuda_array_interface__ = {}

    def __init__(self, value):
        self.value = np.asarray(value)

    def get(self):
        return self.value


def _memory_step(device):
    """x (float) read by three device kernels; s (int32) read only as Reshape's host-memory shape;
    w (float) read by a device kernel and fetched as it is."""
    return _partition(device, _arg("x", 0), _arg("s", 1, I32), _arg("w", 2),
                      ("a", "AddV2", ["x", "x"], {"T": F32}),
                      ("b", "AddV2", ["x", "a"], {"T": F32}),
                      ("c", "AddV2", ["x", "b"], {"T": F32}),
                      ("r", "Reshape", ["c", "s"], {"T": F32, "Tshape": I32}),
                      ("d", "AddV2", ["w", "w"], {"T": F32}),
                      _ret("r_out", "r", 0), _ret("d_out", "d", 1), _ret("w_out", "w", 2))


def test_a_device_with_memory_gets_device_read_feeds_uploaded_once_and_host_read_feeds_as_they_are():
    dev = _Accelerator(CPU0)
    plan = _memory_step(dev)
    assert pr.device_read_feeds(plan) == [0]   # s is read on the host, w is also fetched
    runner = PartitionRunner([Partition.of(plan)], 3, 3)
    x, s, w = np.array([1.0, 2.0], np.float32), np.array([2, 1], np.int32), np.float32(3)
    _seen.clear()
    for run in (lambda f: runner.inline(f, StepContext(1, None, dev)),
                lambda f: runner.run(f, LocalRendezvous(), 2)):
        dev.uploads = 0
        r, d, w_out = run([x, s, w])
        # x once (not once per reader), s never; w is also fetched, so it is handed over as it came
        # and converted where it is read in device memory (twice: both inputs of d).
        assert dev.uploads == 3
        assert _seen["r"][-1] == (_DeviceArray, np.ndarray)   # the shape stayed on the host
        assert _seen["b"][-1] == (_DeviceArray, _DeviceArray)
        # Fetches come back to the host.
        assert type(r) is np.ndarray and type(d) is np.ndarray
        np.testing.assert_array_equal(r, [[4.0], [8.0]])
        assert d == 6.0 and w_out == 3.0


def test_a_device_without_memory_gets_host_feeds():
    dev = CPUDevice(CPU0, "CPU")
    plan = _memory_step(dev)
    assert pr.device_read_feeds(plan) == []
    assert pr.feed_mover(plan) is pr.host_feeds
    runner = PartitionRunner([Partition.of(plan)], 3, 3)
    _seen.clear()
    feeds = [_FakeCupyArray([1.0, 2.0]), np.array([2, 1], np.int32), np.float32(3)]
    r, d, _ = runner.inline(feeds, StepContext(1, None, dev))
    assert _seen["a"][-1] == (np.ndarray, np.ndarray)
    np.testing.assert_array_equal(r, [[4.0], [8.0]])
    r, d, _ = runner.run(feeds, LocalRendezvous(), 2)
    np.testing.assert_array_equal(r, [[4.0], [8.0]])
    host = [np.ones(1)]
    assert pr.host_feeds(host) is host   # host values: no copy of the list


def test_fetched_variables_are_read_only_when_asked(cpus):
    c0 = cpus[0]
    plan = _partition(c0, _arg("x", 0), ("v", "PRTestVar", ["x"], {}), _ret("v_out", "v", 0))
    x = np.ones(2, np.float32)
    (got,) = PartitionRunner([Partition.of(plan)], 1, 1).inline([x], StepContext(1, None, c0))
    assert type(got) is Var
    reader = PartitionRunner([Partition.of(plan)], 1, 1, read_variables=True)
    for out in (reader.inline([x], StepContext(1, None, c0)), reader.run([x], LocalRendezvous(), 2)):
        np.testing.assert_array_equal(out[0], [2.0, 2.0])
    dev = _Accelerator(CPU1)
    plan = _partition(dev, _arg("x", 0), ("v", "PRTestVar", ["x"], {}), _ret("v_out", "v", 0))
    (got,) = PartitionRunner([Partition.of(plan)], 1, 1, read_variables=True).run([x], LocalRendezvous(), 3)
    assert type(got) is np.ndarray


def test_positions_must_match_the_plan(cpus):
    plan = _partition(cpus[0], _arg("x", 0), _ret("x_out", "x", 0))
    with pytest.raises(errors.InvalidArgumentError, match="takes 1 feeds and returns 1 values, got 2 "
                                                          "feed and 1 fetch positions"):
        Partition(plan, [0, 1], [0])


def test_cancelled_deadlines_do_not_pile_up():
    timer = pr._DeadlineTimer()
    fired = threading.Event()
    far = time.monotonic() + 3600
    for _ in range(1000):
        timer.cancel(timer.schedule(far, lambda: None))
    assert len(timer._heap) < 200
    timer.schedule(time.monotonic() + 0.05, fired.set)
    assert fired.wait(2)

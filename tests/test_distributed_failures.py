"""Failures on multi-process clusters: dead and frozen workers, malformed requests.

Workers run in child processes (the ``kernflow worker`` command, or ``kf.train.Server`` and
``server.join()``); masters run in a worker's process or in the test process. Children are killed
in ``finally`` blocks, and every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time

import grpc
import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import ChildProcess, free_ports
from kernflow.core.framework import errors
from kernflow.core.protobuf import graph_pb2, tensor_pb2, types_pb2

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

from kernflow.client import codec  # noqa: E402
from kernflow.client.master_client import GrpcMasterClient  # noqa: E402
from kernflow.client.protobuf import master_pb2, worker_pb2  # noqa: E402
from kernflow.client.worker_client import GrpcWorkerClient  # noqa: E402
from kernflow.master.master import Master  # noqa: E402
from kernflow.master.server import MasterServer  # noqa: E402

pytestmark = pytest.mark.slow

_ENV = dict(os.environ, PYTHONUNBUFFERED="1")
_START_TIMEOUT_S = 30.0
T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"
CPU0 = T0 + "/device:CPU:0"
CPU1 = T1 + "/device:CPU:0"

SERVER = r"""
import json, sys
import kernflow.core as kf
server = kf.train.Server(json.loads(sys.argv[1]), job_name=sys.argv[2], task_index=int(sys.argv[3]))
print("ready", server.target, flush=True)
server.join()
"""


# ---------------------------------------------------------------------------- processes
_free_ports = free_ports


class _Child(ChildProcess):
    def __init__(self, name, args):
        super().__init__(name, args, env=_ENV)


    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def freeze(self, timeout=5.0):
        """SIGSTOP, then waits until every thread of the process is stopped: the signal takes effect
        some time after kill() returns (milliseconds under load in some sandboxes, gVisor's), and a
        step sent meanwhile would still be answered."""
        self.signal(signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while True:
            states = []
            for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
                try:
                    with open(f"/proc/{self.proc.pid}/task/{tid}/stat") as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except OSError:   # (a thread that ended meanwhile)
                    pass
            if states and all(st in ("T", "t") for st in states):
                return
            assert time.monotonic() < deadline, f"{self.name} not stopped {timeout} s after SIGSTOP: {states}"
            time.sleep(0.001)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a stopped process dies at once too
        super().kill()


@contextlib.contextmanager
def _children():
    """Yields a list to append `_Child`ren to; kills every one of them on the way out."""
    kids: list[_Child] = []
    try:
        yield kids
    finally:
        for k in kids:
            k.kill()


def _two_task_cluster():
    ports = _free_ports(2)
    return {"worker": [f"localhost:{p}" for p in ports]}


def _start_servers(kids, cluster):
    """`kf.train.Server` processes for every worker task; returns their targets by index."""
    started = []
    for i in range(len(cluster["worker"])):
        kid = _Child(f"/job:worker/task:{i}",
                     [sys.executable, "-c", SERVER, json.dumps(cluster), "worker", str(i)])
        kids.append(kid)
        started.append(kid)
    return [kid.expect("ready", _START_TIMEOUT_S).split()[1] for kid in started]


def _start_cli_workers(kids, cluster):
    """`kernflow worker` processes for every worker task; returns their addresses by index."""
    started = []
    for i in range(len(cluster["worker"])):
        kid = _Child(f"kernflow worker {i}",
                     [sys.executable, "-m", "kernflow.core.cli", "worker", "--job", "worker", "--task",
                      str(i), "--cluster-spec", json.dumps(cluster), "--grace", "0"])
        kids.append(kid)
        started.append(kid)
    return [kid.expect("listening on", _START_TIMEOUT_S).rsplit(" ", 1)[1] for kid in started]


class _Recording:
    """A worker client that records when each RunGraph started and ended, and how."""

    def __init__(self, client):
        self._client = client
        self.runs: list[dict] = []

    def __getattr__(self, name):
        return getattr(self._client, name)

    def run_graph_async(self, req, timeout, on_done):
        """(the master's call to a same-host worker: the answer comes to `on_done`)"""
        rec = {"step": req.step_id, "start": time.monotonic(), "end": None, "error": None}

        def done(resp, err):
            rec["error"], rec["end"] = err, time.monotonic()
            on_done(resp, err)
        cancel = self._client.run_graph_async(req, timeout, done)
        if cancel is not None:   # (None: the master calls run_graph, which records the run)
            self.runs.append(rec)
        return cancel

    def run_graph(self, req, timeout=None):
        rec = {"step": req.step_id, "start": time.monotonic(), "end": None, "error": None}
        self.runs.append(rec)
        try:
            return self._client.run_graph(req, timeout=timeout)
        except Exception as e:
            rec["error"] = e
            raise
        finally:
            rec["end"] = time.monotonic()


@contextlib.contextmanager
def _master_over(addresses, record_task0=False, **kw):
    """A Master in this process over gRPC workers, served on a free port; yields (server, recorder)."""
    clients = {T0: GrpcWorkerClient(addresses[0], T0), T1: GrpcWorkerClient(addresses[1], T1)}
    recorder = None
    if record_task0:
        recorder = clients[T0] = _Recording(clients[T0])
    master = Master(clients, **kw)
    server = MasterServer(master, port=0)
    try:
        yield server, recorder
    finally:
        server.stop(0)
        master.close()


def _run_in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            box["error"] = e
        box["end"] = time.monotonic()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


# ---------------------------------------------------------------------------- dead workers
def _kill_task1_and_check_the_step_fails_fast(kids, thread, box) -> float:
    """SIGKILLs task 1 while `thread` (`_run_in_thread`) runs a step; checks that the step failed
    within 5 s with UnavailableError or AbortedError naming task 1. Returns when it was killed."""
    assert "end" not in box, "the step ended before its worker was killed"
    killed_at = time.monotonic()
    kids[1].signal(signal.SIGKILL)
    thread.join(15)
    assert not thread.is_alive(), "the step hangs after its worker died"
    err = box.get("error")
    assert isinstance(err, (errors.UnavailableError, errors.AbortedError)), repr(err)
    assert T1 in str(err), str(err)
    assert box["end"] - killed_at < 5.0
    return killed_at


def _chains_graph(length):
    """A matmul chain on each task (slow for big inputs); task 0 adds task 1's result to its own."""
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, None], name="x")
        sums = []
        for task in (0, 1):
            with kf.device(f"/job:worker/task:{task}"):
                w = x * 0.001
                a = x
                for _ in range(length):
                    a = kf.tanh(kf.matmul(a, w))
                sums.append(kf.reduce_sum(a))
        with kf.device("/job:worker/task:0"):
            out = sums[0] + sums[1]
            local = kf.reduce_sum(x * 2.0, name="local")
    return g, x, out, local


# As in TF, a new session waits for every task of the cluster (CreateSession) unless its device
# filters leave the dead one out.
_ONLY_TASK0 = kf.ConfigProto(device_filters=["/job:worker/task:0"])


def _local_graph():
    g = kf.Graph()
    with g.as_default(), kf.device("/job:worker/task:0"):
        x = kf.placeholder(kf.float32, [None], name="x")
        y = kf.reduce_sum(x * 3.0)
    return g, x, y


def test_worker_killed_during_a_step_fails_it_fast_and_the_survivor_aborts():
    cluster = _two_task_cluster()
    with _children() as kids:
        addresses = _start_cli_workers(kids, cluster)
        with _master_over(addresses, record_task0=True) as (server, recorder):
            g, x, out, _ = _chains_graph(150)
            sess = kf.Session(server.target, graph=g)
            try:
                assert np.isfinite(sess.run(out, {x: np.ones((4, 4), np.float32)}))  # registers
                big = np.random.RandomState(0).rand(2000, 2000).astype(np.float32)
                # Unhindered, each task's chain takes ~150 x 2000^3 x 2 flops: well over 10 s here.
                runs_before = len(recorder.runs)
                thread, box = _run_in_thread(lambda: sess.run(out, {x: big}))
                deadline = time.monotonic() + 10
                while len(recorder.runs) == runs_before:
                    assert time.monotonic() < deadline, "the step never reached task 0"
                    time.sleep(0.01)
                time.sleep(1.0)                       # both tasks are deep in their matmul chains
                killed_at = _kill_task1_and_check_the_step_fails_fast(kids, thread, box)
                # The surviving task's part of the step was aborted, not run to the end.
                mine = recorder.runs[runs_before]
                assert mine["end"] is not None and mine["end"] - killed_at < 5.0
                assert isinstance(mine["error"], (errors.AbortedError, errors.CancelledError,
                                                  errors.UnavailableError)), repr(mine["error"])
            finally:
                sess.close()
            # A step that does not involve the dead worker still runs, promptly.
            g2, x2, y2 = _local_graph()
            with kf.Session(server.target, graph=g2, config=_ONLY_TASK0) as s2:
                t = time.monotonic()
                assert s2.run(y2, {x2: np.ones(4, np.float32)}) == 12.0
                assert time.monotonic() - t < 5.0


def test_step_needing_a_worker_killed_between_steps_fails_fast_naming_it():
    cluster = _two_task_cluster()
    with _children() as kids:
        targets = _start_servers(kids, cluster)
        g, x, out, _ = _chains_graph(2)
        with kf.Session(targets[0], graph=g) as sess:
            assert np.isfinite(sess.run(out, {x: np.ones((3, 3), np.float32)}))
            kids[1].signal(signal.SIGKILL)
            kids[1].proc.wait(10)
            for _ in range(2):   # the first step that needs the dead task, and a retry
                t = time.monotonic()
                with pytest.raises((errors.UnavailableError, errors.AbortedError)) as e:
                    sess.run(out, {x: np.ones((3, 3), np.float32)})
                assert time.monotonic() - t < 5.0
                assert "/job:worker/replica:0/task:1" in str(e.value), str(e.value)
        g2, x2, y2 = _local_graph()
        with kf.Session(targets[0], graph=g2, config=_ONLY_TASK0) as sess:
            assert sess.run(y2, {x2: np.ones(2, np.float32)}) == 6.0
        # Without filters the new session waits for the dead task, bounded by the operation timeout.
        t = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError, match="/job:worker/replica:0/task:1"):
            with kf.Session(targets[0], graph=g2,
                            config=kf.ConfigProto(operation_timeout_in_ms=1000)) as sess:
                sess.run(y2, {x2: np.ones(2, np.float32)})
        assert time.monotonic() - t < 5.0


def test_same_session_runs_steps_without_the_dead_worker():
    cluster = _two_task_cluster()
    with _children() as kids:
        targets = _start_servers(kids, cluster)
        g, x, out, local = _chains_graph(2)
        with kf.Session(targets[0], graph=g) as sess:
            ones = np.ones((3, 3), np.float32)
            assert np.isfinite(sess.run(out, {x: ones}))
            assert sess.run(local, {x: ones}) == 18.0
            kids[1].signal(signal.SIGKILL)
            kids[1].proc.wait(10)
            with pytest.raises((errors.UnavailableError, errors.AbortedError)):
                sess.run(out, {x: ones})
            assert sess.run(local, {x: ones}) == 18.0     # task 0 only


def test_worker_killed_while_the_client_waits_to_pull_its_fetch_fails_fast(monkeypatch):
    """A large fetch the client pulls from task 1 itself (RunStepPull), task 1 killed meanwhile."""
    from kernflow.client import fetch_stream
    pulls = []
    real = fetch_stream.pull_step
    monkeypatch.setattr(fetch_stream, "pull_step", lambda *a: pulls.append(time.monotonic()) or real(*a))
    cluster = _two_task_cluster()
    with _children() as kids:
        targets = _start_servers(kids, cluster)
        g = kf.Graph()
        with g.as_default():
            x = kf.placeholder(kf.float32, [1500, 1500], name="x")   # static: a 9 MB fetch, pulled
            with kf.device("/job:worker/task:1"):
                a = x
                for _ in range(200):   # tens of seconds of matmuls
                    a = kf.tanh(kf.matmul(a, x * 0.001))
        big = np.random.RandomState(0).rand(1500, 1500).astype(np.float32)
        with kf.Session(targets[0], graph=g) as sess:
            thread, box = _run_in_thread(lambda: sess.run(a, {x: big}))
            deadline = time.monotonic() + 10
            while not pulls:
                assert time.monotonic() < deadline, "the step did not start a RunStepPull"
                time.sleep(0.01)
            time.sleep(1.5)                        # registered, running, the client's pull waiting
            _kill_task1_and_check_the_step_fails_fast(kids, thread, box)
        g2, x2, y2 = _local_graph()
        with kf.Session(targets[0], graph=g2, config=_ONLY_TASK0) as s2:
            assert s2.run(y2, {x2: np.ones(2, np.float32)}) == 6.0


def _frozen_worker_step(health_check_interval_s, rpc_timeout_s, abort_grace_s):
    """Runs a step whose task 1 is frozen (SIGSTOP); returns (seconds until it failed, error)."""
    cluster = _two_task_cluster()
    with _children() as kids:
        addresses = _start_cli_workers(kids, cluster)
        with _master_over(addresses, health_check_interval_s=health_check_interval_s,
                          rpc_timeout_s=rpc_timeout_s, abort_grace_s=abort_grace_s) as (server, _):
            g, x, out, _ = _chains_graph(2)
            with kf.Session(server.target, graph=g) as sess:
                assert np.isfinite(sess.run(out, {x: np.ones((3, 3), np.float32)}))
                kids[1].freeze()      # alive (its socket stays open) but silent
                try:
                    t = time.monotonic()
                    with pytest.raises((errors.UnavailableError, errors.DeadlineExceededError)) as e:
                        sess.run(out, {x: np.ones((3, 3), np.float32)})
                    return time.monotonic() - t, e.value
                finally:
                    kids[1].signal(signal.SIGCONT)


def test_frozen_worker_fails_the_step_through_health_checks():
    elapsed, err = _frozen_worker_step(health_check_interval_s=0.5, rpc_timeout_s=1.0, abort_grace_s=1.0)
    assert elapsed < 5.0, elapsed
    assert T1 in str(err), str(err)


def test_frozen_worker_fails_the_step_without_waiting_for_it():
    # Detection takes one probe interval plus the GetStatus deadline (~1 s); the survivor stops at
    # once after AbortStep, so nothing is left to wait for.
    elapsed, err = _frozen_worker_step(health_check_interval_s=0.3, rpc_timeout_s=0.7, abort_grace_s=3.0)
    assert T1 in str(err), str(err)
    assert elapsed < 2.5, elapsed


def test_frozen_worker_fails_a_one_task_step_through_health_checks():
    """A step on one remote task alone is health-checked too (before: noticed only by gRPC's
    keepalive, after ~119 s)."""
    cluster = _two_task_cluster()
    with _children() as kids:
        addresses = _start_cli_workers(kids, cluster)
        with _master_over(addresses, health_check_interval_s=0.5, rpc_timeout_s=1.0,
                          abort_grace_s=1.0) as (server, _):
            g = kf.Graph()
            with g.as_default():
                x = kf.placeholder(kf.float32, [None, 3], name="x")
                out = kf.reduce_sum(kf.matmul(x, x, transpose_b=True))
            only_task1 = kf.ConfigProto(device_filters=["/job:worker/task:1"])   # the step's one task
            with kf.Session(server.target, graph=g, config=only_task1) as sess:
                ones = np.ones((3, 3), np.float32)
                assert sess.run(out, {x: ones}) == 27.0
                kids[1].freeze()
                try:
                    t = time.monotonic()
                    with pytest.raises((errors.UnavailableError, errors.DeadlineExceededError)) as e:
                        sess.run(out, {x: ones})
                    elapsed = time.monotonic() - t
                finally:
                    kids[1].signal(signal.SIGCONT)
    assert elapsed < 5.0, elapsed
    assert T1 in str(e.value), str(e.value)


# ---------------------------------------------------------------------------- malformed requests
@pytest.fixture(scope="module")
def two_servers():
    """Two `kf.train.Server` processes; yields their addresses ("host:port")."""
    cluster = _two_task_cluster()
    with _children() as kids:
        targets = _start_servers(kids, cluster)
        yield [t[len("grpc://"):] for t in targets]


def _square_graph(device=CPU1):
    """A worker partition: _Arg(float) -> Square -> _Retval."""
    gd = graph_pb2.GraphDef()
    a = gd.node.add(name="arg", op="_Arg", device=device)
    a.attr["T"].type = types_pb2.DT_FLOAT
    a.attr["index"].i = 0
    s = gd.node.add(name="sq", op="Square", device=device, input=["arg"])
    s.attr["T"].type = types_pb2.DT_FLOAT
    r = gd.node.add(name="ret", op="_Retval", device=device, input=["sq"])
    r.attr["T"].type = types_pb2.DT_FLOAT
    r.attr["index"].i = 0
    return gd


def _bad_graphs():
    def g(*nodes):
        gd = graph_pb2.GraphDef()
        for kw in nodes:
            attrs = kw.pop("attrs", {})
            kw.setdefault("device", CPU1)
            nd = gd.node.add(**kw)
            for k, v in attrs.items():
                nd.attr[k].type = v
        return gd
    f = types_pb2.DT_FLOAT
    return {
        "unknown op": (g({"name": "a", "op": "NoSuchOp"}), "NoSuchOp"),
        "missing input": (g({"name": "a", "op": "Identity", "input": ["nope"], "attrs": {"T": f}}),
                          "nope"),
        "bad input syntax": (g({"name": "a", "op": "Identity", "input": ["^"], "attrs": {"T": f}}), "a"),
        "cycle": (g({"name": "a", "op": "Identity", "input": ["a"], "attrs": {"T": f}}), "cycle"),
        "missing attr": (g({"name": "a", "op": "Const"}), "dtype"),
        "duplicate name": (g({"name": "a", "op": "NoOp"}, {"name": "a", "op": "NoOp"}), "duplicate"),
        "other task's device": (g({"name": "a", "op": "NoOp", "device": CPU0}), "not a device"),
        "bad device": (g({"name": "a", "op": "NoOp", "device": "/job:worker/task:1/device:CPU:x"}),
                       "not a device"),
    }


def _feed(tensor):
    return worker_pb2.NamedTensor(name="x:0", tensor=tensor)


def _run_graph_req(handle, *tensors, step_id=7):
    req = worker_pb2.RunGraphRequest(session_handle="s-bad", graph_handle=handle, step_id=step_id)
    req.send.extend(_feed(t) for t in tensors)
    return req


def _check_square(client, handle, step_id):
    resp = client.run_graph(_run_graph_req(handle, codec.tensor_to_proto(np.arange(4, dtype=np.float32)),
                                           step_id=step_id), timeout=10)
    np.testing.assert_array_equal(codec.proto_to_tensor(resp.recv[0].tensor), [0, 1, 4, 9])


def _check_cluster_step(address):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None], name="x")
        with kf.device("/job:worker/task:1"):
            y = kf.reduce_sum(kf.square(x))
    with kf.Session(f"grpc://{address}", graph=g) as sess:
        assert sess.run(y, {x: np.arange(3, dtype=np.float32)}) == 5.0


def test_malformed_worker_requests_get_invalid_argument_and_the_worker_keeps_serving(two_servers):
    client = GrpcWorkerClient(two_servers[1], T1, default_timeout_s=10)
    for what, (gd, needle) in _bad_graphs().items():
        with pytest.raises(errors.InvalidArgumentError, match=needle) as e:
            client.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s-bad", graph_def=gd))
        assert T1 in str(e.value), (what, str(e.value))
        assert client.get_status().task == 1
    handle = client.register_graph(worker_pb2.RegisterGraphRequest(
        session_handle="s-bad", graph_def=_square_graph())).graph_handle
    good = codec.tensor_to_proto(np.arange(4, dtype=np.float32))
    as_int = tensor_pb2.TensorProto()
    as_int.CopyFrom(good)
    as_int.dtype = types_pb2.DT_INT32
    negative = tensor_pb2.TensorProto()
    negative.CopyFrom(good)
    negative.tensor_shape.dim[0].size = -4
    no_dtype = tensor_pb2.TensorProto()
    no_dtype.CopyFrom(good)
    no_dtype.dtype = types_pb2.DT_INVALID
    bad_requests = {
        "wrong dtype": (_run_graph_req(handle, as_int), "dtype"),
        "no dtype": (_run_graph_req(handle, no_dtype), "dtype"),
        "negative dimension": (_run_graph_req(handle, negative), "shape"),
        "too many feeds": (_run_graph_req(handle, good, good), "feeds"),
        "no feed": (_run_graph_req(handle), "feeds"),
    }
    for step, (what, (req, needle)) in enumerate(bad_requests.items(), start=100):
        req.step_id = step
        with pytest.raises(errors.InvalidArgumentError, match=needle):
            client.run_graph(req, timeout=10)
        _check_square(client, handle, step_id=1000 + step)
    # Recv keys that do not parse, or whose sender is on another task.
    for key in ("garbage", f"{CPU0};1;{CPU1};t:0;0:0"):
        with pytest.raises(errors.InvalidArgumentError):
            list(client.recv_tensor(worker_pb2.RecvTensorRequest(step_id=5, rendezvous_key=key), timeout=5))
    # Bytes that are no RegisterGraphRequest at all.
    channel = grpc.insecure_channel(two_servers[1])
    try:
        raw = channel.unary_unary("/kernflow.client.protobuf.WorkerService/RegisterGraph")
        with pytest.raises(grpc.RpcError) as e:
            raw(b"\x12\xff\xff\xff\xff\x0f", timeout=5)
        assert e.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL)
    finally:
        channel.close()
    _check_square(client, handle, step_id=2000)
    client.deregister_graph(worker_pb2.DeregisterGraphRequest(session_handle="s-bad", graph_handle=handle))
    _check_cluster_step(two_servers[0])


def _content_variants(good):
    out = {}
    for what, content, dims in (("oversized", good.tensor_content + b"\0" * 4, None),
                                ("truncated", good.tensor_content[:12], None),
                                ("huge shape", good.tensor_content, [1 << 40])):
        t = tensor_pb2.TensorProto()
        t.CopyFrom(good)
        t.tensor_content = content
        if dims is not None:
            t.tensor_shape.dim[0].size = dims[0]
        out[what] = t
    strings = tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING)
    strings.tensor_shape.dim.add(size=3)
    strings.string_val.extend([b"a", b"b"])
    out["string count"] = strings
    return out


def test_malformed_tensor_content_gets_invalid_argument(two_servers):
    worker = GrpcWorkerClient(two_servers[1], T1, default_timeout_s=10)
    handle = worker.register_graph(worker_pb2.RegisterGraphRequest(
        session_handle="s-bad", graph_def=_square_graph())).graph_handle
    good = codec.tensor_to_proto(np.arange(4, dtype=np.float32))
    for step, (what, tensor) in enumerate(_content_variants(good).items(), start=300):
        if what == "string count":
            continue   # the graph takes a float
        with pytest.raises(errors.InvalidArgumentError):
            worker.run_graph(_run_graph_req(handle, tensor, step_id=step), timeout=10)
        _check_square(worker, handle, step_id=3000 + step)
    # Through the master: the feed reaches the worker holding the _Arg.
    master = GrpcMasterClient(two_servers[0], default_timeout_s=10)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None], name="x")
        s = kf.placeholder(kf.string, [None], name="s")
        y = kf.identity(x * 2.0, name="y")
        n = kf.size(s, name="n")
    session = master.create_session(master_pb2.CreateSessionRequest(graph_def=g.as_graph_def()))
    for what, tensor in _content_variants(good).items():
        req = master_pb2.RunStepRequest(session_handle=session.session_handle,
                                        fetch=["n:0" if what == "string count" else "y:0"])
        req.feed.add(name="s:0" if what == "string count" else "x:0", tensor=tensor)
        with pytest.raises(errors.InvalidArgumentError):
            master.run_step(req, timeout=10)
    _check_cluster_step(two_servers[0])


def test_malformed_master_requests_get_errors_and_the_master_keeps_serving(two_servers):
    master = GrpcMasterClient(two_servers[0], default_timeout_s=10)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None], name="x")
        with kf.device("/job:worker/task:1"):
            y = kf.identity(x * 2.0, name="y")
    gd = g.as_graph_def()
    # Graphs the master must refuse.
    dup = graph_pb2.GraphDef()
    dup.CopyFrom(gd)
    dup.node.add().CopyFrom(gd.node[0])
    with pytest.raises(errors.InvalidArgumentError, match="already in the graph"):
        master.create_session(master_pb2.CreateSessionRequest(graph_def=dup))
    unknown = graph_pb2.GraphDef()
    unknown.CopyFrom(gd)
    unknown.node.add(name="q", op="NoSuchOp")
    with pytest.raises((errors.InvalidArgumentError, errors.NotFoundError), match="NoSuchOp"):
        master.create_session(master_pb2.CreateSessionRequest(graph_def=unknown))
    dangling = graph_pb2.GraphDef()
    dangling.CopyFrom(gd)
    q = dangling.node.add(name="q", op="Identity", input=["missing"])
    q.attr["T"].type = types_pb2.DT_FLOAT
    with pytest.raises(errors.InvalidArgumentError, match="missing"):
        h = master.create_session(master_pb2.CreateSessionRequest(graph_def=dangling)).session_handle
        master.run_step(master_pb2.RunStepRequest(session_handle=h, fetch=["q:0"]), timeout=10)
    # Steps the master must refuse.
    handle = master.create_session(master_pb2.CreateSessionRequest(graph_def=gd)).session_handle
    good = codec.tensor_to_proto(np.arange(3, dtype=np.float32))

    def step(*feeds, fetch="y:0"):
        req = master_pb2.RunStepRequest(session_handle=handle, fetch=[fetch])
        for name, t in feeds:
            req.feed.add(name=name, tensor=t)
        return master.run_step(req, timeout=10)
    as_int = codec.tensor_to_proto(np.arange(3, dtype=np.int32))
    with pytest.raises(errors.InvalidArgumentError, match="dtype int32 for Tensor x:0 of Placeholder 'x', "
                                                         "which has dtype float32"):
        step(("x:0", as_int))                               # (refused by the master, before any worker runs)
    with pytest.raises(errors.InvalidArgumentError, match=r"shape \(2, 2\) for Tensor x:0"):
        step(("x:0", codec.tensor_to_proto(np.ones((2, 2), np.float32))))
    with pytest.raises(errors.InvalidArgumentError, match="more than once"):
        step(("x:0", good), ("x:0", good))
    with pytest.raises(errors.NotFoundError, match="nope"):
        step(("nope:0", good))
    with pytest.raises(errors.NotFoundError, match="nope"):
        step(("x:0", good), fetch="nope:0")
    with pytest.raises(errors.AbortedError, match="not found"):
        master.run_step(master_pb2.RunStepRequest(session_handle="no-such-session", fetch=["y:0"]))
    with pytest.raises(errors.AbortedError):
        master.extend_session(master_pb2.ExtendSessionRequest(session_handle=handle, graph_def=gd,
                                                               current_graph_version=5))
    # Still serving: the same session, and a fresh client session.
    resp = step(("x:0", good))
    np.testing.assert_array_equal(codec.proto_to_tensor(resp.tensor[0].tensor), [0, 2, 4])
    master.close_session(master_pb2.CloseSessionRequest(session_handle=handle))
    _check_cluster_step(two_servers[0])


# ---------------------------------------------------------------------------- long segments on a push
def test_a_long_segment_run_on_a_push_does_not_fail_the_health_checks():
    """A value pushed over the same-host channel is taken on the receiving connection's reader
    thread, and the segment waiting for it runs there. Here the master and the pushing task share
    this process, so the master's health checks of task 1 travel on the connection task 1 is busy
    computing on. A segment longer than the health check's deadline must not get task 1 declared
    dead: the busy reader hands the connection to a new reader thread (`local_server.HAND_OFF_S`)."""
    cluster = _two_task_cluster()
    with _children() as kids:
        kid = _Child("kernflow worker 1", [sys.executable, "-m", "kernflow.core.cli", "worker", "--job",
                                           "worker", "--task", "1", "--cluster-spec", json.dumps(cluster),
                                           "--grace", "0"])
        kids.append(kid)
        kid.expect("listening on", _START_TIMEOUT_S)
        server = kf.train.Server(cluster, job_name="worker", task_index=0)
        try:
            master = server._impl._master
            master.health_check_interval_s, master.rpc_timeout_s = 0.2, 0.5
            g = kf.Graph()
            with g.as_default():
                with kf.device("/job:worker/task:0"):
                    x = kf.placeholder(kf.float32, [], name="x")
                    n = kf.placeholder(kf.int32, [], name="n")
                    pushed, size = x * 1.0, n + 0   # small: pushed, not announced and pulled
                with kf.device("/job:worker/task:1"):
                    w = kf.fill(kf.stack([size, size]), pushed)
                    a = w
                    for _ in range(12):   # about 2 s of matmuls, all in the segment the push wakes
                        a = kf.tanh(kf.matmul(a, w))
                    out = kf.reduce_sum(a)
            with kf.Session(server.target, graph=g) as sess:
                assert np.isfinite(sess.run(out, {x: 0.0005, n: 4}))
                t = time.monotonic()
                assert np.isfinite(sess.run(out, {x: 0.0005, n: 2200}))   # no UnavailableError
                took = time.monotonic() - t
                # (long enough that a health check was sent, and its deadline passed, meanwhile)
                assert took > master.health_check_interval_s + master.rpc_timeout_s, \
                    f"the step took {took:.2f} s: too short to test"
        finally:
            server.stop()

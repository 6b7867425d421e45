"""Metrics of a small in-process gRPC cluster (two WorkerServers and a MasterServer in this process):
RPC bytes and durations per method on both ends, remote steps, and the RunGraph counts and last
error that GetStatus reports (what `kernflow top` shows)."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.core.testing.metrics import MetricsRecorder
from kernflow.master.master import Master
from kernflow.master.server import MasterServer
from kernflow.worker.server import WorkerServer

WORKER = "kernflow.client.protobuf.WorkerService"
MASTER = "kernflow.client.protobuf.MasterService"


@pytest.fixture
def grpc_cluster():
    """Two worker servers on free ports and a MasterServer over them (all in this process)."""
    clients = {}
    workers = [WorkerServer("worker", i, port=0, resolver=lambda t: clients[t]) for i in range(2)]
    for i, w in enumerate(workers):
        name = f"/job:worker/replica:0/task:{i}"
        clients[name] = GrpcWorkerClient(w.address, name)
    master = Master(lambda t: clients[t], tasks=list(clients), health_check_interval_s=0.5, rpc_timeout_s=5.0)
    server = MasterServer(master, port=0)
    yield server, workers, clients
    server.stop(0)
    master.close()
    for w in workers:
        w.stop(0)


def _graph():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [256], name="x")
        with kf.device("/job:worker/task:0"):
            a = x * 2.0
        with kf.device("/job:worker/task:1"):
            y = a + 1.0
            bad = kf.debugging.assert_positive(x, message="x must be positive")
    return g, x, y, bad


def _rpc(method, service=WORKER):
    return {"rpc.service": service, "rpc.method": method}


def test_rpc_bytes_and_durations_per_method(grpc_cluster):
    server, _, _ = grpc_cluster
    g, x, y, _ = _graph()
    xv = np.arange(256, dtype=np.float32)
    with MetricsRecorder() as rec:
        with kf.Session(server.target, graph=g) as s:
            for _ in range(3):
                np.testing.assert_array_equal(s.run(y, {x: xv}), xv * 2 + 1)
        assert rec.value("kernflow.session.steps", {"kernflow.session.kind": "remote"}) == 3
        assert rec.value("kernflow.session.step.duration", {"kernflow.session.kind": "remote"}) == 3
        methods = {p.attributes["rpc.method"] for p in rec.points("kernflow.rpc.client.sent")}
        assert {"CreateSession", "RegisterGraph"} <= methods
        # The 1 KiB feed goes to the master, and the tensor crosses from task 0 to task 1: both
        # ends count the same serialized bytes.
        for name in ("kernflow.rpc.client.sent", "kernflow.rpc.server.received"):
            assert rec.value(name, _rpc("CreateSession", MASTER)) > 0
        step_methods = methods & {"RunStep", "RunStepStream", "RunStepPull"}
        assert step_methods, methods
        sent = sum(rec.value("kernflow.rpc.client.sent", _rpc(m, MASTER)) for m in step_methods)
        assert sent >= 3 * 256 * 4
        assert sent == sum(rec.value("kernflow.rpc.server.received", _rpc(m, MASTER)) for m in step_methods)
        pushed = rec.value("kernflow.rpc.client.sent", _rpc("PushTensors"))
        assert pushed >= 3 * 256 * 4
        # (a push is one-way: the receiving task counts it on its own thread, maybe a moment later)
        assert rec.wait_value("kernflow.rpc.server.received", _rpc("PushTensors"), at_least=pushed) == pushed
        ok = {**_rpc("RegisterGraph"), "rpc.grpc.status_code": 0}
        assert rec.value("kernflow.rpc.client.duration", ok) >= 2     # one partition per task
        assert rec.wait_value("kernflow.rpc.server.duration", ok, at_least=2) >= 2


def test_failed_rpc_durations_carry_the_status_code(grpc_cluster):
    _, workers, _ = grpc_cluster
    from kernflow.client.protobuf import worker_pb2
    client = GrpcWorkerClient(workers[0].address, "w0")
    with MetricsRecorder() as rec:
        with pytest.raises(errors.AbortedError):   # (an unknown graph handle, as in TF)
            client.run_graph(worker_pb2.RunGraphRequest(graph_handle="nope", step_id=1))
        aborted = {**_rpc("RunGraph"), "rpc.grpc.status_code": 10}
        assert rec.value("kernflow.rpc.client.duration", aborted) == 1
        assert rec.wait_value("kernflow.rpc.server.duration", aborted) == 1


def test_get_status_reports_graph_runs_and_the_last_error(grpc_cluster):
    server, workers, clients = grpc_cluster
    g, x, y, bad = _graph()
    xv = np.ones(256, np.float32)
    before = [c.get_status() for c in clients.values()]
    with kf.Session(server.target, graph=g) as s:
        for _ in range(4):
            s.run(y, {x: xv})
        with pytest.raises(errors.InvalidArgumentError, match="x must be positive"):
            s.run(bad, {x: -xv})
    after = [c.get_status() for c in clients.values()]
    runs = [a.graph_runs - b.graph_runs for a, b in zip(after, before)]
    assert runs[0] >= 4 and runs[1] >= 5
    assert after[1].graph_runs_failed == before[1].graph_runs_failed + 1
    assert after[1].last_error.startswith("InvalidArgumentError")
    assert "x must be positive" in after[1].last_error
    assert after[1].last_error_time_ms >= after[1].start_time_ms > 0
    assert after[0].last_error == ""

"""GrpcWorkerClient against a fake worker servicer on 127.0.0.1: messages, errors, deadlines."""

import pathlib
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from kernflow.core.framework import errors
from kernflow.core.protobuf import graph_pb2
from kernflow.client import channels, codec, tensor_requests, worker_client
from kernflow.client.protobuf import worker_pb2
from kernflow.client.worker_client import GrpcWorkerClient

TASK = "/job:worker/replica:0/task:1"


def _client(srv, **kw):
    return GrpcWorkerClient(srv.address, TASK, **kw)


def _recv(key, step_id=0):
    return worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=key)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_management_calls(fake_worker):
    c = _client(fake_worker)
    st = c.get_status(worker_pb2.GetStatusRequest())
    assert (st.job, st.task) == ("worker", 1)
    assert st.device_attributes[0].incarnation == 7
    gd = graph_pb2.GraphDef()
    gd.node.add(name="a", op="NoOp")
    reg = c.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=gd))
    assert reg.graph_handle == "g1"
    c.deregister_graph(worker_pb2.DeregisterGraphRequest(session_handle="s", graph_handle="g1"))
    c.cleanup_graph(worker_pb2.CleanupGraphRequest(step_id=3))
    c.abort_step(worker_pb2.AbortStepRequest(step_id=3, code=errors.ABORTED, message="x"))
    c.cleanup_all(worker_pb2.CleanupAllRequest(container=["c1"]))
    assert fake_worker.servicer.calls == ["GetStatus", f"AbortStep 3 {errors.ABORTED}", "CleanupAll ['c1']"]


def test_run_graph_carries_tensors(fake_worker):
    c = _client(fake_worker)
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle="g1", step_id=1)
    req.send.add(name="x:0", tensor=codec.tensor_to_proto(np.arange(6, dtype=np.float32).reshape(2, 3)))
    req.send.add(name="s:0", tensor=codec.tensor_to_proto(np.array([b"a"], dtype=object)))
    resp = c.run_graph(req)
    np.testing.assert_array_equal(codec.proto_to_tensor(resp.recv[0].tensor),
                                  np.arange(6, dtype=np.float32).reshape(2, 3) * 2)
    assert codec.proto_to_tensor(resp.recv[1].tensor).tolist() == [b"a"]


@pytest.mark.parametrize("handle, cls, text", [
    ("missing", errors.NotFoundError, "graph handle 'missing' is not registered"),
    ("crash", errors.InternalError, "RuntimeError: boom"),
    ("bad", errors.InvalidArgumentError, "ValueError: malformed request"),
])
def test_errors_keep_their_class_and_name_the_worker(fake_worker, handle, cls, text):
    c = _client(fake_worker)
    with pytest.raises(cls) as info:
        c.run_graph(worker_pb2.RunGraphRequest(graph_handle=handle))
    msg = str(info.value)
    assert text in msg and TASK in msg and fake_worker.address in msg and "RunGraph" in msg
    # The server survived the bad request and keeps serving.
    assert c.get_status().task == 1


def test_register_empty_graph_is_invalid_argument(fake_worker):
    with pytest.raises(errors.InvalidArgumentError, match="no nodes"):
        _client(fake_worker).register_graph(worker_pb2.RegisterGraphRequest())


def test_recv_tensor_streams_large_tensor(fake_worker):
    value = np.random.default_rng(0).random((512, 300))  # ~1.2 MiB, many 64 KiB chunks
    fake_worker.servicer.tensors["k"] = value
    c = _client(fake_worker)
    out, dead = codec.assemble_recv_chunks(c.recv_tensor(_recv("k", step_id=1)))
    assert not dead
    np.testing.assert_array_equal(out, value)
    fake_worker.servicer.tensors["s"] = np.array([b"x", b"yy"], dtype=object)
    out, _ = codec.assemble_recv_chunks(c.recv_tensor(worker_pb2.RecvTensorRequest(rendezvous_key="s")))
    assert out.tolist() == [b"x", b"yy"]


def test_recv_tensor_errors(fake_worker):
    c = _client(fake_worker)
    with pytest.raises(errors.NotFoundError, match="no tensor for key 'nope'") as info:
        codec.assemble_recv_chunks(c.recv_tensor(_recv("nope", step_id=2)))
    assert "RecvTensor('nope', step 2)" in str(info.value) and TASK in str(info.value)
    with pytest.raises(errors.AbortedError, match="aborted by the master"):
        codec.assemble_recv_chunks(c.recv_tensor(worker_pb2.RecvTensorRequest(rendezvous_key="fail_midway")))
    with pytest.raises(errors.DataLossError, match="ended after 100 of 4000 bytes"):
        codec.assemble_recv_chunks(c.recv_tensor(worker_pb2.RecvTensorRequest(rendezvous_key="truncate")))


def test_recv_tensor_deadline(fake_worker):
    c = _client(fake_worker)
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="did not answer before its deadline"):
        codec.assemble_recv_chunks(c.recv_tensor(_recv("block"), timeout=0.3))
    assert time.monotonic() - t0 < 3


def test_run_graph_deadline_from_argument_and_request(fake_worker):
    c = _client(fake_worker)
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError) as info:
        c.run_graph(worker_pb2.RunGraphRequest(graph_handle="block"), timeout=0.3)
    assert time.monotonic() - t0 < 3
    assert TASK in str(info.value)
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError):
        c.run_graph(worker_pb2.RunGraphRequest(graph_handle="block", timeout_in_ms=100))
    elapsed = time.monotonic() - t0
    assert worker_client.RUN_GRACE_S * 0.9 < elapsed < worker_client.RUN_GRACE_S + 3


def test_killed_server_is_unavailable(fake_worker):
    c = _client(fake_worker)
    assert c.get_status().task == 1
    fake_worker.stop()
    t0 = time.monotonic()
    with pytest.raises(errors.UnavailableError) as info:
        c.get_status()
    assert time.monotonic() - t0 < 6
    assert TASK in str(info.value) and fake_worker.address in str(info.value)


def test_server_killed_during_a_call_is_unavailable(fake_worker):
    c = _client(fake_worker)
    # The server dies; the client's channel stays open, as when a worker process is killed (the
    # fixture's stop() also evicts the channel: closing it under the call would make it CANCELLED).
    threading.Timer(0.3, lambda: fake_worker.server.stop(0)).start()
    with pytest.raises(errors.UnavailableError):
        c.run_graph(worker_pb2.RunGraphRequest(graph_handle="block"), timeout=20)


_SERVER_SCRIPT = """
import sys, time
sys.path.insert(0, sys.argv[1])
import conftest
from kernflow.client.protobuf import worker_pb2_grpc
srv = conftest.RunningServer(worker_pb2_grpc.add_WorkerServiceServicer_to_server, conftest.FakeWorker())
print(srv.port, flush=True)
time.sleep(120)
"""


def test_sigkilled_worker_process_is_unavailable_even_mid_call():
    proc = subprocess.Popen([sys.executable, "-c", _SERVER_SCRIPT, str(pathlib.Path(__file__).parent)],
                            stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        c = GrpcWorkerClient(f"127.0.0.1:{port}", TASK)
        assert c.get_status().task == 1
        threading.Timer(0.3, proc.kill).start()
        t0 = time.monotonic()
        with pytest.raises(errors.UnavailableError, match=TASK):
            c.run_graph(worker_pb2.RunGraphRequest(graph_handle="block"), timeout=30)
        assert time.monotonic() - t0 < 10
        with pytest.raises(errors.UnavailableError):
            c.get_status()
    finally:
        proc.kill()
        proc.wait(10)


def test_nothing_listening_is_unavailable():
    c = GrpcWorkerClient(f"127.0.0.1:{_free_port()}", "/job:worker/replica:0/task:9")
    with pytest.raises(errors.UnavailableError, match="task:9"):
        c.cleanup_all()


def test_channels_are_shared_and_bounded_by_the_message_limit(fake_worker):
    from kernflow.client import limits
    a = GrpcWorkerClient(fake_worker.address, "a")
    b = GrpcWorkerClient(fake_worker.address, "b")
    assert channels.get_channel(fake_worker.address) is channels.get_channel(fake_worker.address)
    opts = dict(channels.CHANNEL_OPTIONS)
    assert opts["grpc.max_send_message_length"] == opts["grpc.max_receive_message_length"] == \
        limits.max_message_bytes() == limits.HARD_MAX_BYTES
    assert opts["grpc.enable_retries"] == 0
    # 80 MiB in one RunGraph request and response: beyond gRPC's 4 MiB default limit.
    big = np.ones(10 << 20, dtype=np.float64)
    req = worker_pb2.RunGraphRequest(graph_handle="g")
    req.send.add(name="x:0", tensor=codec.tensor_to_proto(big))
    (out,) = tensor_requests.decode(a.run_graph(req, timeout=60), "recv")   # (its bytes as received)
    assert out.shape == big.shape and out[0] == 2.0
    assert b.get_status().task == 1
    old = channels.get_channel(fake_worker.address)
    channels.evict(fake_worker.address)
    assert b.get_status().task == 1  # existing clients move to a new channel
    assert channels.get_channel(fake_worker.address) is not old
    channels.close_all()
    assert a.get_status().task == 1


def test_default_deadline_applies_to_management_calls(fake_worker, monkeypatch):
    c = _client(fake_worker, default_timeout_s=0.2)
    assert c.default_timeout_s == 0.2
    seen = {}
    stub = c._stub

    class Spy:
        def __getattr__(self, name):
            def call(request, timeout=None, metadata=None):
                seen[name] = timeout
                return getattr(stub, name)(request, timeout=timeout, metadata=metadata)
            return call

    monkeypatch.setattr(GrpcWorkerClient, "_stub", Spy())
    c.cleanup_graph(worker_pb2.CleanupGraphRequest())
    c.get_status()
    c.run_graph(worker_pb2.RunGraphRequest(graph_handle="g"))
    assert seen["RunGraph"] is None  # a step without a timeout has no deadline
    c.run_graph(worker_pb2.RunGraphRequest(graph_handle="g", timeout_in_ms=2000))
    assert seen["CleanupGraph"] == 0.2
    assert seen["GetStatus"] == worker_client.GET_STATUS_TIMEOUT_S
    assert seen["RunGraph"] == 2.0 + worker_client.RUN_GRACE_S
    c.abort_step(worker_pb2.AbortStepRequest(), timeout=1.5)
    assert seen["AbortStep"] == 1.5

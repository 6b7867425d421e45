"""The same-host channel (`kernflow.client.local_channel`): a worker's methods over a Unix socket.

A fake worker is served over gRPC and, like a real one (`kernflow.worker.servicer.serve_locally`),
on a `LocalChannelServer` that its GetStatus offers. Every call must give what gRPC gives (values,
error classes and messages), deadlines and cancellation must reach the handler, a dead server must
fail calls at once, and only this user's processes on this host may use it.
"""

import os
import pathlib
import shutil
import socket
import stat
import struct
import tempfile
import threading
import time

import numpy as np
import pytest

from kernflow.client import channels, codec, local_channel, local_server
from kernflow.client.protobuf import worker_pb2, worker_pb2_grpc
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.core.runtime import transport

from packages.client.tests.conftest import FakeWorker, RunningServer

TASK = "/job:worker/replica:0/task:1"
_SERVICE = worker_pb2.DESCRIPTOR.services_by_name["WorkerService"]


class OfferingWorker(FakeWorker):
    """A fake worker whose GetStatus offers its same-host channel, and that records how it was called."""

    def __init__(self, host_id=None):
        super().__init__()
        self.offer = None
        self.host_id = host_id
        self.channels_used: list[str] = []   # "local" or "grpc", per RunGraph / RecvTensor call
        self.cancelled = threading.Event()
        self.metadata = None

    def GetStatus(self, request, context):
        resp = super().GetStatus(request, context)
        resp.host_id = self.host_id or transport.host_id()
        if self.offer is not None:
            resp.local_channel.CopyFrom(self.offer)
        return resp

    def _note(self, context):
        self.channels_used.append("local" if isinstance(context, local_server._Context) else "grpc")
        self.metadata = dict(context.invocation_metadata() or ())
        context.add_callback(self.cancelled.set)

    def RunGraph(self, request, context):
        self._note(context)
        return super().RunGraph(request, context)

    def RecvTensor(self, request, context):
        self._note(context)
        yield from super().RecvTensor(request, context)

    def PushTensors(self, request, context):
        # Step 99 stands for a pushed value whose segment runs long on the reader thread.
        self.calls.append(f"PushTensors {request.step_id}")
        if request.step_id == 99:
            self.release.wait(10)
        return worker_pb2.PushTensorsResponse()


@pytest.fixture
def runtime_dir():
    """A private XDG_RUNTIME_DIR short enough for socket paths (108 bytes on Linux; pytest's tmp_path
    under xdist is longer)."""
    d = tempfile.mkdtemp(prefix="kf-", dir="/tmp")
    yield pathlib.Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def served():
    """(gRPC server, LocalChannelServer) of an `OfferingWorker`; the process's channels forgotten after."""
    made = []

    def start(host_id=None):
        w = OfferingWorker(host_id)
        srv = RunningServer(worker_pb2_grpc.add_WorkerServiceServicer_to_server, w)
        local = local_server.LocalChannelServer(local_server.servicer_handlers(w, _SERVICE, worker_pb2), "test")
        w.offer = local.offer
        made.append((srv, local))
        return srv, local

    yield start
    local_channel.forget()
    for srv, local in made:
        local.stop()
        srv.stop()


def _run(handle="g1", step_id=1):
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handle, step_id=step_id)
    req.send.add(name="x:0", tensor=codec.tensor_to_proto(np.arange(6, dtype=np.float32).reshape(2, 3)))
    return req


def _failure(fn):
    with pytest.raises(errors.OpError) as e:
        fn()
    return type(e.value), str(e.value)


def test_calls_go_over_the_socket_and_give_what_grpc_gives(served, monkeypatch):
    srv, _ = served()
    c = GrpcWorkerClient(srv.address, TASK)
    srv.servicer.tensors["k"] = np.arange(300_000, dtype=np.float64)   # several chunks

    def everything():
        out = [codec.proto_to_tensor(c.run_graph(_run()).recv[0].tensor)]
        out.append(codec.assemble_recv_chunks(codec.split_content(b, worker_pb2.RecvTensorResponse)
                                              for b in c.recv_tensor_raw(worker_pb2.RecvTensorRequest(
                                                  step_id=1, rendezvous_key="k")))[0])
        out += [_failure(lambda h=h: c.run_graph(_run(h))) for h in ("missing", "crash", "bad")]
        out.append(_failure(lambda: list(c.recv_tensor_raw(worker_pb2.RecvTensorRequest(
            step_id=1, rendezvous_key="fail_midway")))))
        out.append(_failure(lambda: list(c.recv_tensor_raw(worker_pb2.RecvTensorRequest(
            step_id=1, rendezvous_key="nope")))))
        return out

    over_local = everything()
    assert isinstance(local_channel.channel_for(srv.address), local_channel.LocalChannel)
    assert set(srv.servicer.channels_used) == {"local"}
    monkeypatch.setenv(local_channel.LOCAL_CHANNEL_ENV, "0")
    srv.servicer.channels_used.clear()
    over_grpc = everything()
    assert set(srv.servicer.channels_used) == {"grpc"}
    np.testing.assert_array_equal(over_local[0], np.arange(6).reshape(2, 3) * 2)
    np.testing.assert_array_equal(over_local[1], srv.servicer.tensors["k"])
    np.testing.assert_array_equal(over_grpc[0], over_local[0])
    np.testing.assert_array_equal(over_grpc[1], over_local[1])
    assert over_local[2:] == over_grpc[2:]   # same error classes, same messages
    assert [cls for cls, _ in over_local[2:]] == [errors.NotFoundError, errors.InternalError,
                                                  errors.InvalidArgumentError, errors.AbortedError,
                                                  errors.NotFoundError]
    assert "graph handle 'missing' is not registered" in over_local[2][1] and TASK in over_local[2][1]


def test_management_calls_use_an_open_channel_and_open_none_themselves(served):
    srv, _ = served()
    c = GrpcWorkerClient(srv.address, TASK)
    c.abort_step(worker_pb2.AbortStepRequest(step_id=3, code=errors.ABORTED, message="x"))
    assert local_channel.channel_for(srv.address) is None      # nothing negotiated for it
    assert srv.servicer.calls == [f"AbortStep 3 {errors.ABORTED}"]
    c.get_status()                                              # its answer opens the channel
    assert isinstance(local_channel.channel_for(srv.address), local_channel.LocalChannel)
    c.cleanup_all(worker_pb2.CleanupAllRequest(container=["c1"]))
    assert srv.servicer.calls == [f"AbortStep 3 {errors.ABORTED}", "GetStatus", "CleanupAll ['c1']"]


def test_a_deadline_ends_the_call_and_cancels_the_handler(served):
    srv, _ = served()
    c = GrpcWorkerClient(srv.address, TASK)
    c.get_status()
    t = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="did not answer before its deadline"):
        c.run_graph(_run("block"), timeout=0.3)
    assert 0.25 < time.monotonic() - t < 2.0
    assert srv.servicer.cancelled.wait(5)         # the handler's callback ran (the caller left)
    srv.servicer.release.set()
    np.testing.assert_array_equal(codec.proto_to_tensor(c.run_graph(_run()).recv[0].tensor)[0], [0, 2, 4])


def test_cancelling_a_stream_cancels_the_handler(served):
    srv, _ = served()
    c = GrpcWorkerClient(srv.address, TASK)
    c.get_status()
    call = c.recv_tensor_raw(worker_pb2.RecvTensorRequest(step_id=1, rendezvous_key="block"))
    threading.Timer(0.2, call.cancel).start()
    t = time.monotonic()
    with pytest.raises(errors.CancelledError):
        next(call)
    assert time.monotonic() - t < 2.0
    assert srv.servicer.cancelled.wait(5)
    srv.servicer.release.set()


def test_control_methods_are_served_while_every_pool_thread_waits(served, monkeypatch):
    monkeypatch.setattr(local_server, "POOL_THREADS", 2)
    srv, _ = served()
    c = GrpcWorkerClient(srv.address, TASK)
    c.get_status()
    blocked = [threading.Thread(target=lambda: c.run_graph(_run("block"), timeout=5))
               for _ in range(4)]
    for t in blocked:
        t.start()
    try:
        time.sleep(0.2)
        t0 = time.monotonic()
        assert c.get_status(timeout=2).job == "worker"
        c.abort_step(worker_pb2.AbortStepRequest(step_id=9, code=errors.ABORTED, message="x"), timeout=2)
        assert time.monotonic() - t0 < 1.0
    finally:
        srv.servicer.release.set()
        for t in blocked:
            t.join(10)


def test_a_server_that_goes_away_fails_calls_at_once_and_grpc_takes_over(served):
    srv, local = served()
    c = GrpcWorkerClient(srv.address, TASK)
    c.get_status()
    chan = local_channel.channel_for(srv.address)
    assert chan is not None
    threading.Timer(0.3, local.stop).start()
    t = time.monotonic()
    with pytest.raises(errors.UnavailableError, match="same-host channel"):
        c.run_graph(_run("block"), timeout=20)
    assert time.monotonic() - t < 3.0
    assert not chan.alive and not os.path.exists(local.path)
    srv.servicer.release.set()
    srv.servicer.channels_used.clear()
    c.run_graph(_run())                       # negotiated again: the offer is dead, so gRPC
    assert srv.servicer.channels_used == ["grpc"]


def test_another_host_id_is_never_called_over_the_socket(served):
    srv, _ = served(host_id="some-other-host")
    c = GrpcWorkerClient(srv.address, TASK)
    c.run_graph(_run())
    c.get_status()
    c.run_graph(_run())
    assert srv.servicer.channels_used == ["grpc", "grpc"]
    assert local_channel.channel_for(srv.address) is None


def test_trace_headers_travel_in_the_call(served, monkeypatch):
    srv, _ = served()
    c = GrpcWorkerClient(srv.address, TASK)
    c.get_status()
    header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    monkeypatch.setattr(channels, "outgoing_metadata", lambda: (("traceparent", header),))
    c.run_graph(_run())
    assert srv.servicer.channels_used == ["local"] and srv.servicer.metadata["traceparent"] == header


def _raw_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    return s


def _frame(header: worker_pb2.LocalFrame, body=b""):
    h = header.SerializeToString()
    return struct.pack("<II", len(h), len(body)) + h + body


def test_a_wrong_token_or_garbage_is_refused_and_the_server_keeps_serving(served):
    srv, local = served()
    for junk in (_frame(worker_pb2.LocalFrame(kind=worker_pb2.LocalFrame.HELLO), b"wrong token....."),
                 _frame(worker_pb2.LocalFrame(kind=worker_pb2.LocalFrame.REQUEST, method="RunGraph"),
                        _run().SerializeToString()),
                 struct.pack("<II", 1 << 30, 0) + b"x" * 16,
                 b"\x00" * 3):
        s = _raw_connect(local.path)
        s.sendall(junk)
        if len(junk) == 3:
            s.shutdown(socket.SHUT_WR)
        assert s.recv(100) == b""           # closed without an answer
        s.close()
    assert srv.servicer.channels_used == []
    c = GrpcWorkerClient(srv.address, TASK)
    c.run_graph(_run())
    assert srv.servicer.channels_used == ["local"]


def test_malformed_requests_and_unknown_methods_get_errors(served):
    srv, _ = served()
    GrpcWorkerClient(srv.address, TASK).get_status()
    chan = local_channel.channel_for(srv.address)
    with pytest.raises(errors.InvalidArgumentError, match="malformed request"):
        chan.unary("RunGraph", b"\xff\xff\xff", 5, "RunGraph")
    with pytest.raises(errors.UnimplementedError, match="NoSuchMethod"):
        chan.unary("NoSuchMethod", b"", 5, "NoSuchMethod")
    assert chan.alive


def test_the_socket_directory_must_be_private(runtime_dir, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
    d = runtime_dir / "kernflow"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    with pytest.raises(OSError, match="0700"):
        local_server.LocalChannelServer({}, "test")
    os.chmod(d, 0o700)
    srv = local_server.LocalChannelServer({}, "test")
    try:
        assert os.path.dirname(srv.path) == str(d)
        assert stat.S_IMODE(os.stat(srv.path).st_mode) == 0o600
    finally:
        srv.stop()
    assert not os.path.exists(srv.path)


def test_sockets_of_killed_servers_are_removed(runtime_dir, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime_dir))
    d = local_channel.socket_dir()
    stale = os.path.join(d, "deadbeef.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(stale)
    s.close()                       # bound, never listened: what a killed server leaves
    srv = local_server.LocalChannelServer({}, "test")
    try:
        assert not os.path.exists(stale) and os.path.exists(srv.path)
    finally:
        srv.stop()


def test_turned_off_by_the_environment(served, monkeypatch):
    srv, _ = served()
    c = GrpcWorkerClient(srv.address, TASK)
    for env, value in ((local_channel.LOCAL_CHANNEL_ENV, "0"), (transport.TRANSPORT_ENV, "grpc,shm")):
        monkeypatch.setenv(env, value)
        c.run_graph(_run())
        monkeypatch.delenv(env)
    assert srv.servicer.channels_used == ["grpc", "grpc"]
    monkeypatch.setenv(transport.TRANSPORT_ENV, "grpc,local")
    c.run_graph(_run())
    assert srv.servicer.channels_used[-1] == "local"


def test_run_graph_async_answers_on_the_reader_thread_like_run_graph(served, monkeypatch):
    """The master's threadless RunGraph: the same response and error classes as `run_graph`, a
    broken channel fails it at once, and None (call run_graph) where there is no channel."""
    srv, local = served()
    c = GrpcWorkerClient(srv.address, TASK)

    def call_async(handle):
        got, done = [], threading.Event()
        cancel = c.run_graph_async(_run(handle), 20, lambda resp, err: (
            got.append((resp, err, threading.current_thread().name)), done.set()))
        assert cancel is not None and done.wait(10)
        assert len(got) == 1 and got[0][2] == "kernflow-local-reader", got   # no thread waited
        return got[0][:2]

    resp, err = call_async("g1")
    assert err is None
    np.testing.assert_array_equal(codec.proto_to_tensor(resp.recv[0].tensor),
                                  codec.proto_to_tensor(c.run_graph(_run()).recv[0].tensor))
    for handle in ("missing", "crash", "bad"):
        _, err = call_async(handle)
        assert (type(err), str(err)) == _failure(lambda h=handle: c.run_graph(_run(h)))
    assert set(srv.servicer.channels_used) == {"local"}

    got, done = [], threading.Event()
    c.run_graph_async(_run("block"), 20, lambda resp, err: (got.append(err), done.set()))
    threading.Timer(0.3, local.stop).start()
    assert done.wait(5) and isinstance(got[0], errors.UnavailableError), got
    srv.servicer.release.set()
    monkeypatch.setenv(local_channel.LOCAL_CHANNEL_ENV, "0")
    assert c.run_graph_async(_run(), 20, lambda resp, err: None) is None


# ---------------------------------------------------------------------------- reader threads never wait to send
def _full_pair():
    """A connected Unix socket pair with small buffers, and a reader thread's view of `a`."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8192)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
    return a, b


def _on_reader(fn):
    """Runs fn() on a thread marked as a server connection's reader; returns (result, seconds)."""
    out = {}

    def run():
        local_channel.mark_reader_thread()
        t = time.monotonic()
        out["result"] = fn()
        out["s"] = time.monotonic() - t
    th = threading.Thread(target=run)
    th.start()
    th.join(10)
    assert not th.is_alive(), "the reader thread blocked on a send"
    return out.get("result"), out["s"]


def test_a_reader_thread_sending_to_a_full_socket_goes_back_to_reading_and_frames_stay_in_order():
    """Served inline, PushTensors runs the step's next segment on the connection's reader, and
    that segment's pushes must not make it wait for the peer: two readers each blocked sending to
    the other would never read again. What the socket does not take goes from a drainer thread,
    which holds the send lock until the frame is out, so a later frame cannot overtake it."""
    a, b = _full_pair()
    lock = threading.Lock()
    big = os.urandom(4 << 20)
    try:
        _, took = _on_reader(lambda: local_channel._send_frame(a, lock, b"first", big))
        assert took < 2.0
        assert lock.locked()   # the drainer still sends the rest of the first frame
        second = threading.Thread(target=local_channel._send_frame, args=(a, lock, b"second", b"tail"))
        second.start()        # (not a reader: waits for the lock, then for the peer)
        rfile = b.makefile("rb")
        got = [_raw_frame(rfile) for _ in range(2)]
        second.join(10)
        assert [h for h, _ in got] == [b"first", b"second"]
        assert got[0][1] == big and got[1][1] == b"tail"
        deadline = time.monotonic() + 5
        while lock.locked() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not lock.locked()
        # A frame that fits goes at once, on the reader thread itself.
        _, took = _on_reader(lambda: local_channel._send_frame(a, lock, b"small", b"x" * 100))
        assert not lock.locked() and _raw_frame(rfile) == (b"small", b"x" * 100)
    finally:
        a.close()
        b.close()


def test_a_drained_frame_whose_peer_went_away_shuts_the_connection_and_frees_the_lock():
    a, b = _full_pair()
    lock = threading.Lock()
    try:
        _on_reader(lambda: local_channel._send_frame(a, lock, b"h", os.urandom(4 << 20)))
        b.close()   # the peer is gone before it read the frame
        deadline = time.monotonic() + 5
        while lock.locked() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not lock.locked()
        with pytest.raises(OSError):
            local_channel._send_frame(a, lock, b"h", b"after")
    finally:
        a.close()


def _raw_frame(rfile):
    """(header bytes, body) of the next frame, without parsing the header as a LocalFrame."""
    hlen, blen = struct.unpack("<II", rfile.read(8))
    return rfile.read(hlen), rfile.read(blen)


def test_a_push_whose_segment_runs_long_does_not_hold_up_control_calls(served):
    """PushTensors runs on the connection's reader thread (the step's next segment runs there); one
    that runs long hands the connection to a new reader, so a health check's GetStatus or an
    AbortStep on the same connection is still answered at once (the master declares a task dead
    when GetStatus takes 10 s)."""
    srv, _ = served()
    c = GrpcWorkerClient(srv.address, TASK)
    c.get_status()   # opens the channel
    chan = local_channel.channel_for(srv.address)
    assert isinstance(chan, local_channel.LocalChannel)
    try:
        c.push_tensors(worker_pb2.PushTensorsRequest(step_id=99), on_error=print)   # one-way
        deadline = time.monotonic() + 5
        while "PushTensors 99" not in srv.servicer.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(3):
            t = time.monotonic()
            c.get_status(timeout=5)
            assert time.monotonic() - t < 1.0
        c.push_tensors(worker_pb2.PushTensorsRequest(step_id=100), on_error=print)   # the new reader
        deadline = time.monotonic() + 5
        while "PushTensors 100" not in srv.servicer.calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "PushTensors 100" in srv.servicer.calls
    finally:
        srv.servicer.release.set()
    # The old reader ends after its push; the connection keeps working with one reader.
    t = time.monotonic()
    c.get_status(timeout=5)
    assert time.monotonic() - t < 1.0 and local_channel.channel_for(srv.address) is chan

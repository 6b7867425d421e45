"""RunStepPull on the client (`fetch_stream.pull_step`) against a scripted master and a fake worker."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from kernflow.client import codec, fetch_stream
from kernflow.client.master_client import GrpcMasterClient
from kernflow.client.protobuf import master_pb2, master_pb2_grpc
from kernflow.client.rpc_errors import rpc_method
from kernflow.core.framework import errors

S = master_pb2.RunStepStreamResponse
TASK1 = "/job:worker/replica:0/task:1"
KEY = TASK1 + "/device:CPU:0;7;/job:client/replica:0/task:0/device:CPU:0;v:0;0:0"   # the fake's incarnation


class ScriptedMaster(master_pb2_grpc.MasterServiceServicer):
    """RunStepPull answers with `self.script(request, requests)`; the client's later messages are kept."""

    def __init__(self):
        self.script = None
        self.after = []            # the client's messages after the step
        self.closed = threading.Event()

    @rpc_method
    def RunStepPull(self, request_iterator, context):
        first = next(request_iterator)
        yield from self.script(first.step, request_iterator, self)


def _chunks(value, i):
    for m in codec.iter_recv_chunks(value, chunk_bytes=1 << 12):
        msg = S.FromString(m.SerializeToString())
        msg.fetch_index = i
        yield msg


def _finish(requests, master, relayed):
    for msg in requests:
        master.after.append(msg)
        if msg.WhichOneof("kind") == "relay":
            yield from _chunks(relayed[msg.relay], msg.relay)
    master.closed.set()


@pytest.fixture
def scripted(start_server, fake_worker):
    fetch_stream.forget_reachability()
    srv = start_server(master_pb2_grpc.add_MasterServiceServicer_to_server, ScriptedMaster())
    yield srv, fake_worker, GrpcMasterClient(srv.address)
    fetch_stream.forget_reachability()


def _located(i, address, key=KEY):
    return S(fetch_index=i, location=master_pb2.FetchLocation(task=TASK1, address=address, step_id=3,
                                                              rendezvous_key=key))


def test_located_fetches_are_pulled_from_the_worker_and_others_streamed(scripted):
    srv, worker, master = scripted
    big = np.arange(100_000, dtype=np.float32)
    worker.servicer.tensors[KEY] = big
    small = np.array([1.5, 2.5])

    def script(step, requests, m):
        yield _located(0, worker.address)
        yield from _chunks(small, 1)
        yield S(done=True)
        yield from _finish(requests, m, {})
    srv.servicer.script = script
    (a, b), meta = fetch_stream.pull_step(master, master_pb2.RunStepRequest(fetch=["v:0", "w:0"]),
                                          ["v:0", "w:0"], srv.address)
    np.testing.assert_array_equal(a, big)
    np.testing.assert_array_equal(b, small)
    assert a.flags.writeable and meta is None
    assert srv.servicer.closed.wait(5) and srv.servicer.after == []   # closed, nothing relayed
    assert worker.servicer.calls.count("GetStatus") == 1


def test_an_unverifiable_worker_is_relayed(scripted):
    srv, worker, master = scripted
    value = np.arange(5000, dtype=np.int64)
    stale = KEY.replace(";7;", ";8;")      # another incarnation than the worker at the address has

    def script(step, requests, m):
        yield _located(0, worker.address, stale)
        yield _located(1, worker.address, stale)
        yield S(done=True)
        yield from _finish(requests, m, {0: value, 1: value * 2})
    srv.servicer.script = script
    (a, b), _ = fetch_stream.pull_step(master, master_pb2.RunStepRequest(), ["a:0", "b:0"], srv.address)
    np.testing.assert_array_equal(a, value)
    np.testing.assert_array_equal(b, value * 2)
    assert [m.relay for m in srv.servicer.after] == [0, 1]


def test_the_masters_error_wins_over_a_waiting_pull(scripted):
    srv, worker, master = scripted

    def script(step, requests, m):
        yield _located(0, worker.address, KEY.replace("v:0", "block"))
        time.sleep(0.2)
        raise errors.AbortedError(None, None, "task 1 died (test)")
    srv.servicer.script = script
    t = time.monotonic()
    with pytest.raises(errors.AbortedError, match="task 1 died"):
        fetch_stream.pull_step(master, master_pb2.RunStepRequest(), ["v:0"], srv.address)
    assert time.monotonic() - t < 5.0    # the pull (blocked on the worker for 10 s) was cancelled


def test_a_failed_pull_of_a_finished_step_is_raised_and_the_call_ends(scripted):
    srv, worker, master = scripted

    def script(step, requests, m):
        yield _located(0, worker.address, KEY.replace("v:0", "gone"))
        yield S(done=True)
        yield from _finish(requests, m, {})
    srv.servicer.script = script
    with pytest.raises(errors.NotFoundError, match="no tensor for key"):
        fetch_stream.pull_step(master, master_pb2.RunStepRequest(), ["v:0"], srv.address)


def test_a_dead_pulled_fetch_says_so(scripted):
    srv, worker, master = scripted
    worker.servicer.tensors[KEY] = None      # is_dead

    def script(step, requests, m):
        yield _located(0, worker.address)
        yield S(done=True)
        yield from _finish(requests, m, {})
    srv.servicer.script = script
    with pytest.raises(errors.InvalidArgumentError, match="was not computed"):
        fetch_stream.pull_step(master, master_pb2.RunStepRequest(), ["v:0"], srv.address)


@pytest.mark.parametrize("script_kind", ["missing_done", "wrong_relay"])
def test_what_the_master_sends_is_checked(scripted, script_kind):
    srv, worker, master = scripted
    value = np.arange(10, dtype=np.float32)

    def script(step, requests, m):
        yield _located(0, worker.address, KEY.replace(";7;", ";9;"))
        if script_kind == "missing_done":
            return
        yield S(done=True)
        for msg in requests:
            yield from _chunks(value, 5)      # not what was asked for
    srv.servicer.script = script
    with pytest.raises((errors.DataLossError, errors.InternalError)):
        fetch_stream.pull_step(master, master_pb2.RunStepRequest(), ["v:0"], srv.address)


"""A step whose client goes away is stopped on the server (issue 18, point 1).

Before: a client blocked in a dequeue that was killed, or whose RunStep call was cancelled, left its
step running on the master and the worker; the step took the next element enqueued (5 of 5 lost).
Now the master aborts such a step on every task when the caller's call ends, so the queue keeps
every element for the clients still there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.testing.processes import ChildProcess

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

pytestmark = pytest.mark.slow

SERVER = r"""
import kernflow.core as kf
server = kf.train.Server.create_local_server()
print("ready", server.target, flush=True)
server.join()
"""

DEQUEUER = r"""
import sys
import kernflow.core as kf
sys.path.insert(0, sys.argv[2])
from test_step_cancellation import queue_graph
g, q, enq, deq, x = queue_graph()
with kf.Session(sys.argv[1], graph=g) as sess:
    print("dequeuing", flush=True)
    print("got", sess.run(deq), flush=True)
"""


def queue_graph():
    """The shared queue on the server's task, and ops to enqueue a value and dequeue one."""
    g = kf.Graph()
    with g.as_default():
        q = kf.FIFOQueue(10, [kf.int32], shapes=[[]], shared_name="cancel_q", name="cancel_q")
        x = kf.placeholder(kf.int32, [], name="x")
        enq = q.enqueue([x])
        deq = q.dequeue()
    return g, q, enq, deq, x


@pytest.fixture
def server():
    kid = ChildProcess("server", [sys.executable, "-c", SERVER], env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        target = kid.expect("ready", 60.0).split()[1]
        yield target
    finally:
        kid.kill()


def _waiting_dequeues_leave_every_element(target):
    g, q, enq, deq, x = queue_graph()
    with kf.Session(target, graph=g) as sess:
        for i in range(5):
            sess.run(enq, {x: i})
        opts = kf.RunOptions(timeout_in_ms=10_000)
        got = [int(sess.run(deq, options=opts)) for _ in range(5)]
    assert got == [0, 1, 2, 3, 4]


def test_a_killed_client_blocked_in_a_dequeue_takes_no_element(server):
    kid = subprocess.Popen([sys.executable, "-c", DEQUEUER, server, os.path.dirname(__file__)],
                           stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert kid.stdout.readline().strip() == "dequeuing"
        time.sleep(1.0)                  # its RunStep is now blocked in the dequeue on the server
        kid.send_signal(signal.SIGKILL)
        kid.wait(10)
    finally:
        if kid.poll() is None:
            kid.kill()
    time.sleep(0.5)                      # (the server notices the closed connection)
    _waiting_dequeues_leave_every_element(server)


def test_a_cancelled_run_step_takes_no_element(server):
    from kernflow.client import codec
    from kernflow.client.master_client import GrpcMasterClient
    from kernflow.client.protobuf import master_pb2
    g, q, enq, deq, x = queue_graph()
    master = GrpcMasterClient(server.split("://", 1)[1])
    handle = master.create_session(master_pb2.CreateSessionRequest(graph_def=g.as_graph_def())).session_handle
    try:
        t = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            master.run_step(master_pb2.RunStepRequest(session_handle=handle, fetch=[deq.name]), timeout=1.0)
        assert time.monotonic() - t < 5.0
        time.sleep(0.5)
        _waiting_dequeues_leave_every_element(server)
        # The session itself still works after its cancelled step.
        req = master_pb2.RunStepRequest(session_handle=handle, target=[enq.name])
        req.feed.add(name=x.name, tensor=codec.tensor_to_proto(np.int32(7)))
        master.run_step(req, timeout=10)
        out = master.run_step(master_pb2.RunStepRequest(session_handle=handle, fetch=[deq.name]), timeout=10)
        assert int(codec.proto_to_tensor(out.tensor[0].tensor)) == 7
    finally:
        master.close_session(master_pb2.CloseSessionRequest(session_handle=handle))


def test_200_blocked_steps_leave_the_master_answering_and_it_recovers_when_they_are_cancelled(server):
    """The issue's check: with 200 steps blocked in a dequeue on a default server (128 threads),
    ListDevices is answered within 1 s; the steps beyond the server's call budget are refused at
    once (ResourceExhaustedError); once the clients' calls end (their deadline), their steps are
    aborted and the server serves steps again, with no element lost."""
    import threading
    from kernflow.client.master_client import GrpcMasterClient
    from kernflow.client.protobuf import master_pb2
    g, q, enq, deq, x = queue_graph()
    master = GrpcMasterClient(server.split("://", 1)[1])
    handle = master.create_session(master_pb2.CreateSessionRequest(graph_def=g.as_graph_def())).session_handle
    outcomes = []
    lock = threading.Lock()

    def blocked_dequeue():
        try:
            master.run_step(master_pb2.RunStepRequest(session_handle=handle, fetch=[deq.name]), timeout=6.0)
            got = "value"
        except errors.OpError as e:
            got = type(e)
        with lock:
            outcomes.append(got)

    threads = [threading.Thread(target=blocked_dequeue) for _ in range(200)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    t0 = time.monotonic()
    assert master.list_devices(timeout=5).local_device
    assert time.monotonic() - t0 < 1.0
    for t in threads:
        t.join(30)
    assert len(outcomes) == 200 and "value" not in outcomes
    refused = outcomes.count(errors.ResourceExhaustedError)
    assert 0 < refused < 200 and refused + outcomes.count(errors.DeadlineExceededError) == 200, outcomes
    time.sleep(0.5)
    _waiting_dequeues_leave_every_element(server)     # recovered: no blocked step took an element
    master.close_session(master_pb2.CloseSessionRequest(session_handle=handle))

"""Blocked steps cannot take every server thread (issue 18, point 2).

A master server of 8 threads keeps 4 for the calls that must always be answered: with more steps
blocked in a dequeue than the rest, the surplus fails at once with ResourceExhaustedError (so does
any other step until a slot frees: the bound the issue allows), and ListDevices, CreateSession and
CloseSession are still served; closing the session ends its blocked steps and frees their slots.
"""

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import channels, codec
from kernflow.client.master_client import GrpcMasterClient
from kernflow.client.protobuf import master_pb2
from kernflow.core.framework import errors
from kernflow.master.master import Master
from kernflow.master.server import MasterServer
from kernflow.worker.servicer import WorkerServicer, add_to_server
from kernflow.worker.worker import Worker

TASK = "/job:worker/replica:0/task:0"


@pytest.fixture
def small_server():
    worker = Worker("worker", 0)
    master = Master(lambda t: worker, tasks=[TASK])
    server = MasterServer(master, port=0, max_workers=8,
                          extra_servicers=[lambda srv, budget: add_to_server(WorkerServicer(worker, budget), srv)])
    yield server
    server.stop(0)
    master.close()
    worker.close()


def _queue_graph():
    g = kf.Graph()
    with g.as_default():
        q = kf.FIFOQueue(100, [kf.int32], shapes=[[]], shared_name="budget_q", name="budget_q")
        x = kf.placeholder(kf.int32, [], name="x")
        enq = q.enqueue([x])
        deq = q.dequeue()
    return g, enq, deq, x


def test_the_budget_reserves_threads_for_control_calls():
    assert channels.CallBudget(128).limit == 112
    assert channels.CallBudget(8).limit == 4
    b = channels.CallBudget(2)
    with b.slot("RunStep"):
        with pytest.raises(errors.ResourceExhaustedError, match="already runs 1 calls that may block"):
            with b.slot("RunStep"):
                pass
    with b.slot("RunStep"):   # released again
        pass


def test_blocked_steps_leave_threads_for_control_calls(small_server):
    assert small_server.budget.limit == 4
    master = GrpcMasterClient(small_server.address)
    g, enq, deq, x = _queue_graph()
    handle = master.create_session(master_pb2.CreateSessionRequest(graph_def=g.as_graph_def())).session_handle
    outcomes = []

    def dequeue():
        try:
            resp = master.run_step(master_pb2.RunStepRequest(session_handle=handle, fetch=[deq.name]), timeout=30)
            outcomes.append(int(codec.proto_to_tensor(resp.tensor[0].tensor)))
        except errors.OpError as e:
            outcomes.append(e)

    blocked = [threading.Thread(target=dequeue) for _ in range(6)]
    for t in blocked:
        t.start()
    deadline = time.monotonic() + 10
    while sum(isinstance(o, errors.ResourceExhaustedError) for o in outcomes) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    refused = [o for o in outcomes if isinstance(o, errors.OpError)]
    assert len(refused) == 2 and all(isinstance(o, errors.ResourceExhaustedError) for o in refused), outcomes
    assert "calls that may block" in str(refused[0])
    # Every thread a step may take is taken: the control calls are still answered, at once.
    t = time.monotonic()
    assert master.list_devices(timeout=5).local_device
    other = master.create_session(master_pb2.CreateSessionRequest(graph_def=g.as_graph_def()),
                                  timeout=5).session_handle
    master.close_session(master_pb2.CloseSessionRequest(session_handle=other), timeout=5)
    assert time.monotonic() - t < 3.0
    # Closing their session ends the blocked steps, which frees their slots.
    master.close_session(master_pb2.CloseSessionRequest(session_handle=handle), timeout=5)
    for t in blocked:
        t.join(20)
    assert len(outcomes) == 6 and all(isinstance(o, errors.OpError) for o in outcomes), outcomes
    handle = master.create_session(master_pb2.CreateSessionRequest(graph_def=g.as_graph_def())).session_handle
    req = master_pb2.RunStepRequest(session_handle=handle, target=[enq.name])
    req.feed.add(name=x.name, tensor=codec.tensor_to_proto(np.int32(5)))
    master.run_step(req, timeout=10)
    resp = master.run_step(master_pb2.RunStepRequest(session_handle=handle, fetch=[deq.name]), timeout=10)
    assert int(codec.proto_to_tensor(resp.tensor[0].tensor)) == 5
    master.close_session(master_pb2.CloseSessionRequest(session_handle=handle))

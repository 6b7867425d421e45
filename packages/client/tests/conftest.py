"""Tiny in-test gRPC servers: a fake worker and a fake master backed by the embedded runtime."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.protobuf import graph_pb2
from kernflow.client import channels, codec, protocol
from kernflow.client.protobuf import master_pb2, master_pb2_grpc, worker_pb2, worker_pb2_grpc
from kernflow.client.rpc_errors import rpc_method


class RunningServer:
    """A started grpc.server on 127.0.0.1 with an ephemeral port."""

    def __init__(self, add_fn, servicer):
        self.servicer = servicer
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                                  options=list(channels.SERVER_OPTIONS))
        add_fn(servicer, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        assert self.port > 0
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def stop(self):
        self.server.stop(0).wait(5)
        # A later server may get this ephemeral port again: it must not inherit the process-wide
        # channel, which is backing off from this server's death and would fail its first call.
        channels.evict(self.address)


class FakeWorker(worker_pb2_grpc.WorkerServiceServicer):
    """Behaviour chosen by the graph handle / rendezvous key of each request."""

    def __init__(self):
        self.release = threading.Event()   # wakes handlers that block
        self.tensors: dict[str, object] = {}
        self.calls: list[str] = []

    @rpc_method
    def GetStatus(self, request, context):
        self.calls.append("GetStatus")
        return worker_pb2.GetStatusResponse(
            job="worker", task=1,
            device_attributes=[worker_pb2.DeviceAttributes(
                name="/job:worker/replica:0/task:1/device:CPU:0", device_type="CPU", incarnation=7)])

    @rpc_method
    def RegisterGraph(self, request, context):
        if not request.graph_def.node:
            raise errors.InvalidArgumentError(None, None, "RegisterGraph: the graph has no nodes")
        return worker_pb2.RegisterGraphResponse(graph_handle=f"g{len(request.graph_def.node)}")

    @rpc_method
    def DeregisterGraph(self, request, context):
        return worker_pb2.DeregisterGraphResponse()

    @rpc_method
    def RunGraph(self, request, context):
        h = request.graph_handle
        if h == "block":
            self.release.wait(10)
        elif h == "missing":
            raise errors.NotFoundError(None, None, f"graph handle {h!r} is not registered")
        elif h == "crash":
            raise RuntimeError("boom")
        elif h == "bad":
            raise ValueError("malformed request")
        resp = worker_pb2.RunGraphResponse()
        for nt in request.send:
            v = codec.proto_to_tensor(nt.tensor)
            resp.recv.add(name=nt.name, tensor=codec.tensor_to_proto(v * 2 if v.dtype.kind in "iuf" else v))
        return resp

    @rpc_method
    def RecvTensor(self, request, context):
        key = request.rendezvous_key
        if key == "fail_midway":
            chunks = codec.iter_recv_chunks(np.zeros(1000, np.float32), chunk_bytes=100)
            yield next(chunks)
            raise errors.AbortedError(None, None, "step 5 was aborted by the master")
        if key == "truncate":
            yield next(codec.iter_recv_chunks(np.zeros(1000, np.float32), chunk_bytes=100))
            return
        if key == "block" or ";block;" in key:
            self.release.wait(10)
        if key not in self.tensors:
            raise errors.NotFoundError(None, None, f"no tensor for key {key!r}")
        yield from codec.iter_recv_chunks(self.tensors[key], chunk_bytes=1 << 16)

    @rpc_method
    def CleanupGraph(self, request, context):
        return worker_pb2.CleanupGraphResponse()

    @rpc_method
    def AbortStep(self, request, context):
        self.calls.append(f"AbortStep {request.step_id} {request.code}")
        return worker_pb2.AbortStepResponse()

    @rpc_method
    def CleanupAll(self, request, context):
        self.calls.append(f"CleanupAll {list(request.container)}")
        return worker_pb2.CleanupAllResponse()


class FakeMaster(master_pb2_grpc.MasterServiceServicer):
    """A master that runs the accumulated GraphDef with the embedded runtime (one task, no workers).

    It records every request, so tests can check what the client sent.
    """

    def __init__(self):
        self.requests: list[tuple[str, object]] = []
        self.sessions: dict[str, dict] = {}
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.protocol_version = protocol.PROTOCOL_VERSION   # what CreateSession advertises

    def _record(self, method, request):
        copy = type(request)()
        copy.CopyFrom(request)
        self.requests.append((method, copy))

    def _session(self, handle):
        s = self.sessions.get(handle)
        if s is None:
            raise errors.NotFoundError(None, None, f"session {handle!r} not found")
        return s

    @rpc_method
    def CreateSession(self, request, context):
        self._record("CreateSession", request)
        with self._lock:
            handle = f"session-{len(self.sessions) + 1}"
            gd = graph_pb2.GraphDef()
            gd.node.extend(request.graph_def.node)
            self.sessions[handle] = {"gd": gd, "version": 1, "sess": None}
        return master_pb2.CreateSessionResponse(session_handle=handle, graph_version=1,
                                                protocol_version=self.protocol_version)

    @rpc_method
    def ExtendSession(self, request, context):
        self._record("ExtendSession", request)
        with self._lock:
            s = self._session(request.session_handle)
            if request.current_graph_version != s["version"]:
                raise errors.AbortedError(None, None, f"graph version {request.current_graph_version} "
                                          f"is stale (now {s['version']})")
            s["gd"].node.extend(request.graph_def.node)
            s["version"] += 1
            if s["sess"] is not None:
                s["sess"].close()
            s["sess"] = None
            return master_pb2.ExtendSessionResponse(new_graph_version=s["version"])

    @rpc_method
    def RunStep(self, request, context):
        self._record("RunStep", request)
        if "block" in request.target:
            self.release.wait(10)
            return master_pb2.RunStepResponse()
        with self._lock:
            s = self._session(request.session_handle)
            if s["sess"] is None:
                g = kf.Graph()
                with g.as_default():
                    kf.import_graph_def(s["gd"], name="")
                s["sess"] = kf.Session(graph=g)
            sess = s["sess"]
        feeds = {nt.name: codec.proto_to_tensor(nt.tensor) for nt in request.feed}
        fetches = list(request.fetch)
        meta = kf.RunMetadata()
        vals = sess.run(fetches + list(request.target), feeds, options=request.options, run_metadata=meta)
        resp = master_pb2.RunStepResponse()
        for name, v in zip(fetches, vals):
            resp.tensor.add(name=name, tensor=codec.tensor_to_proto(v))
        resp.metadata.CopyFrom(meta)
        return resp

    @rpc_method
    def CloseSession(self, request, context):
        self._record("CloseSession", request)
        with self._lock:
            s = self.sessions.pop(request.session_handle, None)
        if s is None:
            raise errors.NotFoundError(None, None, f"session {request.session_handle!r} not found")
        if s["sess"] is not None:
            s["sess"].close()
        return master_pb2.CloseSessionResponse()

    @rpc_method
    def ListDevices(self, request, context):
        self._record("ListDevices", request)
        return master_pb2.ListDevicesResponse(
            local_device=[worker_pb2.DeviceAttributes(name="/job:master/replica:0/task:0/device:CPU:0",
                                                      device_type="CPU", memory_limit=1 << 30)],
            remote_device=[worker_pb2.DeviceAttributes(name="/job:worker/replica:0/task:0/device:CPU:0",
                                                       device_type="CPU", memory_limit=2 << 30,
                                                       incarnation=42)])

    @rpc_method
    def Reset(self, request, context):
        self._record("Reset", request)
        return master_pb2.ResetResponse()


@pytest.fixture
def fake_worker():
    srv = RunningServer(worker_pb2_grpc.add_WorkerServiceServicer_to_server, FakeWorker())
    yield srv
    srv.servicer.release.set()
    srv.stop()


@pytest.fixture
def fake_master():
    srv = RunningServer(master_pb2_grpc.add_MasterServiceServicer_to_server, FakeMaster())
    yield srv
    srv.servicer.release.set()
    srv.stop()
    for s in list(srv.servicer.sessions.values()):
        if s["sess"] is not None:
            s["sess"].close()


@pytest.fixture
def start_server():
    """Returns start(add_fn, servicer) -> RunningServer; every server started is stopped afterwards."""
    started = []

    def start(add_fn, servicer):
        srv = RunningServer(add_fn, servicer)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()

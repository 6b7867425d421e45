"""Fixtures for the master's tests: in-process clusters of real workers, wrapped to spy and fail."""

from __future__ import annotations

import collections
import threading

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import codec
from kernflow.client import tensor_requests
from kernflow.client.protobuf import master_pb2, worker_pb2
from kernflow.master.master import Master
from kernflow.worker.worker import Worker

_METHODS = ("get_status", "register_graph", "deregister_graph", "run_graph", "recv_tensor",
            "push_tensors", "cleanup_graph", "abort_step", "cleanup_all")


class SpyWorker:
    """Wraps a worker: records every call and runs an optional hook before delegating.

    ``hooks[method](request)`` may raise (to simulate a failure) or block (a hung task).
    """

    def __init__(self, inner):
        self.inner = inner
        self.calls: collections.Counter = collections.Counter()
        self.requests: dict[str, list] = collections.defaultdict(list)
        self.hooks: dict = {}
        self.lock = threading.Lock()

    def deliver_pushed(self, step_id, key, value, is_dead):
        """A value another worker of this process pushes here (counted as "push_tensors")."""
        with self.lock:
            self.calls["push_tensors"] += 1
        hook = self.hooks.get("push_tensors")
        if hook is not None:
            hook(None)
        return self.inner.deliver_pushed(step_id, key, value, is_dead)

    def __getattr__(self, name):
        if name not in _METHODS:
            raise AttributeError(name)

        def call(request=None, timeout=None, **kw):
            with self.lock:
                self.calls[name] += 1
                self.requests[name].append(request)
            hook = self.hooks.get(name)
            if hook is not None:
                hook(request)
            return getattr(self.inner, name)(request, timeout=timeout, **kw)
        return call


class Cluster:
    """Workers (wrapped in `SpyWorker`) for every task of `spec`, and a Master over them."""

    def __init__(self, spec: dict, config=None, **master_kw):
        self.spies: dict[str, SpyWorker] = {}
        for job, n in spec.items():
            for i in range(n):
                name = f"/job:{job}/replica:0/task:{i}"
                self.spies[name] = SpyWorker(Worker(job, i, resolver=self.resolve, recv_timeout_s=30))
        self.master = Master(self.resolve, config=config, tasks=list(self.spies), **master_kw)

    def resolve(self, task: str):
        return self.spies[task]

    def replace_worker(self, task: str) -> SpyWorker:
        """Simulates a restart: a fresh worker (new incarnations, no graphs, no state)."""
        old = self.spies[task]
        spec = kf.DeviceSpec.from_string(task)
        old.inner.close()
        self.spies[task] = SpyWorker(Worker(spec.job, spec.task, resolver=self.resolve))
        return self.spies[task]

    def session(self, graph, config=None) -> "MasterSession":
        return MasterSession(self.master, graph, config)

    def close(self) -> None:
        self.master.close()
        for spy in self.spies.values():
            spy.inner.close()


class MasterSession:
    """A minimal client driving a `Master` directly (what GrpcSession does over gRPC)."""

    def __init__(self, master, graph, config=None):
        self.master = master
        self.graph = graph
        gd = graph.as_graph_def(add_shapes=True)
        req = master_pb2.CreateSessionRequest(graph_def=gd)
        if config is not None:
            req.config.CopyFrom(config)
        resp = master.create_session(req)
        self.handle = resp.session_handle
        self.version = resp.graph_version
        self.sent = gd.version

    def sync(self) -> None:
        if self.graph.version == self.sent:
            return
        delta = self.graph.as_graph_def(from_version=self.sent, add_shapes=True)
        resp = self.master.extend_session(master_pb2.ExtendSessionRequest(
            session_handle=self.handle, graph_def=delta, current_graph_version=self.version))
        self.version = resp.new_graph_version
        self.sent = delta.version

    def run_raw(self, fetches=(), feed_dict=None, targets=(), options=None):
        self.sync()
        req = master_pb2.RunStepRequest(session_handle=self.handle,
                                        fetch=[t.name for t in fetches],
                                        target=[t.name if isinstance(t, kf.Operation) else t.op.name
                                                for t in targets])
        for t, v in (feed_dict or {}).items():
            req.feed.append(worker_pb2.NamedTensor(
                name=t.name, tensor=codec.tensor_to_proto(np.asarray(v, dtype=t.dtype.as_numpy_dtype))))
        if options is not None:
            req.options.CopyFrom(options)
        return self.master.run_step(req)

    def run(self, fetches=(), feed_dict=None, targets=(), options=None):
        single = isinstance(fetches, kf.Tensor)
        resp = self.run_raw([fetches] if single else fetches, feed_dict, targets, options)
        out = tensor_requests.decode(resp, "tensor")
        return out[0] if single else out

    def close(self) -> None:
        self.master.close_session(master_pb2.CloseSessionRequest(session_handle=self.handle))


@pytest.fixture
def make_cluster():
    made = []

    def make(spec=None, config=None, **master_kw):
        c = Cluster(spec or {"worker": 2}, config=config, **master_kw)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()

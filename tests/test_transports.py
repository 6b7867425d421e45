"""Transports on multi-process clusters, and a third-party transport chosen through its plugin.

Tasks run in child processes (``kf.train.Server`` and ``server.join()``); the test process is the
client, which pulls large fetches from the worker holding them, while task 0 pulls from task 1
(`_Recv`). Children are killed in ``finally`` blocks, and every wait has a deadline.

- The same step fetches identical bytes with the transport forced to gRPC and with shm allowed, and
  with shm allowed nothing large crosses gRPC.
- A producer killed while it writes a segment: the consumer gets UnavailableError within 5 s and no
  file is left in /dev/shm.
- Tasks whose host ids differ (``KERNFLOW_HOST_ID``) never choose shm.
- tests/plugins/kernflow-toy-transport, registered as an entry point would be, is chosen between two
  tasks of this process, which both advertise it, and only then.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pathlib
import sys
import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.runtime import transport as core_transport
from kernflow.core.testing.processes import ChildProcess, free_ports

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

from kernflow.client import fetch_stream, shm_transport, transports  # noqa: E402
from kernflow.client.worker_client import GrpcWorkerClient  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
_START_TIMEOUT_S = 30.0
N = 2 << 20                    # float32 elements: 8 MiB

needs_shm = pytest.mark.skipif(not shm_transport._available(), reason="no writable /dev/shm")

# A task of the cluster. With STALL_SHM set it stops halfway through writing its first segment (after
# it answered with the segment's name) and prints the segment's path: the test kills it there.
SERVER = r"""
import json, os, sys, time
import kernflow.core as kf
if os.environ.get("STALL_SHM"):
    from kernflow.client import shm_transport

    def stalled_fill(self, name, writer, views, nbytes, progress_bytes, cancellation):
        os.pwrite(writer.fd, views[0][:nbytes // 2], 0)
        print("stalled", shm_transport._path(name), flush=True)
        time.sleep(3600)
        yield nbytes
    shm_transport._Segments.fill = stalled_fill
server = kf.train.Server(json.loads(sys.argv[1]), job_name="worker", task_index=int(sys.argv[2]))
print("ready", server.target, flush=True)
server.join()
"""


class _Cluster:
    def __init__(self, kids, cluster, targets):
        self.kids, self.cluster, self.targets = kids, cluster, targets

    def client(self, task: int) -> GrpcWorkerClient:
        return GrpcWorkerClient(self.cluster["worker"][task], f"/job:worker/replica:0/task:{task}")

    def served(self, task: int) -> int:
        return self.client(task).get_status().recv_tensor_bytes_served


@contextlib.contextmanager
def _cluster(envs):
    """Two tasks /job:worker/task:0 and 1, task i with the extra environment ``envs[i]``."""
    ports = free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    kids = []
    try:
        for i, extra in enumerate(envs):
            env = {k: v for k, v in os.environ.items()
                   if k not in (core_transport.TRANSPORT_ENV, core_transport.HOST_ID_ENV)}
            env.update(extra, PYTHONUNBUFFERED="1")
            kids.append(ChildProcess(f"task {i}", [sys.executable, "-c", SERVER, json.dumps(cluster), str(i)],
                                     env=env))
        targets = [k.expect("ready", _START_TIMEOUT_S, prefix=True).split()[1] for k in kids]
        fetch_stream.forget_reachability()
        yield _Cluster(kids, cluster, targets)
    finally:
        for k in kids:
            k.kill()
        fetch_stream.forget_reachability()


def _graph():
    """A variable on task 1 set from a feed; its value fetched (pulled by the client from task 1) and
    copied on task 0 (pulled by task 0 from task 1)."""
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [N], name="x")
        with kf.device("/job:worker/task:1"):
            v = kf.Variable(kf.zeros([N]), name="v")
            assign = v.assign(x)
            on1 = v.read_value()
        with kf.device("/job:worker/task:0"):
            on0 = kf.identity(on1, name="on0")
    return g, x, assign, on1, on0


def _kernflow_files() -> set[str]:
    return {f for f in os.listdir(shm_transport.SHM_DIR)
            if f.startswith((shm_transport.SEGMENT_PREFIX, shm_transport.PROBE_PREFIX))}


def _no_new_files(before: set[str], wait_s: float = 5.0) -> set[str]:
    """Files this test left in /dev/shm (others' transient ones are given `wait_s` to go)."""
    deadline = time.monotonic() + wait_s
    while True:
        left = _kernflow_files() - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.mark.slow
@needs_shm
@pytest.mark.parametrize("forced", ["grpc", ""], ids=["forced-grpc", "shm-allowed"])
def test_the_same_step_fetches_identical_bytes(forced, monkeypatch):
    monkeypatch.setenv(core_transport.TRANSPORT_ENV, forced)
    monkeypatch.delenv(core_transport.HOST_ID_ENV, raising=False)
    value = np.random.default_rng(3).standard_normal(N).astype(np.float32)
    value[:4] = [np.nan, -0.0, np.inf, -np.inf]
    g, x, assign, on1, on0 = _graph()
    before = _kernflow_files()
    with _cluster([{core_transport.TRANSPORT_ENV: forced}] * 2) as c:
        with kf.Session(c.targets[0], graph=g) as sess:
            sess.run(assign.op, {x: value})
            served = c.served(1)
            a = sess.run(on1)                      # pulled by the client from task 1
            b = sess.run(on0)                      # pulled by task 0 from task 1
            served = c.served(1) - served
    assert a.tobytes() == value.tobytes() and b.tobytes() == value.tobytes()
    if forced:
        assert served >= 2 * value.nbytes          # the client's pull and task 0's, in-band
    else:
        assert served < 64 << 10                   # only metadata went over gRPC
    assert _no_new_files(before) == set()


@pytest.mark.slow
@needs_shm
@pytest.mark.parametrize("consumer", ["client", "task0"])
def test_a_producer_killed_mid_transfer_is_unavailable_within_5s(consumer, monkeypatch):
    monkeypatch.delenv(core_transport.TRANSPORT_ENV, raising=False)
    monkeypatch.delenv(core_transport.HOST_ID_ENV, raising=False)
    g, x, assign, on1, on0 = _graph()
    before = _kernflow_files()
    with _cluster([{}, {"STALL_SHM": "1"}]) as c:
        with kf.Session(c.targets[0], graph=g) as sess:
            sess.run(assign.op, {x: np.ones(N, np.float32)})
            box = []

            def fetch():
                try:
                    box.append(sess.run(on1 if consumer == "client" else on0))
                except Exception as e:  # noqa: BLE001 - checked below
                    box.append(e)
                box.append(time.monotonic())
            t = threading.Thread(target=fetch, daemon=True)
            t.start()
            segment = c.kids[1].expect("stalled", 30.0, prefix=True).split()[1]
            time.sleep(0.2)                          # (the consumer is waiting for the bytes)
            assert t.is_alive()
            c.kids[1].kill()
            killed = time.monotonic()
            t.join(30)
            assert len(box) == 2, "the fetch did not return"
        err, when = box
        assert isinstance(err, errors.UnavailableError), err
        assert when - killed < 5.0, f"UnavailableError {when - killed:.1f} s after the kill"
    assert not os.path.exists(segment)
    assert _no_new_files(before) == set()


@pytest.mark.slow
@needs_shm
def test_tasks_on_different_hosts_never_choose_shm(monkeypatch):
    monkeypatch.delenv(core_transport.TRANSPORT_ENV, raising=False)
    monkeypatch.setenv(core_transport.HOST_ID_ENV, "host-a")      # the client shares task 0's host
    value = np.arange(N, dtype=np.float32)
    g, x, assign, on1, on0 = _graph()
    with _cluster([{core_transport.HOST_ID_ENV: "host-a"}, {core_transport.HOST_ID_ENV: "host-b"}]) as c:
        with kf.Session(c.targets[0], graph=g) as sess:
            sess.run(assign.op, {x: value})
            served = c.served(1)
            a, b = sess.run(on1), sess.run(on0)
            assert c.served(1) - served >= 2 * value.nbytes
        np.testing.assert_array_equal(a, value)
        np.testing.assert_array_equal(b, value)
        assert transports.negotiate(c.client(1)).name == "grpc"    # host-b
        assert transports.negotiate(c.client(0)).name == "shm"     # host-a: shm was possible


# ---------------------------------------------------------------------------- a third-party transport
@pytest.fixture
def toy(monkeypatch):
    """The plugins installed here plus tests/plugins/kernflow-toy-transport, as if installed."""
    from kernflow.core.plugins import manager
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "plugins" / "kernflow-toy-transport"))
    plugin = importlib.import_module("kernflow_toy_transport")
    pm = manager.KernflowPluginManager()
    for name, p in manager.get_plugin_manager().list_name_plugin():
        pm.register(p, name=name)
    pm.register(plugin, name="toy_transport")
    monkeypatch.setattr(manager, "_registries", manager.Registries(pm))
    monkeypatch.delenv(core_transport.TRANSPORT_ENV, raising=False)
    yield core_transport.get(plugin.NAME)
    core_transport.reset_for_tests()


def test_a_plugin_transport_is_chosen_when_both_ends_advertise_it(toy, monkeypatch):
    from kernflow.worker.server import WorkerServer
    assert [t.name for t in core_transport.transports()] == ["toy-inproc", "shm", "grpc"]
    clients = {}
    servers = [WorkerServer("worker", i, resolver=lambda t: clients[t]) for i in range(2)]
    try:
        for s in servers:
            clients[s.task_name] = GrpcWorkerClient(s.address, s.task_name)
        w0, w1 = (s.worker for s in servers)
        peer = clients[w1.task_name]
        assert [o.name for o in peer.get_status().transports] == ["toy-inproc", "shm", "grpc"]
        assert w0.transports.get(w1.task_name, peer) is toy
        value = np.random.default_rng(5).standard_normal(N).astype(np.float32)
        got = _pull(w1, w0, value, 1)
        assert got.tobytes() == value.tobytes() and toy.served == toy.received == 1
        monkeypatch.setattr(toy, "offer", lambda challenge: None)    # the producer stops offering it
        w0.transports.forget(w1.task_name, peer)
        fallback = "shm" if shm_transport._available() else "grpc"
        assert w0.transports.get(w1.task_name, peer).name == fallback
        assert _pull(w1, w0, value, 2).tobytes() == value.tobytes() and toy.received == 1
    finally:
        for s in servers:
            s.stop(0)


def _pull(producer, consumer, value, step):
    from kernflow.core.runtime.rendezvous import create_key
    src, dst = producer.devices[0], consumer.devices[0]
    key = create_key(src.name, src.incarnation, dst.name, "t:0")
    producer._step(9000 + step).send(key, value)
    got, done = [], threading.Event()
    consumer._step(9000 + step).recv_async(key, lambda v, dead, err: (got.append((v, err)), done.set()))
    assert done.wait(30), "the pull did not finish"
    assert got[0][1] is None, got[0][1]
    return got[0][0]

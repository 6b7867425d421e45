"""`kernflow top --once` against a real etcd: two worker servers (in this process) registered there
and running steps, plus the registration of a task that does not answer.

The command runs as a subprocess (the real CLI); it must show both workers up with their devices and
a positive steps/s, the silent task down, and exit 1 while a task is down, 0 once none is.
"""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import discovery
from kernflow.client.etcd_server import free_port
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.master.master import Master
from kernflow.master.server import MasterServer
from kernflow.worker.server import WorkerServer

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(90)]

CLUSTER = "toptest"


@pytest.fixture
def cluster(etcd):
    """Two registered worker servers, a master over them, and a thread running steps on both."""
    clients, regs, stop = {}, [], threading.Event()
    workers = [WorkerServer("worker", i, port=0, resolver=lambda t: clients[t]) for i in range(2)]
    master = server = thread = None
    try:
        for i, w in enumerate(workers):
            clients[w.task_name] = GrpcWorkerClient(w.address, w.task_name)
            regs.append(discovery.worker_registration(etcd.address, CLUSTER, "worker", i, w.address,
                                                      ttl_s=5).start(wait_s=10))
        master = Master(lambda t: clients[t], tasks=list(clients), rpc_timeout_s=5.0)
        server = MasterServer(master, port=0)
        regs.append(discovery.master_registration(etcd.address, CLUSTER, server.address, ttl_s=5)
                    .start(wait_s=10))
        thread = threading.Thread(target=_steps, args=(server.target, stop), daemon=True)
        thread.start()
        yield etcd.address, regs
    finally:
        stop.set()
        if thread is not None:
            thread.join(10)
        for r in regs:
            r.stop()
        if server is not None:
            server.stop(0)
            master.close()
        for w in workers:
            w.stop(0)


def _steps(target, stop):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [4], name="x")
        with kf.device("/job:worker/task:0"):
            a = x * 2.0
        with kf.device("/job:worker/task:1"):
            y = a + 1.0
    with kf.Session(target, graph=g) as s:
        while not stop.is_set():
            s.run(y, {x: np.ones(4, np.float32)})


def _top(endpoint, *extra):
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "kernflow.core.cli", "top", "--etcd", endpoint,
                           "--cluster", CLUSTER, "--once", "--interval", "0.5", "--timeout", "2", *extra],
                          capture_output=True, text=True, timeout=60, env=env)


def _cells(out: str, task: str) -> list[str]:
    line = next(ln for ln in out.splitlines() if task in ln)
    return [c.strip() for c in line.split("│")[1:-1]]


def test_top_once_shows_tasks_up_down_and_steps_per_second(cluster):
    endpoint, _ = cluster
    dead = discovery.worker_registration(endpoint, CLUSTER, "worker", 2, f"127.0.0.1:{free_port()}",
                                         ttl_s=5).start(wait_s=10)
    try:
        r = _top(endpoint)
    finally:
        dead.stop()
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"kernflow cluster '{CLUSTER}'" in r.stdout and "2/3 tasks up" in r.stdout
    for i in (0, 1):
        task, address, state, devices, rate, steps, failed, uptime, error = \
            _cells(r.stdout, f"/job:worker/replica:0/task:{i}")
        assert state == "up" and devices == "CPU:0" and address.startswith("127.0.0.1:")
        assert float(rate) > 0 and int(steps) > 0 and failed == "0" and error == "", r.stdout
    cells = _cells(r.stdout, "/job:worker/replica:0/task:2")
    assert cells[2] == "down" and "Unavailable" in cells[-1], r.stdout
    r = _top(endpoint, "--interval", "0.2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2/2 tasks up" in r.stdout


def test_top_once_without_etcd_exits_2():
    r = _top(f"127.0.0.1:{free_port()}", "--timeout", "1")
    assert r.returncode == 2
    assert "kernflow top:" in r.stderr and "etcd" in r.stderr

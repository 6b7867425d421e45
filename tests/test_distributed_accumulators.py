"""A conditional accumulator on the ps task of a two-task cluster, fed by two client processes.

Two ``kf.train.Server`` processes form the cluster (``ps`` and ``worker``); two more processes are
clients with sessions on the worker's master. Both build the same graph: a shared accumulator on
``/job:ps/task:0`` and a gradient computed on ``/job:worker/task:0``. Client 0 applies a gradient
and then takes the mean of two, which blocks across processes until client 1 has applied its own;
after the take (global step 1) client 0's gradient of step 0 is stale and dropped, one of step 1
is kept.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from kernflow.core.testing.processes import ChildProcess, free_ports

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

pytestmark = pytest.mark.slow

_TIMEOUT_S = 60.0

SERVER = r"""
import json, sys
import kernflow.core as kf
cfg = json.loads(sys.argv[1])
server = kf.train.Server(cfg["cluster"], job_name=cfg["job"], task_index=0)
print("ready", server.target, flush=True)
server.join()
"""

CLIENT = r"""
import json, sys
import numpy as np
import kernflow.core as kf

cfg = json.loads(sys.argv[1])
g = kf.Graph()
with g.as_default():
    with kf.device("/job:ps/task:0"):
        acc = kf.ConditionalAccumulator(kf.float32, shape=[3], shared_name="ps_acc", name="ps_acc")
    with kf.device("/job:worker/task:0"):
        x = kf.placeholder(kf.float32, [3], name="x")
        grad = x * 2.0                                                  # computed on the worker
    step = kf.placeholder(kf.int64, [], name="step")
    apply = acc.apply_grad(grad, local_step=step)
    take = acc.take_grad(2)
    count = acc.num_accumulated()
with kf.Session(cfg["target"], graph=g) as sess:
    sess.run(apply, {x: cfg["x"], step: 0})
    print("applied", flush=True)
    out = {"apply_device": apply.device, "grad_device": grad.op.device}
    if cfg["take"]:
        print("taking", flush=True)
        out["mean"] = sess.run(take).tolist()
        sess.run(apply, {x: cfg["x"], step: 0})                         # stale now: dropped
        out["after_stale"] = int(sess.run(count))
        sess.run(apply, {x: cfg["x"], step: 1})
        out["after_fresh"] = int(sess.run(count))
print("result", json.dumps(out), flush=True)
"""



def _start(kids, name, script, cfg, env):
    kid = ChildProcess(name, [sys.executable, "-c", script, json.dumps(cfg)], env=env)
    kids.append(kid)
    return kid


def test_ps_accumulator_fed_by_two_clients_and_taken_across_processes():
    ps_port, worker_port = free_ports(2)
    cluster = {"ps": [f"localhost:{ps_port}"], "worker": [f"localhost:{worker_port}"]}
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    kids = []
    try:
        servers = [_start(kids, job, SERVER, {"cluster": cluster, "job": job}, env)
                   for job in ("ps", "worker")]
        target = servers[1].expect("ready", _TIMEOUT_S, prefix=True).split()[1]
        servers[0].expect("ready", _TIMEOUT_S, prefix=True)
        taker = _start(kids, "client 0", CLIENT, {"target": target, "x": [1.0, 2.0, 3.0],
                                                  "take": True}, env)
        taker.expect("taking", _TIMEOUT_S, prefix=True)
        other = _start(kids, "client 1", CLIENT, {"target": target, "x": [3.0, 4.0, 5.0],
                                                  "take": False}, env)
        applied = json.loads(other.expect("result", _TIMEOUT_S, prefix=True).split(" ", 1)[1])
        taken = json.loads(taker.expect("result", _TIMEOUT_S, prefix=True).split(" ", 1)[1])
    finally:
        for k in kids:
            k.kill()
    for out in (applied, taken):
        assert out["apply_device"].startswith("/job:ps/task:0")        # colocated with the accumulator
        assert out["grad_device"].startswith("/job:worker/task:0")
    assert taken["mean"] == [4.0, 6.0, 8.0]                              # mean of 2*x over both clients
    assert taken["after_stale"] == 0 and taken["after_fresh"] == 1

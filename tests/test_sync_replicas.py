"""`kf.train.SyncReplicasOptimizer` on a multi-process cluster: 1 ps + 3 worker processes.

Every task runs in its own process (``kf.train.Server``); each worker builds its own graph under
``replica_device_setter`` and trains with 2 of 3 gradients aggregated per step (one backup worker).

- kill -9 a non-chief worker mid-training: the two others complete every step, the chief reaches
  the last step (MonitoredTrainingSession + the optimizer's hook).
- Without backups (3 of 3) and with one worker stuck before its first step, the two others wait
  in the token dequeue and the chief's queue runner in take_grad. kill -9 the ps: both workers
  fail with UnavailableError naming /job:ps within 5 s, and the queue runner reports the same
  error to the chief's Coordinator (TF hangs here: tensorflow/tensorflow#5022).

Child processes are killed in ``finally`` blocks, and every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time

import pytest

from kernflow.core.testing.processes import ChildProcess, free_ports

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

pytestmark = pytest.mark.slow

_ENV = dict(os.environ, PYTHONUNBUFFERED="1")
_TIMEOUT_S = 30.0

PS = r"""
import json, sys
import kernflow.core as kf
server = kf.train.Server(json.loads(sys.argv[1])["cluster"], job_name="ps", task_index=0)
print("ready", server.target, flush=True)
server.join()
"""

# A worker replica: a linear model on its own batch, cfg["aggregate"] of 3 gradients per step.
# cfg["monitored"]: MonitoredTrainingSession + hooks until cfg["last_step"], then "done <global
# step>"; otherwise a plain Session driven by the hook (as a Supervisor script would), which
# prints "error <class> <message>" when a step fails (and the chief, what its Coordinator got);
# a task in cfg["stuck"] never starts a step.
WORKER = r"""
import json, sys, time
import numpy as np
import kernflow.core as kf
from kernflow.core.train import monitored_session

cfg = json.loads(sys.argv[1])
task = cfg["task"]
cluster = kf.train.ClusterSpec(cfg["cluster"])
server = kf.train.Server(cluster, job_name="worker", task_index=task)
print("ready", server.target, flush=True)
monitored_session._ScaffoldSessionCreator._recovery_wait_secs = 0.1   # TF polls every 30 s
rs = np.random.RandomState(task)
g = kf.Graph()
with g.as_default(), kf.device(kf.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{task}")):
    w = kf.Variable(np.zeros((3, 1), np.float32), name="w")
    b = kf.Variable(np.zeros([1], np.float32), name="b")
    x, y = kf.constant(rs.rand(8, 3).astype(np.float32)), kf.constant(rs.rand(8, 1).astype(np.float32))
    loss = kf.reduce_mean(kf.square(kf.matmul(x, w) + b - y))
    gs = kf.train.get_or_create_global_step()
    opt = kf.train.SyncReplicasOptimizer(kf.train.GradientDescentOptimizer(0.05),
                                         replicas_to_aggregate=cfg["aggregate"], total_num_replicas=3)
    train = opt.minimize(loss, global_step=gs)
hook = opt.make_session_run_hook(is_chief=task == 0, num_tokens=cfg["num_tokens"])
# As TF sync jobs do: a worker's sessions need the ps and itself, not the other workers.
config = kf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"])

def monitored():
    with g.as_default(), kf.train.MonitoredTrainingSession(
            master=server.target, is_chief=task == 0, config=config, stop_grace_period_secs=1,
            hooks=[hook, kf.train.StopAtStepHook(last_step=cfg["last_step"])],
            save_checkpoint_secs=None, log_step_count_steps=None) as sess:
        while not sess.should_stop():
            print("step", int(sess.run([train, gs])[1]), flush=True)
            time.sleep(cfg["step_sleep"])
    with kf.Session(server.target, graph=g, config=config) as sess:
        print("done", int(sess.run(gs)), flush=True)

def plain():
    with g.as_default():
        hook.begin()
        init = kf.global_variables_initializer()
        local_init = kf.local_variables_initializer()
    sess = kf.Session(server.target, graph=g, config=config)
    if task == 0:
        sess.run(init)
    while len(sess.run(opt.ready_for_local_init_op)):
        time.sleep(0.05)
    sess.run(local_init)
    coord = kf.train.Coordinator()
    hook.after_create_session(sess, coord)
    print("started", flush=True)
    if task in cfg["stuck"]:
        return
    try:
        while True:
            print("step", int(sess.run([train, gs])[1]), flush=True)
            time.sleep(cfg["step_sleep"])
    except Exception as e:
        print("error", type(e).__name__, json.dumps(str(e)), flush=True)
    if task == 0:
        coord.wait_for_stop(10)
        try:
            coord.raise_requested_exception()
            print("coord none", flush=True)
        except Exception as e:
            print("coord", type(e).__name__, json.dumps(str(e)), flush=True)

monitored() if cfg["monitored"] else plain()
server.join()
"""


def _child(name, script, cfg):
    return ChildProcess(name, [sys.executable, "-c", script, json.dumps(cfg)], env=_ENV)


def _expect(kid, needle, timeout=_TIMEOUT_S):
    return kid.expect(needle, timeout, prefix=True)


@contextlib.contextmanager
def _sync_cluster(**cfg):
    """Starts the ps and three worker processes; yields (ps, [workers]); kills them all after."""
    ports = free_ports(4)
    cluster = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{p}" for p in ports[1:]]}
    kids = []
    try:
        kids.append(_child("/job:ps/task:0", PS, {"cluster": cluster}))
        for task in range(3):
            kids.append(_child(f"/job:worker/task:{task}", WORKER,
                               dict(cfg, cluster=cluster, task=task, stuck=cfg.get("stuck", []))))
        for kid in kids:
            _expect(kid, "ready")
        yield kids[0], kids[1:]
    finally:
        for kid in kids:
            kid.kill()


def _wait_for_step(kid, at_least):
    while True:
        step = int(_expect(kid, "step").split()[1])
        if step >= at_least:
            return step


def test_training_goes_on_to_the_last_step_after_a_worker_is_killed():
    last_step = 30
    with _sync_cluster(monitored=True, aggregate=2, num_tokens=-1, last_step=last_step,
                       step_sleep=0.02) as (ps, workers):
        chief, _, victim = workers
        _wait_for_step(victim, 3)                    # the victim trains with the others...
        at_kill = _wait_for_step(chief, 8)
        victim.kill()                                # ...until it is killed -9 mid-training
        assert at_kill < last_step
        done = int(_expect(chief, "done", 60).split()[1])
    assert done >= last_step


def test_a_dead_ps_fails_the_waiting_workers_with_unavailable_naming_it_within_5_s():
    with _sync_cluster(monitored=False, aggregate=3, num_tokens=0, stuck=[2],
                       step_sleep=0.01) as (ps, workers):
        for kid in workers:
            _expect(kid, "started")
        time.sleep(1.0)                   # workers 0 and 1 now wait for a token, forever in TF
        for kid in workers:
            assert "step" not in kid.output(), kid.output()
        killed_at = time.monotonic()
        ps.kill()
        for kid in workers[:2]:
            line = _expect(kid, "error", 10)
            took = time.monotonic() - killed_at
            _, cls, message = line.split(" ", 2)
            assert cls == "UnavailableError" and "/job:ps" in json.loads(message), line
            assert took < 5.0, f"{kid.name} failed {took:.1f} s after the ps died: {line}"
        # The chief's queue runner, blocked in take_grad, reported it to the Coordinator too.
        line = _expect(workers[0], "coord", 15)
        _, cls, message = line.split(" ", 2)
        assert cls == "UnavailableError" and "/job:ps" in json.loads(message), line

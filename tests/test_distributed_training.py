"""Training and exact results on multi-process clusters.

Every task runs in its own process (a ``kf.train.Server`` and ``server.join()``); the test process is
a client. Child processes are killed in ``finally`` blocks, and every wait has a deadline.

- Between-graph data parallelism: 1 ps and 2 workers train the demo's digits MLP asynchronously,
  each worker with its own graph (``kf.train.replica_device_setter``), its own session on its own
  task and half of the data; the result matches the embedded run's accuracy.
- A deterministic graph spread over two tasks gives bit-identical results to the embedded runtime.
- ``kernflow demo --target grpc://...`` trains on a local server and on a ps/worker cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import ChildProcess, free_ports
from kernflow.core import demo

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

pytestmark = pytest.mark.slow

_ENV = dict(os.environ, PYTHONUNBUFFERED="1")
_START_TIMEOUT_S = 30.0

# A task of the cluster: serves until killed.
SERVER = r"""
import json, sys
import kernflow.core as kf
server = kf.train.Server(json.loads(sys.argv[1]), job_name=sys.argv[2], task_index=int(sys.argv[3]))
print("ready", server.target, flush=True)
server.join()
"""

# A worker replica of between-graph training: serves its task, trains on its half of the data with
# its own graph and session, reports, and keeps serving (the test evaluates through the cluster).
TRAIN_WORKER = r"""
import json, sys, time
import numpy as np
import kernflow.core as kf
from kernflow.core import demo

cfg = json.loads(sys.argv[1])
task, epochs, batch = cfg["task"], cfg["epochs"], cfg["batch_size"]
cluster = kf.train.ClusterSpec(cfg["cluster"])
server = kf.train.Server(cluster, job_name="worker", task_index=task)
print("ready", server.target, flush=True)
(xtr, ytr), _ = demo.load_digits()
xtr, ytr = xtr[task::2], ytr[task::2]                 # this replica's half of the training set
g = kf.Graph()
with g.as_default(), kf.device(kf.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{task}")):
    kf.set_random_seed(cfg["seed"])
    x = kf.placeholder(kf.float32, [None, 64], name="x")
    y = kf.placeholder(kf.int64, [None], name="y")
    logits = demo.build_mlp(kf, x, cfg["seed"])
    loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    step = kf.train.get_or_create_global_step()
    lr = kf.train.piecewise_constant(step, [cfg["lr_boundary"]], [0.02, 0.005])
    train = kf.train.MomentumOptimizer(lr, 0.9).minimize(loss, global_step=step)
    init = kf.global_variables_initializer()
with g.as_default():  # outside the setter: IsVariableInitialized must sit with its variable
    uninitialized = kf.report_uninitialized_variables()
placed = sorted({op.device for op in g.get_operations() if op.type == "VariableV2"})
with kf.Session(server.target, graph=g) as sess:
    if task == 0:                                      # the chief initializes the shared variables
        sess.run(init)
    else:                                              # the others wait until it has
        deadline = time.monotonic() + 30
        while len(sess.run(uninitialized)):
            assert time.monotonic() < deadline, "the chief did not initialize the variables"
            time.sleep(0.05)
    rng = np.random.RandomState(cfg["seed"] + task)
    n_steps, epoch_losses = 0, []
    for _ in range(epochs):
        perm, total, n = rng.permutation(len(xtr)), 0.0, 0
        for i in range(0, len(xtr), batch):
            idx = perm[i:i + batch]
            _, l = sess.run([train, loss], {x: xtr[idx], y: ytr[idx]})
            total, n, n_steps = total + float(l), n + 1, n_steps + 1
        epoch_losses.append(total / n)
print("trained", json.dumps({"steps": n_steps, "losses": epoch_losses, "variable_devices": placed}),
      flush=True)
server.join()
"""


# ---------------------------------------------------------------------------- processes
_free_ports = free_ports


class _Child(ChildProcess):
    def __init__(self, name, args):
        super().__init__(name, args, env=dict(os.environ, PYTHONUNBUFFERED="1"))   # (as the test set it)

    def expect(self, needle, timeout):
        return super().expect(needle, timeout, prefix=True)


@contextlib.contextmanager
def _children():
    """Yields a list to append `_Child`ren to; kills every one of them on the way out."""
    kids: list[_Child] = []
    try:
        yield kids
    finally:
        for k in kids:
            k.kill()


def _start_servers(kids, cluster: dict, tasks):
    """Starts one `kf.train.Server` process per (job, index); returns {(job, index): target}."""
    started = []
    for job, index in tasks:
        kid = _Child(f"/job:{job}/task:{index}",
                     [sys.executable, "-c", SERVER, json.dumps(cluster), job, str(index)])
        kids.append(kid)
        started.append(((job, index), kid))
    return {key: kid.expect("ready", _START_TIMEOUT_S).split()[1] for key, kid in started}


# ---------------------------------------------------------------------------- the MLP
# The demo's MLP and optimizer (momentum 0.9, learning rate 0.02), with the rate dropped to 0.005
# for the last 40% of the steps so the final accuracy does not swing with the last few updates.
_LR_DROP_AT = 0.6

def _mlp_graph(setter=None, seed=1, lr_boundary=1 << 30):
    g = kf.Graph()
    with g.as_default(), (kf.device(setter) if setter is not None else contextlib.nullcontext()):
        kf.set_random_seed(seed)
        x = kf.placeholder(kf.float32, [None, 64], name="x")
        y = kf.placeholder(kf.int64, [None], name="y")
        logits = demo.build_mlp(kf, x, seed)
        loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        step = kf.train.get_or_create_global_step()
        lr = kf.train.piecewise_constant(step, [lr_boundary], [0.02, 0.005])
        train = kf.train.MomentumOptimizer(lr, 0.9).minimize(loss, global_step=step)
        correct = kf.reduce_sum(kf.cast(kf.equal(kf.argmax(logits, 1), y), kf.int32))
        init = kf.global_variables_initializer()
    return g, x, y, step, train, correct, init


def _steps_per_epoch(n, batch):
    return (n + batch - 1) // batch


def _embedded_accuracy(epochs, batch, seed=1):
    (xtr, ytr), (xte, yte) = demo.load_digits()
    boundary = int(_LR_DROP_AT * epochs * _steps_per_epoch(len(xtr), batch))
    g, x, y, step, train, correct, init = _mlp_graph(seed=seed, lr_boundary=boundary)
    with kf.Session(graph=g) as sess:
        sess.run(init)
        rng = np.random.RandomState(seed)
        for _ in range(epochs):
            perm = rng.permutation(len(xtr))
            for i in range(0, len(xtr), batch):
                sess.run(train, {x: xtr[perm[i:i + batch]], y: ytr[perm[i:i + batch]]})
        return 100.0 * sess.run(correct, {x: xte, y: yte}) / len(xte)


def test_between_graph_data_parallel_training_matches_the_embedded_accuracy():
    epochs, batch = 12, 64
    (xtr, _), (xte, yte) = demo.load_digits()
    steps_per_worker = epochs * _steps_per_epoch(len(xtr[0::2]), batch)
    boundary = int(_LR_DROP_AT * 2 * steps_per_worker)   # both replicas advance the global step
    ps_port, w0_port, w1_port = _free_ports(3)
    cluster = {"ps": [f"localhost:{ps_port}"],
               "worker": [f"localhost:{w0_port}", f"localhost:{w1_port}"]}
    with _children() as kids:
        targets = _start_servers(kids, cluster, [("ps", 0)])
        workers = []
        for task in (0, 1):
            cfg = {"cluster": cluster, "task": task, "epochs": epochs, "batch_size": batch, "seed": 1,
                   "lr_boundary": boundary}
            kid = _Child(f"worker {task}", [sys.executable, "-c", TRAIN_WORKER, json.dumps(cfg)])
            kids.append(kid)
            workers.append(kid)
        for kid in workers:
            kid.expect("ready", _START_TIMEOUT_S)
        reports = [json.loads(kid.expect("trained", 120.0).split(" ", 1)[1]) for kid in workers]
        want = _embedded_accuracy(epochs, batch)

        for r in reports:
            assert r["variable_devices"] == ["/job:ps/task:0"], r
            assert r["losses"][-1] < 0.5 * r["losses"][0], r
        # Evaluate through the cluster: a fresh graph (same names) finds the trained variables on
        # the ps; the computation runs on worker 0.
        g, x, y, step, _, correct, _ = _mlp_graph(kf.train.replica_device_setter(
            cluster=cluster, worker_device="/job:worker/task:0"))
        with kf.Session(f"grpc://localhost:{w0_port}", graph=g) as sess:
            got = 100.0 * sess.run(correct, {x: xte, y: yte}) / len(xte)
            global_step = int(sess.run(step))
        # Both replicas updated the same variables on the ps (asynchronously).
        assert global_step == reports[0]["steps"] + reports[1]["steps"]
        assert reports[0]["steps"] == reports[1]["steps"] == steps_per_worker
        # The ps's own master sees the same state.
        with kf.Session(targets[("ps", 0)], graph=g) as sess:
            assert int(sess.run(step)) == global_step
    print(f"between-graph training: {got:.2f}% (embedded: {want:.2f}%)")
    assert got >= 95.0, (got, want)
    assert got >= want - 2.0, (got, want)


# ---------------------------------------------------------------------------- exact results
def _spread_graph(two_tasks: bool):
    """A deterministic graph whose tensors cross between two tasks when `two_tasks`."""
    def on(task):
        return kf.device(f"/job:worker/task:{task}") if two_tasks else contextlib.nullcontext()
    g = kf.Graph()
    with g.as_default():
        kf.set_random_seed(7)
        x = kf.placeholder(kf.float32, [None, 32], name="x")
        with on(0):
            w = kf.random_normal([32, 64], seed=3)
            h = kf.nn.relu(kf.matmul(x, w))
            big = kf.tile(kf.reshape(h, [-1]), [400])          # ~6 MB: streamed in chunks
        with on(1):
            v = kf.Variable(kf.truncated_normal([64, 16], seed=5), name="v")
            z = kf.nn.softmax(kf.matmul(h, v))                  # h crosses 0 -> 1
            big_sum = kf.reduce_sum(big * 0.5)                  # big crosses 0 -> 1
            top = kf.argmax(z, 1)                               # int64
            words = kf.gather(kf.constant([b"zero", b"one", b"two", b"three"]), top % 4)
        with on(0):
            out = kf.concat([h[:, :16] * z, z], 1)              # z crosses 1 -> 0
            total = big_sum + kf.reduce_sum(out)                # big_sum crosses 1 -> 0
        init = kf.global_variables_initializer()
    return g, x, init, [out, total, top, words, big_sum]


@pytest.mark.parametrize("channel", ["local", "grpc"])
def test_graph_spread_over_two_workers_is_bit_identical_to_embedded(channel, monkeypatch):
    """Over the same-host channel, and over gRPC (the path between hosts)."""
    if channel == "grpc":
        monkeypatch.setenv("KERNFLOW_LOCAL_CHANNEL", "0")
    ports = _free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    xv = np.random.RandomState(0).randn(50, 32).astype(np.float32)
    g, x, init, fetches = _spread_graph(two_tasks=False)
    with kf.Session(graph=g) as sess:
        sess.run(init)
        want = sess.run(fetches, {x: xv})
        want_again = sess.run(fetches, {x: xv})     # the random op's stream has moved on
    assert not np.array_equal(want[0], want_again[0])
    with _children() as kids:
        targets = _start_servers(kids, cluster, [("worker", 0), ("worker", 1)])
        g, x, init, fetches = _spread_graph(two_tasks=True)
        with kf.Session(targets[("worker", 0)], graph=g) as sess:
            sess.run(init)
            got = sess.run(fetches, {x: xv})
            again = sess.run(fetches, {x: xv})
            devices = sorted(d.name for d in sess.list_devices())
    assert devices == [f"/job:worker/replica:0/task:{i}/device:CPU:0" for i in (0, 1)]
    for w, w2, a, b in zip(want, want_again, got, again):
        assert a.dtype == w.dtype and a.shape == w.shape
        assert np.array_equal(a, w), (a, w)
        assert np.array_equal(b, w2), (b, w2)


# ---------------------------------------------------------------------------- the demo
def _demo(tmp_path, target, *args):
    r = subprocess.run([sys.executable, "-m", "kernflow.core.cli", "demo", "--no-progress",
                        "--checkpoint-dir", str(tmp_path), "--target", target, *args],
                       capture_output=True, text=True, timeout=120, env=_ENV)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"final test accuracy: ([\d.]+)%", r.stdout)
    assert m, r.stdout + r.stderr
    return r.stdout, float(m.group(1))


LOCAL_SERVER = r"""
import kernflow.core as kf
server = kf.train.Server.create_local_server()
print("ready", server.target, flush=True)
server.join()
"""


def test_demo_trains_on_a_local_server_and_on_a_ps_worker_cluster(tmp_path):
    ps_port, w_port = _free_ports(2)
    cluster = {"ps": [f"localhost:{ps_port}"], "worker": [f"localhost:{w_port}"]}
    with _children() as kids:
        local = _Child("local server", [sys.executable, "-c", LOCAL_SERVER])
        kids.append(local)
        targets = _start_servers(kids, cluster, [("ps", 0), ("worker", 0)])
        target = local.expect("ready", _START_TIMEOUT_S).split()[1]
        assert target.startswith("grpc://localhost:")

        out, acc = _demo(tmp_path / "local", target, "--epochs", "2")
        assert f"training on {target}: 1 task(s) of job(s) localhost" in out, out
        assert "epoch   2" in out and acc >= 70.0, out
        assert (tmp_path / "local" / "mlp" / "checkpoint").exists()

        out, acc = _demo(tmp_path / "ps", targets[("worker", 0)], "--epochs", "2")
        assert "variables on 1 ps task(s), computation on /job:worker/task:0" in out, out
        assert acc >= 70.0, out
        # Resuming reads the checkpoint back into the ps's variables.
        out, acc = _demo(tmp_path / "ps", targets[("worker", 0)], "--epochs", "3", "--resume")
        assert "resumed from" in out and "(epoch 2)" in out and "epoch   3" in out, out
        assert acc >= 70.0, out


def test_chief_started_before_its_ps_waits_for_it():
    """As TF's CreateSession: a session on the chief waits for a ps that is not up yet and trains once
    it comes (started 2 s later), instead of failing with UnavailableError."""
    ps_port, w_port = _free_ports(2)
    cluster = {"ps": [f"localhost:{ps_port}"], "worker": [f"localhost:{w_port}"]}
    with _children() as kids:
        target = _start_servers(kids, cluster, [("worker", 0)])[("worker", 0)]
        g = kf.Graph()
        with g.as_default():
            with kf.device("/job:ps/task:0"):
                v = kf.Variable(np.float32(1.0), name="v")
            with kf.device("/job:worker/task:0"):
                step = kf.assign_add(v, 2.0)
            init = kf.global_variables_initializer()
        box = {}

        def train():
            try:
                with kf.Session(target, graph=g) as sess:
                    sess.run(init)
                    box["out"] = [float(sess.run(step)) for _ in range(3)]
            except Exception as e:  # noqa: BLE001 - reported below
                box["error"] = e
        t = threading.Thread(target=train, daemon=True)
        t.start()
        time.sleep(2.0)
        assert t.is_alive() and not box, box          # waiting for the ps, not failed
        started = time.monotonic()
        _start_servers(kids, cluster, [("ps", 0)])
        t.join(30)
        assert not t.is_alive(), "the session did not start once the ps was up"
        assert "error" not in box, repr(box.get("error"))
        assert box["out"] == [3.0, 5.0, 7.0]
        assert time.monotonic() - started < 15

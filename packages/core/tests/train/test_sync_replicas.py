"""`kf.train.SyncReplicasOptimizer`: the graph it builds, its hook, and synchronous training on an
in-process cluster (1 ps + 3 workers, each worker with its own graph and session, run from threads)."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.train import monitored_session
from kernflow.core.train.session_run_hook import SessionRunValues
from kernflow.core.train.sync_replicas_optimizer import SyncReplicasOptimizer

LOGGER = "kernflow.core.train.sync_replicas_optimizer"
LR = 0.1


# Fixed per-worker batches of a linear model y = x w + b.
_rs = np.random.RandomState(0)
X = [_rs.rand(4, 3).astype(np.float32) for _ in range(3)]
Y = [_rs.rand(4, 1).astype(np.float32) for _ in range(3)]
W0 = np.full((3, 1), 0.5, np.float32)


def _linear(task, aggregate=3, total=3, setter=None, base=None):
    """Worker `task`'s graph: (graph, w, b, global_step, optimizer, train_op)."""
    g = kf.Graph()
    with g.as_default(), kf.device(setter):
        w = kf.Variable(W0, name="w")
        b = kf.Variable(np.zeros([1], np.float32), name="b")
        loss = kf.reduce_mean(kf.square(kf.matmul(kf.constant(X[task]), w) + b - kf.constant(Y[task])))
        gs = kf.train.get_or_create_global_step()
        opt = SyncReplicasOptimizer(base or kf.train.GradientDescentOptimizer(LR), aggregate, total)
        train = opt.minimize(loss, global_step=gs)
    return g, w, b, gs, opt, train


# ---------------------------------------------------------------------------- the graph
def _has(graph, key, var) -> bool:
    return any(v is var for v in graph.get_collection(key))


def test_exported_and_the_graph_under_replica_device_setter():
    assert kf.train.SyncReplicasOptimizer is SyncReplicasOptimizer
    setter = kf.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:1")
    g = kf.Graph()
    with g.as_default(), kf.device(setter):
        w = kf.Variable(np.zeros((5, 2), np.float32), name="w")        # ps 0
        emb = kf.Variable(np.zeros((10, 2), np.float32), name="emb")   # ps 1
        gs = kf.train.get_or_create_global_step()                      # ps 0
        loss = kf.reduce_sum(kf.gather(emb, kf.constant([1, 3])) * kf.reduce_sum(w))
        base = kf.train.MomentumOptimizer(0.1, 0.9)
        opt = kf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=2, total_num_replicas=3)
        train = opt.minimize(loss, global_step=gs)
    ops = {op.name: op for op in g.get_operations()}
    local = opt._local_step
    assert local.op.name == "sync_rep_local_step" and local.dtype.base_dtype == kf.int64
    assert local.op.device == "/job:worker/task:1"                     # not on a ps
    assert _has(g, kf.GraphKeys.LOCAL_VARIABLES, local) and not _has(g, kf.GraphKeys.GLOBAL_VARIABLES, local)
    accs = {op.get_attr("shared_name"): op for op in ops.values() if "Accumulator" in op.type
            and op.type.endswith("ConditionalAccumulator")}
    assert accs["w:0/grad_accum"].type == "ConditionalAccumulator"
    assert accs["emb:0/grad_accum"].type == "SparseConditionalAccumulator"  # IndexedSlices gradient
    assert accs["w:0/grad_accum"].device == w.op.device == "/job:ps/task:0"
    assert accs["emb:0/grad_accum"].device == emb.op.device == "/job:ps/task:1"
    token_q = ops["sync_token_q"]
    assert token_q.get_attr("shared_name") == "sync_token_q" and token_q.device == gs.op.device
    assert ops["dummy_queue"].get_attr("shared_name") == "dummy_queue"
    assert train.op.type == "Assign" and train.op.inputs[0].op is local.op
    assert [o.type for o in train.op.inputs[1].op.control_inputs].count("AccumulatorApplyGradient") == 1
    assert opt.chief_init_op.type == "NoOp" and opt.local_step_init_op.op.type == "Assign"
    assert opt.ready_for_local_init_op.dtype == kf.string
    # The wrapped optimizer's slots and variables; the dropped count and its variable.
    assert opt.get_slot(w, "momentum") is base.get_slot(w, "momentum") is not None
    assert opt.get_slot_names() == base.get_slot_names() == ["momentum"]
    assert opt.variables() == base.variables()
    assert opt.dropped_gradients.dtype == kf.int64
    dropped_var = opt.dropped_gradients_variable
    assert dropped_var.op.name == "sync_rep_dropped_gradients" and dropped_var.op.device == gs.op.device
    assert _has(g, kf.GraphKeys.GLOBAL_VARIABLES, dropped_var)
    assert not _has(g, kf.GraphKeys.TRAINABLE_VARIABLES, dropped_var)
    qr = opt.get_chief_queue_runner()
    assert isinstance(qr, kf.train.QueueRunner) and qr.queue.name == "dummy_queue"
    with g.as_default():
        tokens = opt.get_init_tokens_op()
        assert tokens.type == "QueueEnqueueManyV2" and tokens.device == gs.op.device
        assert opt.get_init_tokens_op(0).name.startswith("no_init_tokens")


def test_argument_errors():
    with kf.Graph().as_default():
        w = kf.Variable(1.0, name="w")
        gs = kf.train.get_or_create_global_step()
        opt = SyncReplicasOptimizer(kf.train.GradientDescentOptimizer(0.1), 3, total_num_replicas=1)
        for call in (opt.get_chief_queue_runner, opt.get_init_tokens_op,
                     opt.make_session_run_hook(True).begin, lambda: opt.dropped_gradients):
            with pytest.raises(ValueError, match="apply_gradient"):
                call()
        with pytest.raises(ValueError, match="Global step is required to check staleness"):
            opt.apply_gradients([(kf.constant(1.0), w)])
        with pytest.raises(ValueError, match="Must supply at least one variable"):
            opt.apply_gradients([], global_step=gs)
        opt.apply_gradients([(kf.constant(1.0), w)], global_step=gs)
        with pytest.raises(ValueError, match=r"Too few tokens to finish the first step: 1 \(given\) vs 2"):
            opt.get_init_tokens_op(1)
        with pytest.raises(ValueError, match="at least 1"):
            SyncReplicasOptimizer(kf.train.GradientDescentOptimizer(0.1), 0)


# ---------------------------------------------------------------------------- embedded runs
def test_one_replica_matches_the_wrapped_optimizer_dense_and_sparse():
    def build(sync):
        g = kf.Graph()
        with g.as_default():
            w = kf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 10, name="w")
            emb = kf.Variable(np.ones((5, 2), np.float32), name="emb")
            rows = kf.gather(emb, kf.constant([0, 3, 3]))
            loss = kf.reduce_sum(kf.square(kf.matmul(rows, kf.transpose(w)) - 1.0))
            gs = kf.train.get_or_create_global_step()
            opt = kf.train.MomentumOptimizer(0.01, 0.9)
            if sync:
                opt = SyncReplicasOptimizer(opt, replicas_to_aggregate=1)
            train = opt.minimize(loss, global_step=gs)
        return g, w, emb, gs, opt, train

    g, w, emb, gs, opt, train = build(sync=False)
    with kf.Session(graph=g) as sess:
        sess.run(kf.global_variables_initializer())
        for _ in range(4):
            sess.run(train)
        want = sess.run([w, emb])
    g, w, emb, gs, opt, train = build(sync=True)
    hook = opt.make_session_run_hook(is_chief=True, num_tokens=0)
    with g.as_default():
        sess = kf.train.MonitoredTrainingSession(hooks=[hook], stop_grace_period_secs=0.1)
        tokens = [sess.run(train) for _ in range(4)]      # each step waits for its update
        got = sess.run([w, emb, gs, opt.dropped_gradients])
        sess.close()
    assert tokens == [1, 2, 3, 4] and got[2] == 4 and got[3] == 0
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_hook_on_the_chief_initializes_steps_and_tokens_and_starts_the_queue_runner():
    g, w, b, gs, opt, train = _linear(0, aggregate=2, total=2)
    chief = opt.make_session_run_hook(is_chief=True, num_tokens=2)
    worker = opt.make_session_run_hook(is_chief=False)
    with g.as_default():
        chief.begin()
        worker.begin()
        assert chief._local_init_op is opt.chief_init_op and chief._q_runner is opt.get_chief_queue_runner()
        assert worker._local_init_op is opt.local_step_init_op
        assert worker._q_runner is None and worker._init_tokens_op is None
        size = opt._sync_token_queue.size()
        accum = opt._accumulator_list[0][0]
        stale = accum.apply_grad(np.ones([3, 1], np.float32), local_step=4)
        read_local = opt._local_step.read_value()
    with kf.Session(graph=g) as sess:
        coord = kf.train.Coordinator()
        with pytest.raises(RuntimeError, match="Init operations did not make model ready for "
                           "SyncReplicasOptimizer local_init. Init op: .*error: Variables not "
                           "initialized: w, b"):
            chief.after_create_session(sess, coord)
        sess.run(kf.global_variables_initializer())
        sess.run(kf.local_variables_initializer())
        sess.run(gs.assign(5))
        chief.after_create_session(sess, coord)
        assert sess.run([read_local, size]) == [5, 2]          # local step = global step; 2 tokens
        sess.run(stale)                                        # the accumulator's global step is 5
        assert sess.run(opt.dropped_gradients) == 1
        threads = [t for t in threading.enumerate() if t.name.startswith("QueueRunner-dummy_queue")]
        assert threads and all(t.daemon for t in threads)
        coord.request_stop()
    coord.join(stop_grace_period_secs=5)                       # the closed session cancels the take
    assert not any(t.is_alive() for t in threads)


def test_chief_hook_drains_old_tokens_at_session_start_and_releases_workers_at_the_end(caplog):
    g, w, b, gs, opt, train = _linear(0, aggregate=2, total=3)
    chief = opt.make_session_run_hook(is_chief=True, num_tokens=0)
    with g.as_default():
        chief.begin()
        queue = opt._sync_token_queue
        size = queue.size()
        old = queue.enqueue_many(([40, 40],))
        take = queue.dequeue()
    with kf.Session(graph=g) as sess:
        sess.run([kf.global_variables_initializer(), kf.local_variables_initializer()])
        sess.run(old)                       # tokens of an earlier session (global step 40)
        sess.run(gs.assign(5))
        coord = kf.train.Coordinator()
        with caplog.at_level(logging.INFO, logger=LOGGER):
            chief.after_create_session(sess, coord)
        assert sess.run(size) == 0          # drained; num_tokens=0 adds none
        assert "dropped 2 tokens left by an earlier session" in caplog.text
        sess.run(gs.assign(9))
        chief.end(sess)                     # one token per replica, holding the final step
        assert sess.run(size) == 3 and sess.run(take) == 9
        coord.request_stop()
    coord.join(stop_grace_period_secs=5)


def test_hook_on_a_worker_sets_the_local_step_only():
    g, w, b, gs, opt, train = _linear(1, aggregate=2, total=2)
    hook = opt.make_session_run_hook(is_chief=False)
    with g.as_default():
        hook.begin()
        size = opt._sync_token_queue.size()
        read_local = opt._local_step.read_value()
    with kf.Session(graph=g) as sess:
        sess.run([kf.global_variables_initializer(), kf.local_variables_initializer()])
        sess.run(gs.assign(7))
        coord = kf.train.Coordinator()
        hook.after_create_session(sess, coord)
        assert sess.run([read_local, size]) == [7, 0]
        coord.request_stop()
        coord.join()                                           # no thread was started


def test_chief_hook_logs_the_dropped_count_every_n_steps_when_it_grew(caplog):
    g, w, b, gs, opt, train = _linear(0)
    hook = opt.make_session_run_hook(is_chief=True, log_dropped_every_n_steps=2)
    worker_hook = opt.make_session_run_hook(is_chief=False, log_dropped_every_n_steps=2)
    asked = [hook.before_run(None) for _ in range(4)]
    assert [a is None for a in asked] == [True, False, True, False]
    assert asked[1].fetches is opt.dropped_gradients
    assert worker_hook.before_run(None) is None and worker_hook.before_run(None) is None
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for dropped in (None, 0, 3, 3, 5):
            hook.after_run(None, SessionRunValues(results=dropped, options=None, run_metadata=None))
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert lines == ["SyncReplicasOptimizer: 3 stale gradients dropped so far",
                     "SyncReplicasOptimizer: 5 stale gradients dropped so far"]


def test_a_tf1_supervisor_script():
    g, w, b, gs, opt, train = _linear(0, aggregate=1, total=1)
    with g.as_default():
        init_tokens = opt.get_init_tokens_op()
        chief_qr = opt.get_chief_queue_runner()
        sv = kf.train.Supervisor(is_chief=True, local_init_op=opt.chief_init_op,
                                 ready_for_local_init_op=opt.ready_for_local_init_op,
                                 recovery_wait_secs=0.1, stop_grace_secs=0.1, save_model_secs=0)
    sess = sv.prepare_or_wait_for_session("")
    sv.start_queue_runners(sess, [chief_qr])
    sess.run(init_tokens)
    for _ in range(3):
        sess.run(train)
    assert sess.run(gs) >= 2
    sess.close()       # cancels the chief thread's take, which waits for the next gradients
    sv.stop()


# ---------------------------------------------------------------------------- in-process cluster
@pytest.fixture
def cluster():
    """1 ps + 3 worker `kf.train.Server`s in this process: (ClusterSpec, [worker servers])."""
    for module in ("kernflow.client.worker_client", "kernflow.master.master", "kernflow.worker.worker"):
        pytest.importorskip(module, reason="kernflow-client/master/worker not installed")
    from kernflow.core.testing.processes import free_ports
    ports = free_ports(4)
    spec = kf.train.ClusterSpec({"ps": [f"localhost:{ports[0]}"],
                                 "worker": [f"localhost:{p}" for p in ports[1:]]})
    servers = [kf.train.Server(spec, job_name="ps", task_index=0)]
    try:
        servers += [kf.train.Server(spec, job_name="worker", task_index=i) for i in range(3)]
        yield spec, servers[1:]
    finally:
        for s in servers:
            s.stop()


@pytest.fixture
def fast_worker_wait(monkeypatch):
    """Non-chief monitored sessions poll the chief every 0.05 s (TF: 30 s)."""
    monkeypatch.setattr(monitored_session._ScaffoldSessionCreator, "_recovery_wait_secs", 0.05)


def _session(graph, server, task, hook, hooks=()):
    with graph.as_default():
        return kf.train.MonitoredTrainingSession(master=server.target, is_chief=task == 0,
                                                 hooks=[hook, *hooks], stop_grace_period_secs=0.2,
                                                 save_checkpoint_secs=None, max_wait_secs=30)


def _run_threads(fns, timeout=30):
    """Runs each fn in a thread; returns their results; raises the first error."""
    out, threads = [None] * len(fns), []
    for i, fn in enumerate(fns):
        def target(i=i, fn=fn):
            try:
                out[i] = ("ok", fn())
            except BaseException as e:  # noqa: BLE001 - handed to the test
                out[i] = ("err", e)
        threads.append(threading.Thread(target=target, daemon=True))
        threads[-1].start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a worker hung"
    for r in out:
        if r[0] == "err":
            raise r[1]
    return [r[1] for r in out]


def _numpy_sync_steps(k):
    """k steps applying the mean of the three workers' gradients, in float32."""
    w, b = W0.copy(), np.zeros([1], np.float32)
    for _ in range(k):
        gw, gb = [], []
        for x, y in zip(X, Y):
            r = x @ w + b - y
            gw.append(np.float32(2.0) * x.T @ r / np.float32(len(x)))
            gb.append(np.array([np.float32(2.0) * r.mean()], np.float32))
        w = w - np.float32(LR) * np.mean(gw, 0, dtype=np.float32)
        b = b - np.float32(LR) * np.mean(gb, 0, dtype=np.float32)
    return w, b


def test_three_workers_apply_the_mean_of_their_gradients_each_step(cluster, fast_worker_wait):
    spec, servers = cluster
    k = 5
    built = [_linear(i, setter=kf.train.replica_device_setter(
        cluster=spec, worker_device=f"/job:worker/task:{i}")) for i in range(3)]

    def worker(task):
        g, w, b, gs, opt, train = built[task]
        # No initial tokens: every step then waits for all three gradients of that step.
        sess = _session(g, servers[task], task, opt.make_session_run_hook(task == 0, num_tokens=0))
        try:
            tokens = [int(sess.run(train)) for _ in range(k)]
            return tokens, sess.run([w, b, gs])
        finally:
            sess.close()

    results = _run_threads([lambda t=t: worker(t) for t in range(3)])
    want_w, want_b = _numpy_sync_steps(k)
    for tokens, (w, b, gs) in results:
        assert tokens == list(range(1, k + 1)) and gs == k
        np.testing.assert_allclose(w, want_w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b, want_b, rtol=1e-5, atol=1e-6)


def test_backup_worker_straggler_is_dropped_and_counted(cluster, fast_worker_wait, caplog):
    spec, servers = cluster
    sleep_s, straggler = 2.0, 2
    built = [_linear(i, aggregate=2, total=3, setter=kf.train.replica_device_setter(
        cluster=spec, worker_device=f"/job:worker/task:{i}")) for i in range(3)]
    with built[0][0].as_default():
        release = built[0][4].get_init_tokens_op(num_tokens=3)   # lets waiting workers finish
    stop = threading.Event()
    chief_steps, straggler_steps, finished = [], [], []

    def worker(task):
        g, w, b, gs, opt, train = built[task]
        sess = _session(g, servers[task], task,
                        opt.make_session_run_hook(task == 0, log_dropped_every_n_steps=1))
        try:
            while not stop.is_set():
                if task == straggler:
                    if stop.wait(sleep_s):
                        break
                    local, global_now = sess.run([opt._local_step, gs])
                    straggler_steps.append((int(local), int(global_now)))
                step = int(sess.run(train))
                if task == 0:
                    chief_steps.append((time.monotonic(), step))
            finished.append(task)
            if task == 0:
                return sess.run([opt.dropped_gradients, opt.dropped_gradients_variable, gs])
        finally:
            sess.close()

    def main():
        deadline = time.monotonic() + 30
        while len(straggler_steps) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        # A worker's last step may wait for a step the others, stopping, will not complete.
        with kf.Session(servers[0].target, graph=built[0][0]) as sess:
            while len(finished) < 3 and time.monotonic() < deadline + 10:
                sess.run(release)
                time.sleep(0.05)

    with caplog.at_level(logging.INFO, logger=LOGGER):
        results = _run_threads([lambda t=t: worker(t) for t in range(3)] + [main])
    dropped, dropped_var, global_step = results[0]
    # The chief's steps come at the fast workers' pace, not the straggler's.
    gaps = np.diff([t for t, _ in chief_steps])
    assert len(straggler_steps) >= 2 and global_step >= 10
    assert np.median(gaps) < sleep_s / 4, (np.median(gaps), chief_steps[-5:])
    # Each straggler gradient was computed at a local step the global step had passed: dropped,
    # by both accumulators (w and b), and counted.
    assert all(local < now for local, now in straggler_steps), straggler_steps
    assert dropped >= 2 * len(straggler_steps)
    assert 0 < dropped_var <= dropped                 # set by the chief's last sync step
    logged = [r.getMessage() for r in caplog.records
              if r.name == LOGGER and r.getMessage().endswith("stale gradients dropped so far")]
    assert logged, "the chief's hook logged no dropped-gradient count"

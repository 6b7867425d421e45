"""CUDA-graph capture and replay of GPU steps (kernflow/kernels/gpu/capture.py, blas.py, and
runtime/replay.py on a real GPU): replayed training equals eager training, what invalidates a
capture, what stays eager, concurrency."""

import threading

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

from kernflow.kernels.gpu.device import visible_gpus  # noqa: E402 - 0 without cupy or a GPU

if not visible_gpus():
    pytest.skip("no GPU: cupy or a CUDA device is missing", allow_module_level=True)
import cupy  # noqa: E402

import kernflow.core as kf  # noqa: E402
from kernflow.core.runtime import replay  # noqa: E402
from kernflow.kernels.gpu import blas  # noqa: E402


# ------------------------------------------------------------------ cuBLAS called directly
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("m,k,n", [(5, 7, 3), (1, 9, 1), (64, 1, 33), (0, 4, 3), (3, 0, 2),
                                   (257, 129, 65)])
def test_gemm_matches_numpy(dtype, ta, tb, m, k, n):
    rng = np.random.RandomState(m * 100 + k * 10 + n)
    a = rng.randn(*((k, m) if ta else (m, k))).astype(dtype)
    b = rng.randn(*((n, k) if tb else (k, n))).astype(dtype)
    x = cupy.asarray(a).T if ta else cupy.asarray(a)
    y = cupy.asarray(b).T if tb else cupy.asarray(b)
    got = blas.gemm(x, y)
    assert got is not None and got.shape == (m, n) and got.dtype == dtype
    want = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    np.testing.assert_allclose(cupy.asnumpy(got), want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-12)


def test_gemm_of_strided_views_and_unhandled_dtypes():
    a = cupy.arange(60, dtype=cupy.float32).reshape(6, 10)[:, ::2]     # neither C nor F order
    b = cupy.ones((5, 4), cupy.float32)
    np.testing.assert_allclose(cupy.asnumpy(blas.gemm(a, b)), cupy.asnumpy(a).dot(np.ones((5, 4))))
    assert blas.gemm(a.astype(cupy.float16), b.astype(cupy.float16)) is None
    assert blas.gemm(a, b.astype(cupy.float64)) is None


# ------------------------------------------------------------------ replayed steps
def _mlp(optimizer="sgd", lr=0.05):
    rng = np.random.RandomState(0)
    g = kf.Graph()
    with g.as_default(), kf.device("/gpu:0"):
        x = kf.placeholder(kf.float32, [None, 16], name="x")
        y = kf.placeholder(kf.int64, [None], name="y")
        h = x
        sizes = (16, 32, 32, 4)
        ws = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            w = kf.Variable((rng.randn(a, b) * 0.3).astype(np.float32), name=f"w{i}")
            ws.append(w)
            h = kf.matmul(h, w) + kf.Variable(np.zeros(b, np.float32), name=f"b{i}")
            if i < 2:
                h = kf.nn.relu(h)
        loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        opt = {"sgd": kf.train.GradientDescentOptimizer(lr), "momentum": kf.train.MomentumOptimizer(lr, 0.9),
               "adam": kf.train.AdamOptimizer(lr * 0.1)}[optimizer]
        train = opt.minimize(loss)
        init = kf.global_variables_initializer()
    return g, x, y, loss, train, init, ws


def _batches(n, batch=64):
    rng = np.random.RandomState(1)
    return [(rng.randn(batch, 16).astype(np.float32), rng.randint(0, 4, batch).astype(np.int64))
            for _ in range(n)]


def _train(optimizer, steps, monkeypatch, graphs, feed_cupy=False):
    monkeypatch.setenv("KERNFLOW_STEP_GRAPHS", "1" if graphs else "0")
    # Whether a step is launch-bound is timed in its warm-up; a loaded machine (tests in parallel)
    # must not turn these small steps eager: what is tested here is replay against eager.
    monkeypatch.setattr(replay, "LAUNCH_BOUND_S_PER_KERNEL", 1.0)
    g, x, y, loss, train, init, ws = _mlp(optimizer)
    with kf.Session(graph=g) as s:
        s.run(init)
        step = s.make_callable([train, loss], feed_list=[x, y])
        losses = []
        for xb, yb in _batches(steps):
            if feed_cupy:
                xb, yb = cupy.asarray(xb), cupy.asarray(yb)
            losses.append(float(step(xb, yb)[1]))
        runners = [st.replay for st in s._impl._steps.values() if st.replay is not None]
        status = [set(r.status.values()) for r in runners]
        return losses, s.run(ws), status


@pytest.mark.parametrize("optimizer", ["sgd", "momentum"])
@pytest.mark.parametrize("feed_cupy", [False, True])
def test_replayed_training_equals_eager_training(optimizer, feed_cupy, monkeypatch):
    eager, w_eager, _ = _train(optimizer, 12, monkeypatch, graphs=False)
    replayed, w_replayed, status = _train(optimizer, 12, monkeypatch, graphs=True, feed_cupy=feed_cupy)
    assert {"captured"} in status, status   # the training step; the initializer ran once
    np.testing.assert_allclose(replayed, eager, rtol=1e-5)
    for a, b in zip(w_replayed, w_eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_adam_steps_train_correctly_whether_or_not_they_are_captured(monkeypatch):
    eager, w_eager, _ = _train("adam", 8, monkeypatch, graphs=False)
    replayed, w_replayed, _ = _train("adam", 8, monkeypatch, graphs=True)
    np.testing.assert_allclose(replayed, eager, rtol=1e-5)
    for a, b in zip(w_replayed, w_eager):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("feed_cupy", [False, True])
def test_scalar_feeds_and_uploaded_scalars_keep_their_shapes(feed_cupy, monkeypatch):
    monkeypatch.setenv("KERNFLOW_STEP_GRAPHS", "1")
    g = kf.Graph()
    with g.as_default(), kf.device("/gpu:0"):
        x = kf.placeholder(kf.float32, [4], name="x")
        s = kf.placeholder(kf.float32, [], name="s")
        y = kf.maximum(x, s)
        m = kf.reduce_mean(y)                        # its gradient divides by a host-computed size
        dx = kf.gradients(m, x)[0]
    xv = np.array([-1.0, 0.5, 2.0, -3.0], np.float32)
    with kf.Session(graph=g) as sess:
        for i in range(6):
            sv = np.float32(i * 0.25)
            feed = {x: cupy.asarray(xv) if feed_cupy else xv, s: cupy.asarray(sv) if feed_cupy else sv}
            yv, mv, dv = sess.run([y, m, dx], feed)
            assert yv.shape == (4,) and np.shape(mv) == () and dv.shape == (4,)
            np.testing.assert_allclose(yv, np.maximum(xv, sv))
            np.testing.assert_allclose(mv, np.maximum(xv, sv).mean(), rtol=1e-6)
            np.testing.assert_allclose(dv, np.where(xv >= sv, 0.25, 0.0))
        runners = [st.replay for st in sess._impl._steps.values() if st.replay is not None]
    # Replayed or not, the values and shapes above are right. On the H100 (2026-11-24) this step
    # stayed eager (not diagnosed yet; likely a generic kernel of Maximum's gradient uploading a
    # host shape while recording, which cupy refuses). A step that stays eager says why.
    for r in runners:
        for sig, status in r.status.items():
            assert status == "captured" or status == "warming up" or r.reasons.get(sig), r.status


def test_restore_after_capture_is_seen_by_the_replays(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNFLOW_STEP_GRAPHS", "1")
    g, x, y, loss, train, init, ws = _mlp()
    with g.as_default():
        saver = kf.train.Saver()
    data = _batches(1)[0]
    with kf.Session(graph=g) as s:
        s.run(init)
        path = saver.save(s, str(tmp_path / "m"))
        first = [s.run([train, loss], dict(zip((x, y), data)))[1] for _ in range(6)]
        saver.restore(s, path)
        again = [s.run([train, loss], dict(zip((x, y), data)))[1] for _ in range(6)]
    np.testing.assert_allclose(again, first, rtol=1e-6)


def test_evaluation_and_training_steps_are_captured_separately(monkeypatch):
    monkeypatch.setenv("KERNFLOW_STEP_GRAPHS", "1")
    g, x, y, loss, train, init, ws = _mlp()
    data = _batches(4)
    with kf.Session(graph=g) as s:
        s.run(init)
        for i in range(8):
            xb, yb = data[i % 4]
            ev = s.run(loss, {x: xb, y: yb})
            tr = s.run([train, loss], {x: xb, y: yb})[1]
            assert ev == pytest.approx(tr, rel=1e-6)   # same weights before the update
        runners = [st.replay for st in s._impl._steps.values() if st.replay is not None]
        statuses = [set(r.status.values()) for r in runners]
    assert statuses.count({"captured"}) >= 2, (statuses, [r.reasons for r in runners])


def test_concurrent_callers_of_a_captured_step_get_their_own_results(monkeypatch):
    monkeypatch.setenv("KERNFLOW_STEP_GRAPHS", "1")
    g = kf.Graph()
    with g.as_default(), kf.device("/gpu:0"):
        x = kf.placeholder(kf.float32, [256, 64], name="x")
        w = kf.constant(np.random.RandomState(0).randn(64, 64).astype(np.float32))
        y = kf.reduce_sum(kf.nn.relu(kf.matmul(x, w)), axis=1)
    rng = np.random.RandomState(2)
    inputs = [rng.randn(256, 64).astype(np.float32) for _ in range(8)]
    wv = np.random.RandomState(0).randn(64, 64).astype(np.float32)
    want = [np.maximum(v @ wv, 0).sum(axis=1) for v in inputs]
    errors = []
    with kf.Session(graph=g) as s:
        for v in inputs[:3]:
            s.run(y, {x: v})   # warm up and capture

        def worker(k):
            try:
                for _ in range(30):
                    i = (k * 3 + _) % 8
                    np.testing.assert_allclose(s.run(y, {x: inputs[i]}), want[i], rtol=1e-4, atol=1e-3)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[0]


def test_other_gpu_work_while_a_step_is_captured(monkeypatch):
    """Eager GPU work on another thread (cupy on the default stream) while a step is recorded:
    both give right answers (the recording may fail and the step stay eager)."""
    monkeypatch.setenv("KERNFLOW_STEP_GRAPHS", "1")
    g, x, y, loss, train, init, ws = _mlp()
    stop = threading.Event()
    errors = []
    a = cupy.asarray(np.random.RandomState(3).randn(128, 128).astype(np.float32))
    want = float(cupy.asnumpy(a @ a).sum())

    def busy():
        try:
            while not stop.is_set():
                got = float((a @ a).sum())
                assert got == pytest.approx(want, rel=1e-4)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    eager, _, _ = _train("sgd", 10, monkeypatch, graphs=False)
    t = threading.Thread(target=busy)
    t.start()
    try:
        replayed, _, _ = _train("sgd", 10, monkeypatch, graphs=True)
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]
    np.testing.assert_allclose(replayed, eager, rtol=1e-5)

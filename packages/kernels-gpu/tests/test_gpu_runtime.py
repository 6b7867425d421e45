"""The GPU device in the runtime: placement, memory, feeds and fetches, errors, checkpoints."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

pytestmark = pytest.mark.gpu

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def _placement(sess, fetches, feed=None):
    opts = kf.RunOptions(output_partition_graphs=True)
    md = kf.RunMetadata()
    out = sess.run(fetches, feed, options=opts, run_metadata=md)
    where = {n.name: n.device for p in md.partition_graphs for n in p.node}
    return out, where


def test_list_devices_has_a_gpu():
    with kf.Session(graph=kf.Graph()) as s:
        devs = s.list_devices()
    gpus = [d for d in devs if d.device_type == "GPU"]
    assert gpus and gpus[0].memory_limit_bytes > 2**30


def test_placement_prefers_gpu_and_variables_live_there():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 8], name="x")
        w = kf.Variable(np.ones((8, 4), np.float32), name="w")
        y = kf.nn.relu(kf.matmul(x, w), name="y")
        loss = kf.reduce_mean(kf.square(y), name="loss")
        train = kf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with kf.Session(graph=g) as s:
        s.run(kf.variables_initializer([w]) if hasattr(kf, "variables_initializer") else w.initializer)
        (lv, _), where = _placement(s, [loss, train], {x: np.ones((2, 8), np.float32)})
    assert isinstance(lv, np.floating) or isinstance(lv, np.ndarray)
    np.testing.assert_allclose(lv, 64.0)
    assert where["w"] == GPU0 and where["y"] == GPU0 and where["loss"] == GPU0
    assert where["MatMul"] == GPU0


def test_fetches_are_numpy_and_feeds_may_be_cupy():
    import cupy
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [3])
        y = x * 2.0
    with kf.Session(graph=g) as s:
        a = s.run(y, {x: np.arange(3, dtype=np.float32)})
        b = s.run(y, {x: cupy.arange(3, dtype=cupy.float32)})
    assert type(a) is np.ndarray and type(b) is np.ndarray
    np.testing.assert_array_equal(a, [0, 2, 4])
    np.testing.assert_array_equal(b, [0, 2, 4])


def test_cpu_and_gpu_ops_exchange_tensors():
    g = kf.Graph()
    with g.as_default():
        with kf.device("/cpu:0"):
            a = kf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
            b = a + 1.0
        with kf.device("/gpu:0"):
            c = kf.matmul(b, b, transpose_b=True)
        with kf.device("/cpu:0"):
            d = c - 1.0
    with kf.Session(graph=g) as s:
        out, where = _placement(s, d)
    bb = np.arange(6, dtype=np.float32).reshape(2, 3) + 1
    np.testing.assert_allclose(out, bb @ bb.T - 1)
    assert any(n.startswith("_recv") and dev == GPU0 for n, dev in where.items())
    assert any(n.startswith("_recv") and dev == CPU0 for n, dev in where.items())


def test_int32_shape_arithmetic_stays_on_host_memory():
    g = kf.Graph()
    with g.as_default(), kf.device("/gpu:0"):
        x = kf.placeholder(kf.float32, [None, None])
        n = kf.shape(x)[0] * 2 + 1
        y = kf.reshape(x, [-1]) * kf.cast(n, kf.float32)
    with kf.Session(graph=g) as s:
        out = s.run([n, y], {x: np.ones((2, 3), np.float32)})
    assert out[0] == 5
    np.testing.assert_allclose(out[1], np.full(6, 5.0))


def test_out_of_memory_is_resource_exhausted_and_session_survives():
    g = kf.Graph()
    with g.as_default(), kf.device("/gpu:0"):
        n = kf.placeholder(kf.int32, [])
        big = kf.zeros(kf.stack([n, 1024, 1024]), kf.float32, name="big")  # n * 4 MiB
        total = kf.reduce_sum(big, name="total")
    with kf.Session(graph=g) as s:
        with pytest.raises(errors.ResourceExhaustedError) as ei:
            s.run(total, {n: 1 << 20})  # 4 TiB
        msg = str(ei.value)
        assert "big" in msg and "bytes" in msg
        assert s.run(total, {n: 2}) == 0.0


def test_log_device_placement_says_why_an_op_is_on_cpu(capsys, tmp_path):
    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(np.ones(3, np.float32), name="v")
        saver = kf.train.Saver([v])
    cfg = kf.ConfigProto(log_device_placement=True)
    with kf.Session(graph=g, config=cfg) as s:
        s.run(v.initializer)
        saver.save(s, str(tmp_path / "ckpt"))
    err = capsys.readouterr().err
    save_lines = [line for line in err.splitlines() if "(SaveV2)" in line]
    assert save_lines and "CPU:0" in save_lines[0] and "no GPU kernel" in save_lines[0]
    assert any(line.startswith("v: (VariableV2)") and "GPU:0" in line for line in err.splitlines())


def test_checkpoint_round_trip_of_gpu_variables(tmp_path):
    g = kf.Graph()
    with g.as_default(), kf.device("/gpu:0"):
        v = kf.Variable(np.arange(4, dtype=np.float32), name="v")
        inc = kf.assign_add(v, np.ones(4, np.float32))
        saver = kf.train.Saver([v])
    with kf.Session(graph=g) as s:
        s.run(v.initializer)
        s.run(inc)
        path = saver.save(s, str(tmp_path / "m"))
        s.run(inc)
        saver.restore(s, path)
        np.testing.assert_array_equal(s.run(v), np.arange(4) + 1.0)


def test_training_on_gpu_matches_cpu():
    def train(device):
        g = kf.Graph()
        with g.as_default(), kf.device(device):
            rng = np.random.RandomState(0)
            x = kf.constant(rng.randn(32, 5).astype(np.float32))
            y = kf.constant(rng.randint(0, 3, 32).astype(np.int64))
            w = kf.Variable(rng.randn(5, 3).astype(np.float32) * 0.1)
            b = kf.Variable(np.zeros(3, np.float32))
            logits = kf.matmul(x, w) + b
            loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            step = kf.train.AdamOptimizer(0.05).minimize(loss)
            init = kf.global_variables_initializer()
        with kf.Session(graph=g) as s:
            s.run(init)
            for _ in range(20):
                s.run(step)
            return s.run([loss, w])
    (lg, wg), (lc, wc) = train("/gpu:0"), train("/cpu:0")
    np.testing.assert_allclose(lg, lc, rtol=1e-4)
    np.testing.assert_allclose(wg, wc, rtol=1e-4, atol=1e-5)


def test_worker_offers_its_gpu_to_the_master():
    from kernflow.core.testing.processes import free_ports
    port = free_ports(1)[0]
    cluster = {"worker": [f"localhost:{port}"]}
    server = kf.train.Server(cluster, job_name="worker", task_index=0)
    try:
        g = kf.Graph()
        with g.as_default():
            with kf.device("/job:worker/task:0/device:GPU:0"):
                a = kf.constant(np.eye(3, dtype=np.float32) * 2)
                b = kf.matmul(a, a)
        with kf.Session(server.target, graph=g) as s:
            names = [d.name for d in s.list_devices()]
            assert "/job:worker/replica:0/task:0/device:GPU:0" in names
            np.testing.assert_allclose(s.run(b), np.eye(3) * 4)
    finally:
        server.stop()


# ------------------------------------------------ found by the session-16 run of the core suite on a GPU
def test_string_tensors_are_placed_on_the_cpu_and_uninitialized_variables_are_reported():
    # report_uninitialized_variables gathers variable names (strings) with a boolean mask: the
    # string GatherV2 has no GPU kernel (as in TF) and must not be handed object arrays on the GPU.
    g = kf.Graph()
    with g.as_default():
        a = kf.Variable(np.ones(3, np.float32), name="a")
        kf.Variable(np.zeros(2, np.float32), name="b")
        report = kf.report_uninitialized_variables()
        names = kf.constant(["x", "y", "z"])
        picked = kf.gather(names, kf.constant([2, 0]))
    with kf.Session(graph=g) as s:
        s.run(a.initializer)
        (left, got), where = _placement(s, [report, picked])
    assert [n.decode() for n in left] == ["b"]
    assert [n.decode() for n in got] == ["z", "x"]
    assert where[picked.op.name].endswith("CPU:0")


def test_scatter_sub_and_batch_matmul_of_floats_on_the_gpu():
    # (cupy's subtract.at takes int32/uint32 only; the CPU BatchMatMulV2 kernel is numpy-only)
    g = kf.Graph()
    with g.as_default(), kf.device("/gpu:0"):
        v = kf.Variable(np.full((4, 2), 10.0, np.float32))
        sub = kf.scatter_sub(v, [0, 2, 0], np.ones((3, 2), np.float32))
        x = kf.constant(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
        y = kf.constant(np.arange(24, dtype=np.float32).reshape(2, 4, 3))
        bmm = kf.matmul(x, y)
        bmm_t = kf.matmul(x, x, transpose_b=True)
    with kf.Session(graph=g) as s:
        s.run(v.initializer)
        (got, prod, prod_t), where = _placement(s, [sub, bmm, bmm_t])
    np.testing.assert_array_equal(got, [[8, 8], [10, 10], [9, 9], [10, 10]])
    xv = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_allclose(prod, xv @ np.arange(24, dtype=np.float32).reshape(2, 4, 3), rtol=1e-6)
    np.testing.assert_allclose(prod_t, xv @ xv.transpose(0, 2, 1), rtol=1e-6)
    assert where[bmm.op.name] == GPU0 and where[sub.op.name] == GPU0

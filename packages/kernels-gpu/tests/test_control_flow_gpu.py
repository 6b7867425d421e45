"""Dynamic control flow and queues with ops on the GPU: values and gradients against the CPU.

The control-flow primitives run in the executor on every device type (predicates in host memory);
these tests place loop bodies, branches and their gradients on /device:GPU:0 and compare with the
same graph on the CPU.
"""

import numpy as np
import pytest

import kernflow.core as kf

pytestmark = pytest.mark.gpu


def _build(device):
    g = kf.Graph()
    with g.as_default(), kf.device(device):
        x = kf.placeholder(kf.float32, [4, 4], name="x")
        w = kf.constant(np.random.RandomState(0).randn(4, 4).astype(np.float32) * 0.5)
        n = kf.placeholder(kf.int32, [], name="n")

        def body(i, h):
            h = kf.tanh(kf.matmul(h, w))
            h = kf.cond(kf.reduce_sum(h) > 0.0, lambda: h * 1.5, lambda: h - 0.25)
            return i + 1, h
        _, h = kf.while_loop(lambda i, h: i < n, body, [kf.constant(0), x], parallel_iterations=4)
        loss = kf.reduce_sum(kf.square(h))
        dx = kf.gradients(loss, x)[0]
        ta = kf.TensorArray(kf.float32, size=n)
        _, ta = kf.while_loop(lambda i, t: i < n,
                              lambda i, t: (i + 1, t.write(i, kf.reduce_sum(x) * kf.cast(i, kf.float32))),
                              [kf.constant(0), ta])
        stacked = ta.stack()
    return g, (x, n), (h, dx, stacked)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_loop_with_cond_and_gradients_on_gpu_match_cpu(n):
    xv = np.random.RandomState(1).randn(4, 4).astype(np.float32)
    results = {}
    for dev in ("/cpu:0", "/gpu:0"):
        g, (x, nn), fetches = _build(dev)
        with kf.Session(graph=g, config=kf.ConfigProto(allow_soft_placement=True)) as s:
            results[dev] = s.run(fetches, {x: xv, nn: n})
    for a, b in zip(results["/cpu:0"], results["/gpu:0"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_loop_body_runs_on_the_gpu():
    g, (x, nn), (h, _, _) = _build("/gpu:0")
    opts = kf.RunOptions(output_partition_graphs=True)
    md = kf.RunMetadata()
    with kf.Session(graph=g, config=kf.ConfigProto(allow_soft_placement=True)) as s:
        s.run(h, {x: np.ones((4, 4), np.float32), nn: 3}, options=opts, run_metadata=md)
    where = {nd.name: nd.device for p in md.partition_graphs for nd in p.node}
    assert where["while/MatMul"].endswith("GPU:0")
    assert where["while/LoopCond"].endswith("GPU:0")


def test_queue_feeds_a_gpu_step():
    g = kf.Graph()
    with g.as_default():
        q = kf.FIFOQueue(8, kf.float32, shapes=[[4]])
        enq = q.enqueue_many(kf.constant(np.arange(16, dtype=np.float32).reshape(4, 4)))
        with kf.device("/gpu:0"):
            y = kf.reduce_sum(q.dequeue_many(2) * 2.0)
    with kf.Session(graph=g, config=kf.ConfigProto(allow_soft_placement=True)) as s:
        s.run(enq)
        assert s.run(y) == pytest.approx(2.0 * np.arange(8).sum())

"""Training-step benchmark: the digits MLP (64-128-128-10, ReLU, softmax cross entropy, SGD).

Side by side in one run: kernflow's embedded runtime, a hand-written numpy forward/backward/update
(the floor for numpy kernels), and TensorFlow / PyTorch when installed. Prints JSON: median step
time per batch size and the ratio to the numpy floor; also the peak memory of a deep MLP step with
and without freeing intermediates after their last use.

Usage: python tools/bench_training.py [--batches 64 512] [--steps 300] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

SIZES = [64, 128, 128, 10]
LR = 0.05


def _data(batch, seed=0):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    rng = np.random.RandomState(seed)
    batches = []
    for _ in range(16):
        idx = rng.randint(0, len(x), size=batch)
        batches.append((x[idx], y[idx]))
    return batches


def _init(seed=0):
    rng = np.random.RandomState(seed)
    ws = [(rng.randn(a, b) * np.sqrt(2.0 / a)).astype(np.float32) for a, b in zip(SIZES[:-1], SIZES[1:])]
    bs = [np.zeros(b, np.float32) for b in SIZES[1:]]
    return ws, bs


def _time_steps(step, batches, steps, repeats):
    for i in range(20):
        step(*batches[i % len(batches)])
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for i in range(steps):
            step(*batches[i % len(batches)])
        out.append((time.perf_counter() - t) / steps)
    return statistics.median(out)


def numpy_step_fn():
    ws, bs = _init()
    lr = np.float32(LR)

    def step(x, y):
        acts, pre = [x], []
        h = x
        for i, (w, b) in enumerate(zip(ws, bs)):
            z = h @ w
            z += b
            pre.append(z)
            h = np.maximum(z, 0) if i < len(ws) - 1 else z
            acts.append(h)
        logits = acts[-1]
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        s = e.sum(axis=1, keepdims=True)
        p = e / s
        n = x.shape[0]
        loss = float(np.mean(np.log(s[:, 0]) + m[:, 0] - logits[np.arange(n), y]))
        g = p
        g[np.arange(n), y] -= 1
        g /= n
        for i in range(len(ws) - 1, -1, -1):
            dw = acts[i].T @ g
            db = g.sum(axis=0)
            if i:
                g = g @ ws[i].T
                g *= pre[i - 1] > 0
            ws[i] -= lr * dw
            bs[i] -= lr * db
        return loss
    return step


def kernflow_step_fn():
    import kernflow.core as kf
    ws, bs = _init()
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 64])
        y = kf.placeholder(kf.int64, [None])
        h = x
        for i, (w0, b0) in enumerate(zip(ws, bs)):
            w, b = kf.Variable(w0), kf.Variable(b0)
            h = kf.matmul(h, w) + b
            if i < len(ws) - 1:
                h = kf.nn.relu(h)
        loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = kf.train.GradientDescentOptimizer(LR).minimize(loss)
        init = kf.global_variables_initializer()
    sess = kf.Session(graph=g)
    sess.run(init)
    fn = sess.make_callable([train, loss], feed_list=[x, y])
    return lambda xb, yb: fn(xb, yb)[1], sess


def tensorflow_step_fn():
    try:
        import tensorflow.compat.v1 as tf
    except ImportError:
        return None
    tf.disable_eager_execution()
    ws, bs = _init()
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 64])
        y = tf.placeholder(tf.int64, [None])
        h = x
        for i, (w0, b0) in enumerate(zip(ws, bs)):
            h = tf.matmul(h, tf.Variable(w0)) + tf.Variable(b0)
            if i < len(ws) - 1:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        train = tf.train.GradientDescentOptimizer(LR).minimize(loss)
        init = tf.global_variables_initializer()
    sess = tf.Session(graph=g)
    sess.run(init)
    fn = sess.make_callable([train, loss], feed_list=[x, y])
    return lambda xb, yb: fn(xb, yb)[1]


def torch_step_fn():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(2)
    ws, bs = _init()
    params = []
    for w, b in zip(ws, bs):
        params += [torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)]
    opt = torch.optim.SGD(params, lr=LR)

    def step(xb, yb):
        h = torch.from_numpy(xb)
        for i in range(0, len(params), 2):
            h = h @ params[i] + params[i + 1]
            if i < len(params) - 2:
                h = torch.relu(h)
        loss = torch.nn.functional.cross_entropy(h, torch.from_numpy(yb))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def peak_memory(free: bool, depth: int = 16, width: int = 1024, batch: int = 256):
    """Peak traced memory of one training step of a deep MLP (tracemalloc sees numpy buffers)."""
    import tracemalloc
    import kernflow.core as kf
    from kernflow.core.runtime import executor
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [batch, width])
        h = x
        for i in range(depth):
            w = kf.Variable(np.random.RandomState(i).randn(width, width).astype(np.float32) * 0.03)
            h = kf.nn.relu(kf.matmul(h, w))
        loss = kf.reduce_mean(kf.square(h))
        train = kf.train.GradientDescentOptimizer(0.01).minimize(loss)
        init = kf.global_variables_initializer()
    old = executor.RELEASE_INTERMEDIATES
    executor.RELEASE_INTERMEDIATES = free
    try:
        with kf.Session(graph=g) as s:
            s.run(init)
            xb = np.random.RandomState(0).randn(batch, width).astype(np.float32)
            s.run(train, {x: xb})
            tracemalloc.start()
            s.run(train, {x: xb})
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
    finally:
        executor.RELEASE_INTERMEDIATES = old
    return peak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, nargs="+", default=[64, 512])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--skip-memory", action="store_true")
    args = p.parse_args(argv)
    res = {"workload": "digits MLP 64-128-128-10 SGD step", "results": {}}
    for batch in args.batches:
        data = _data(batch)
        kstep, sess = kernflow_step_fn()
        contenders = {"numpy_floor": numpy_step_fn(), "kernflow": kstep}
        for name, make in (("tensorflow", tensorflow_step_fn), ("pytorch", torch_step_fn)):
            fn = make()
            if fn is not None:
                contenders[name] = fn
        # Interleaved: each repeat times every contender back to back, so load on this shared
        # machine hits them alike; ratios are taken per repeat and their median reported.
        times = {k: [] for k in contenders}
        for _ in range(args.repeats):
            for k, fn in contenders.items():
                times[k].append(_time_steps(fn, data, args.steps, 1))
        sess.close()
        row = {f"{k}_us": statistics.median(v) * 1e6 for k, v in times.items()}
        for k in contenders:
            if k != "numpy_floor":
                row[f"{k}_ratio"] = statistics.median(a / b for a, b in zip(times[k], times["numpy_floor"]))
        res["results"][f"batch_{batch}"] = {k: round(v, 3) for k, v in row.items()}
    if not args.skip_memory:
        keep, free = peak_memory(False), peak_memory(True)
        res["deep_mlp_peak_memory"] = {"model": "16 x [1024x1024] ReLU MLP, batch 256, one SGD step",
                                       "keep_all_intermediates_MiB": round(keep / 2**20, 1),
                                       "release_after_last_use_MiB": round(free / 2**20, 1)}
    res["goals"] = {"batch_64_ratio": 1.2, "batch_512_ratio": 1.05}
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

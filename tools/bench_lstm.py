"""Benchmark: an LSTM language-model training step, kernflow's dynamic_rnn against hand-written numpy.

The PTB "small" model's shape: 2 LSTM layers of 200 units, batch 20, 35 unrolled steps, vocabulary
10,000, embedding 200, softmax over the vocabulary, plain SGD. kernflow builds it the TF1 way
(`embedding_lookup`, `MultiRNNCell` of `BasicLSTMCell`, `dynamic_rnn`, `sparse_softmax_cross_entropy`,
`GradientDescentOptimizer`); the baseline is the same forward and backward pass written directly in
numpy (a Python loop over time steps, the LSTM gates fused into one matmul per layer and step, as
BasicLSTMCell does). Both run in this process, rounds alternating; median step time over rounds; the
baseline is the faster of numpy with one BLAS thread and with one per core.
Goal (issue 15): kernflow <= 1.5x the numpy step time.

Usage: python tools/bench_lstm.py [--rounds 3] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

V, E, H, LAYERS, B, T = 10000, 200, 200, 2, 20, 35
LR = 1.0


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


class NumpyLM:
    """The model by hand: forward, backward and SGD update in numpy (float32)."""

    def __init__(self, rng):
        s = 0.1
        self.emb = rng.uniform(-s, s, (V, E)).astype(np.float32)
        self.w = [rng.uniform(-s, s, ((E if i == 0 else H) + H, 4 * H)).astype(np.float32)
                  for i in range(LAYERS)]
        self.b = [np.zeros(4 * H, np.float32) for _ in range(LAYERS)]
        self.sw = rng.uniform(-s, s, (H, V)).astype(np.float32)
        self.sb = np.zeros(V, np.float32)

    def step(self, x, y):
        xs = self.emb[x]                                  # [B, T, E]
        inp = [xs[:, t] for t in range(T)]
        caches = []
        for layer in range(LAYERS):
            h = np.zeros((B, H), np.float32)
            c = np.zeros((B, H), np.float32)
            out, cache = [], []
            w, b = self.w[layer], self.b[layer]
            for t in range(T):
                xh = np.concatenate([inp[t], h], 1)
                z = xh @ w + b
                i, j, f, o = np.split(z, 4, axis=1)       # BasicLSTMCell's gate order, forget bias 1
                i, f, o, j = _sigmoid(i), _sigmoid(f + 1.0), _sigmoid(o), np.tanh(j)
                c_new = c * f + i * j
                tc = np.tanh(c_new)
                h = tc * o
                cache.append((xh, i, j, f, o, c, tc))
                c = c_new
                out.append(h)
            caches.append(cache)
            inp = out
        hs = np.stack(inp, 1).reshape(-1, H)              # [B*T, H]
        logits = hs @ self.sw + self.sb
        logits -= logits.max(1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(1, keepdims=True)
        yf = y.reshape(-1)
        loss = -np.log(p[np.arange(len(yf)), yf] + 1e-30).mean()
        d = p
        d[np.arange(len(yf)), yf] -= 1.0
        d /= len(yf)
        dsw = hs.T @ d
        dsb = d.sum(0)
        dhs = (d @ self.sw.T).reshape(B, T, H)
        dout = [dhs[:, t] for t in range(T)]
        dws = [None] * LAYERS
        dbs = [None] * LAYERS
        for layer in reversed(range(LAYERS)):
            w = self.w[layer]
            n_in = w.shape[0] - H
            dw = np.zeros_like(w)
            db = np.zeros(4 * H, np.float32)
            dh_next = np.zeros((B, H), np.float32)
            dc_next = np.zeros((B, H), np.float32)
            din = [None] * T
            for t in reversed(range(T)):
                xh, i, j, f, o, c_prev, tc = caches[layer][t]
                dh = dout[t] + dh_next
                do = dh * tc
                dc = dc_next + dh * o * (1 - tc * tc)
                di, dj, df = dc * j, dc * i, dc * c_prev
                dz = np.concatenate([di * i * (1 - i), dj * (1 - j * j), df * f * (1 - f),
                                     do * o * (1 - o)], 1)
                dw += xh.T @ dz
                db += dz.sum(0)
                dxh = dz @ w.T
                din[t] = dxh[:, :n_in]
                dh_next = dxh[:, n_in:]
                dc_next = dc * f
            dws[layer], dbs[layer] = dw, db
            dout = din
        demb = np.stack(dout, 1).reshape(-1, E)
        for layer in range(LAYERS):
            self.w[layer] -= LR * dws[layer]
            self.b[layer] -= LR * dbs[layer]
        self.sw -= LR * dsw
        self.sb -= LR * dsb
        np.subtract.at(self.emb, x.reshape(-1), LR * demb)
        return loss


def _kernflow_step(intra_op_threads: int = 0):
    import kernflow.core as kf
    g = kf.Graph()
    with g.as_default():
        kf.set_random_seed(0)
        x = kf.placeholder(kf.int32, [B, T])
        y = kf.placeholder(kf.int32, [B, T])
        init = kf.random_uniform_initializer(-0.1, 0.1)
        with kf.variable_scope("lm", initializer=init):
            emb = kf.get_variable("embedding", [V, E])
            inputs = kf.nn.embedding_lookup(emb, x)
            cell = kf.nn.rnn_cell.MultiRNNCell([kf.nn.rnn_cell.BasicLSTMCell(H) for _ in range(LAYERS)])
            out, _ = kf.nn.dynamic_rnn(cell, inputs, initial_state=cell.zero_state(B, kf.float32))
            sw = kf.get_variable("softmax_w", [H, V])
            sb = kf.get_variable("softmax_b", [V], initializer=kf.zeros_initializer())
            logits = kf.matmul(kf.reshape(out, [-1, H]), sw) + sb
            loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=kf.reshape(y, [-1]), logits=logits))
        train = kf.train.GradientDescentOptimizer(LR).minimize(loss)
        init_op = kf.global_variables_initializer()
    sess = kf.Session(graph=g, config=kf.ConfigProto(intra_op_parallelism_threads=intra_op_threads))
    sess.run(init_op)
    run = sess.make_callable([train, loss], feed_list=[x, y])
    return lambda xb, yb: run(xb, yb)[1], sess


def _time(step, batches, steps):
    for xb, yb in batches[:2]:
        step(xb, yb)
    t0 = time.perf_counter()
    for k in range(steps):
        xb, yb = batches[k % len(batches)]
        step(xb, yb)
    return (time.perf_counter() - t0) / steps


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--intra-op-threads", type=int, default=0,
                   help="ConfigProto.intra_op_parallelism_threads of kernflow's session (0: one per core)")
    args = p.parse_args()
    rng = np.random.RandomState(0)
    batches = [(rng.randint(0, V, (B, T)).astype(np.int32), rng.randint(0, V, (B, T)).astype(np.int32))
               for _ in range(8)]
    npm = NumpyLM(rng)
    kf_step, sess = _kernflow_step(args.intra_op_threads)
    # kernflow runs BLAS on one thread (its own intra-op pool splits big matmuls); the baseline gets
    # numpy's best of one BLAS thread and one per core, set around its own steps.
    from threadpoolctl import threadpool_limits
    cores = os.cpu_count() or 1
    times = {"kernflow": [], "numpy_blas_1": [], f"numpy_blas_{cores}": []}
    for _ in range(args.rounds):
        times["kernflow"].append(_time(kf_step, batches, args.steps))
        for n in (1, cores):
            with threadpool_limits(limits=n, user_api="blas"):
                times[f"numpy_blas_{n}"].append(_time(npm.step, batches, args.steps))
    sess.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    med["numpy"] = min(med["numpy_blas_1"], med[f"numpy_blas_{cores}"])
    out = {"benchmark": "lstm_lm_step", "model": f"{LAYERS}x LSTM {H}, batch {B}, {T} steps, vocab {V}, SGD",
           "steps": args.steps, "rounds": args.rounds, "machine": platform.platform(),
           "cpus": os.cpu_count(),
           "step_ms": {k: round(v * 1e3, 2) for k, v in med.items()},
           "step_ms_rounds": {k: [round(t * 1e3, 2) for t in v] for k, v in times.items()},
           "numpy": "the faster of numpy_blas_1 and numpy_blas_N",
           "intra_op_parallelism_threads": args.intra_op_threads,
           "kernflow_vs_numpy": round(med["kernflow"] / med["numpy"], 3), "goal": "<= 1.5"}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

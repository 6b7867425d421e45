"""Benchmark of the embedded runtime's overheads, side by side with baselines in one run.

Workloads (issue: the embedded runtime):
  trivial_step     y = x + 1 on a [1] float32 placeholder, cached Session.run (steps/s)
  chain_1000_adds  1,000 dependent adds on a fed [1] placeholder in one run (us per op)
  matmul_2048      2048x2048 float32 matmul through Session.run vs numpy's own time

Baselines: hand-written numpy for the same work; TensorFlow (tf.compat.v1 graph mode) when
installed. Prints one JSON object; medians over --repeats runs.

Usage: python tools/bench_runtime.py [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np


def _median_time(fn, number, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return statistics.median(times)


def bench_kernflow(args):
    import kernflow.core as kf
    out = {}
    xv = np.ones(1, np.float32)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [1])
        y = x + 1.0
    with kf.Session(graph=g) as s:
        t = _median_time(lambda: s.run(y, {x: xv}), args.trivial_n, args.repeats)
    out["trivial_step"] = {"us_per_step": t * 1e6, "steps_per_s": 1.0 / t}
    g = kf.Graph()
    with g.as_default():
        p = kf.placeholder(kf.float32, [1])
        z = p
        for _ in range(1000):
            z = z + 1.0
    with kf.Session(graph=g) as s:
        t = _median_time(lambda: s.run(z, {p: xv}), args.chain_n, args.repeats)
    out["chain_1000_adds"] = {"us_per_op": t * 1e6 / 1000}
    a = np.random.RandomState(0).rand(2048, 2048).astype(np.float32)
    b = np.random.RandomState(1).rand(2048, 2048).astype(np.float32)
    g = kf.Graph()
    with g.as_default():
        pa = kf.placeholder(kf.float32, [2048, 2048])
        pb = kf.placeholder(kf.float32, [2048, 2048])
        mm = kf.matmul(pa, pb)
    # Interleaved with numpy's own matmul, one call each per round: this machine's speed drifts
    # by several percent over seconds, so the ratio is taken per round and its median reported.
    with kf.Session(graph=g) as s:
        s.run(mm, {pa: a, pb: b})
        ratios, kt, nt = [], [], []
        for _ in range(args.mm_rounds):
            t0 = time.perf_counter()
            s.run(mm, {pa: a, pb: b})
            t1 = time.perf_counter()
            np.matmul(a, b)
            t2 = time.perf_counter()
            kt.append(t1 - t0)
            nt.append(t2 - t1)
            ratios.append((t1 - t0) / (t2 - t1))
    out["matmul_2048"] = {"ms": statistics.median(kt) * 1e3, "numpy_ms": statistics.median(nt) * 1e3,
                          "ratio_median_of_rounds": statistics.median(ratios)}
    return out


def bench_numpy(args):
    out = {}
    xv = np.ones(1, np.float32)
    one = np.asarray(1.0, np.float32)  # a 0-d array, as kernflow's constant is
    t = _median_time(lambda: np.add(xv, one), args.trivial_n, args.repeats)
    out["trivial_step"] = {"us_per_step": t * 1e6, "steps_per_s": 1.0 / t}

    def chain():
        z = xv
        for _ in range(1000):
            z = np.add(z, one)
        return z
    t = _median_time(chain, args.chain_n, args.repeats)
    out["chain_1000_adds"] = {"us_per_op": t * 1e6 / 1000}
    a = np.random.RandomState(0).rand(2048, 2048).astype(np.float32)
    b = np.random.RandomState(1).rand(2048, 2048).astype(np.float32)
    t = _median_time(lambda: np.matmul(a, b), args.mm_n, args.repeats)
    out["matmul_2048"] = {"ms": t * 1e3}
    return out


def bench_tensorflow(args):
    try:
        import tensorflow.compat.v1 as tf
    except ImportError:
        return None
    tf.disable_eager_execution()
    out = {}
    xv = np.ones(1, np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [1])
        y = x + 1.0
    with tf.Session(graph=g) as s:
        t = _median_time(lambda: s.run(y, {x: xv}), args.trivial_n // 5, args.repeats)
    out["trivial_step"] = {"us_per_step": t * 1e6, "steps_per_s": 1.0 / t}
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="fewer iterations (smoke test)")
    args = p.parse_args(argv)
    args.trivial_n, args.chain_n, args.mm_n = (2000, 20, 2) if args.quick else (20000, 200, 5)
    args.mm_rounds = 4 if args.quick else 30
    res = {"machine": {"python": sys.version.split()[0], "numpy": np.__version__,
                       "platform": platform.platform()},
           "kernflow": bench_kernflow(args), "numpy": bench_numpy(args)}
    tf = bench_tensorflow(args)
    if tf is not None:
        res["tensorflow"] = tf
    k, n = res["kernflow"], res["numpy"]
    res["summary"] = {
        "trivial_steps_per_s": round(k["trivial_step"]["steps_per_s"]),
        "trivial_goal_steps_per_s": 20000,
        "chain_us_per_op": round(k["chain_1000_adds"]["us_per_op"], 3),
        "chain_numpy_us_per_op": round(n["chain_1000_adds"]["us_per_op"], 3),
        "chain_goal_us_per_op": 2.0,
        "matmul_ratio_to_numpy": round(k["matmul_2048"]["ratio_median_of_rounds"], 4),
        "matmul_goal_ratio": 1.03,
    }
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

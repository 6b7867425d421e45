"""Benchmark of dynamic control flow: kf.while_loop's per-iteration cost, in one run side by side.

Workloads (CPU, embedded runtime):

  while_one_op     ``while_loop(lambda i: i < n, lambda i: i + 1, [0])``: one op in the body; the
                   per-iteration time is the executor's control-flow overhead (Merge, Switch,
                   LoopCond, NextIteration, frames and iterations). Target: at most 30 us.
  while_matvec     a body doing ``h = tanh(W @ h)`` for a 64-vector (an RNN-like step).
  while_grad       forward + backward of ``while_matvec`` (the backprop loop pops saved values).
  python_loop      baseline: the same one-op body as a Python ``for`` loop over a numpy scalar
                   (no graph), and ``while_matvec`` as a Python loop calling numpy.

Prints one JSON object with microseconds per iteration (median of --repeats runs) per workload.

Usage: python tools/bench_control_flow.py [--iters 5000] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np


def _median_us(fn, iters, repeats):
    fn()   # warm up (builds and caches the step)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="500 iterations, 2 repeats")
    ap.add_argument("--device", default=None,
                    help="device of the loops, e.g. /gpu:0 (default: placement decides)")
    args = ap.parse_args(argv)
    if args.quick:
        args.iters, args.repeats = 500, 2
    import kernflow.core as kf
    iters, reps = args.iters, args.repeats
    out = {"machine": platform.machine(), "python": platform.python_version(), "iters": iters,
           "device": args.device or "default placement"}

    g = kf.Graph()
    with g.as_default(), kf.device(args.device):
        n = kf.placeholder(kf.int32, [])
        one_op = kf.while_loop(lambda i: i < n, lambda i: i + 1, [kf.constant(0)])
        rs = np.random.RandomState(0)
        w = kf.constant(rs.randn(64, 64).astype(np.float32) * 0.1)
        h0 = kf.placeholder(kf.float32, [64, 1])
        _, h = kf.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, kf.tanh(kf.matmul(w, h))),
                             [kf.constant(0), h0])
        loss = kf.reduce_sum(h)
        dh0 = kf.gradients(loss, h0)[0]
    h0v = rs.randn(64, 1).astype(np.float32)
    with kf.Session(graph=g, config=kf.ConfigProto(allow_soft_placement=True)) as sess:
        r = sess.run(one_op, {n: iters})
        assert r == iters, r
        out["while_one_op_us"] = round(_median_us(lambda: sess.run(one_op, {n: iters}), iters, reps), 2)
        out["while_matvec_us"] = round(_median_us(lambda: sess.run(h, {n: iters, h0: h0v}), iters,
                                                  reps), 2)
        out["while_grad_us"] = round(_median_us(lambda: sess.run(dh0, {n: iters, h0: h0v}), iters,
                                                reps), 2)

    def py_one_op():
        i = np.int32(0)
        lim = np.int32(iters)
        while i < lim:
            i = i + np.int32(1)

    wv = rs.randn(64, 64).astype(np.float32) * 0.1

    def py_matvec():
        hv = h0v
        for _ in range(iters):
            hv = np.tanh(wv @ hv)
    out["python_loop_one_op_us"] = round(_median_us(py_one_op, iters, reps), 2)
    out["python_loop_matvec_us"] = round(_median_us(py_matvec, iters, reps), 2)
    out["while_one_op_overhead_us"] = round(out["while_one_op_us"] - out["python_loop_one_op_us"], 2)
    out["target_one_op_us"] = 30.0
    out["meets_target"] = out["while_one_op_us"] <= 30.0
    json.dump(out, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

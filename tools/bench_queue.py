"""Benchmark of queue throughput: kernflow's FIFOQueue vs Python's queue.Queue, in one run.

Workload: [64, 64] float32 batches (64 elements of 64 floats, 16 KiB) move from a producer thread
to the consumer (the main thread).

  kernflow       the producer runs ``enqueue_many`` once per batch (the batch fed to a placeholder,
                 one Session.run per batch); the consumer runs ``dequeue_many(64)``; the FIFOQueue
                 holds --capacity batches.
  python_queue   the same numpy batches through a ``queue.Queue(maxsize=capacity)``: the floor of
                 handing an object between two Python threads.

Prints one JSON object: elements/s, batches/s and MB/s for each (medians over --repeats runs), and
kernflow's per-batch overhead over the baseline.

Usage: python tools/bench_queue.py [--batches 2000] [--repeats 5] [--capacity 8] [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import queue
import statistics
import sys
import threading
import time

import numpy as np

BATCH, WIDTH = 64, 64


def _batches(n_distinct=4):
    rs = np.random.RandomState(0)
    return [rs.rand(BATCH, WIDTH).astype(np.float32) for _ in range(n_distinct)]


def _rates(seconds, n_batches):
    elems = n_batches * BATCH
    return {"seconds": seconds, "elements_per_s": elems / seconds, "batches_per_s": n_batches / seconds,
            "MB_per_s": elems * WIDTH * 4 / 1e6 / seconds}


def _median_run(run, repeats):
    run(max(10, repeats))  # warm-up
    times = [run(None) for _ in range(repeats)]
    return statistics.median(times)


def bench_kernflow(args):
    import kernflow.core as kf
    data = _batches()
    g = kf.Graph()
    with g.as_default():
        q = kf.FIFOQueue(args.capacity * BATCH, kf.float32, shapes=[[WIDTH]])
        x = kf.placeholder(kf.float32, [BATCH, WIDTH])
        enq = q.enqueue_many([x])
        deq = q.dequeue_many(BATCH)
    sess = kf.Session(graph=g)
    check = []

    def run(n):
        n = n or args.batches
        t0 = time.perf_counter()

        def produce():
            for i in range(n):
                sess.run(enq, {x: data[i % len(data)]})
        t = threading.Thread(target=produce)
        t.start()
        for i in range(n):
            out = sess.run(deq)
        t.join()
        dt = time.perf_counter() - t0
        check.append(np.array_equal(out, data[(n - 1) % len(data)]))
        return dt
    try:
        seconds = _median_run(run, args.repeats)
    finally:
        sess.close()
    res = _rates(seconds, args.batches)
    res["last_batch_correct"] = all(check)
    return res


def bench_python_queue(args):
    data = _batches()

    def run(n):
        n = n or args.batches
        q = queue.Queue(maxsize=args.capacity)
        t0 = time.perf_counter()

        def produce():
            for i in range(n):
                q.put(data[i % len(data)])
        t = threading.Thread(target=produce)
        t.start()
        for _ in range(n):
            q.get()
        t.join()
        return time.perf_counter() - t0
    return _rates(_median_run(run, args.repeats), args.batches)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=2000, help="batches per run")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--capacity", type=int, default=8, help="queue capacity, in batches")
    p.add_argument("--quick", action="store_true", help="fewer batches and runs (smoke test)")
    args = p.parse_args(argv)
    if args.quick:
        args.batches, args.repeats = 200, 2
    k = bench_kernflow(args)
    b = bench_python_queue(args)
    res = {"machine": {"python": sys.version.split()[0], "numpy": np.__version__,
                       "platform": platform.platform()},
           "workload": {"batch_shape": [BATCH, WIDTH], "dtype": "float32", "batches": args.batches,
                        "capacity_batches": args.capacity, "repeats": args.repeats},
           "kernflow": k, "python_queue": b}
    res["summary"] = {
        "kernflow_elements_per_s": round(k["elements_per_s"]),
        "kernflow_batches_per_s": round(k["batches_per_s"]),
        "kernflow_MB_per_s": round(k["MB_per_s"], 1),
        "python_queue_elements_per_s": round(b["elements_per_s"]),
        "python_queue_batches_per_s": round(b["batches_per_s"]),
        "python_queue_MB_per_s": round(b["MB_per_s"], 1),
        "kernflow_us_per_batch": round(k["seconds"] / args.batches * 1e6, 1),
        "python_queue_us_per_batch": round(b["seconds"] / args.batches * 1e6, 1),
        "ratio_python_queue_to_kernflow": round(b["elements_per_s"] / k["elements_per_s"], 2),
    }
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark of the distributed runtime on loopback, side by side with plain grpcio in one run.

A two-task cluster (`kf.train.Server` for /job:worker/task:0 and task:1, each in its own process) and
a plain grpcio server (a third process that never imports kernflow: default malloc, default options
but unlimited message size) serve the benchmark process, which is the client of both.

Workloads:
  fetch_64mib            ``sess.run(v)`` of a 64 MiB float32 variable living on task 1, through the
                         master of task 0, in MB/s: RunStepPull, where the client pulls the value
                         from task 1 itself (client <- task 1); against one unary grpcio call
                         returning 64 MiB of bytes (identity serializers: no protobuf). The pull
                         uses the transport the client negotiates with task 1: "shm" (one host);
                         run with KERNFLOW_TRANSPORT=grpc (inherited by the tasks) for in-band gRPC.
  fetch_64mib_relayed_by_master
                         the same with KERNFLOW_DIRECT_FETCH=0: the master pulls and relays
                         (client <- master <- task 1, RunStepStream).
  trivial_step           ``y = x + 1`` on a [1] placeholder, cached, op on task 0 (the master's own
                         task: one RPC hop); against a unary grpcio echo of 4 bytes.
  trivial_step_on_task1  the same op placed on task 1 (client -> master -> task 1: two hops).

The contenders alternate round by round (this shared VM drifts by tens of percent within seconds);
the JSON reports medians of per-round times and of per-round ratios. The two task processes tune
glibc's malloc thresholds, as every kernflow process with a CPU device does; the benchmark process
(the client of both contenders) does so only with --tune-client-malloc, and the baseline server
never does.

``--tf-python PATH`` then runs the same three workloads under TensorFlow's tf.compat.v1 (two
`tf.train.Server` processes, the client in that interpreter; TF relays the fetch through task 0's
master, its only path) and reports kernflow's times and rates against them.

Usage: python tools/bench_distributed.py [--rounds 9] [--steps 300] [--mib 64] [--quick] [--tf-python PATH]
                                         [--tune-client-malloc] [--skip-fetch] [--skip-step]
                                         [--skip-relay]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

_IDENT = None   # grpc passes bytes through when (de)serializers are None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------- child processes
def serve_task(index: int, cluster: dict) -> None:
    import kernflow.core as kf
    server = kf.train.Server(cluster, job_name="worker", task_index=index)
    print("ready", flush=True)
    sys.stdin.read()   # until the parent closes our stdin
    server.stop()


def serve_baseline(nbytes: int) -> None:
    from concurrent import futures

    import grpc
    blob = os.urandom(nbytes)
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(lambda req, ctx: req),
        "Blob": grpc.unary_unary_rpc_method_handler(lambda req, ctx: blob),
    }
    opts = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=opts)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Plain", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"ready {port}", flush=True)
    sys.stdin.read()
    server.stop(0)


def serve_tf_task(index: int, cluster: dict) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    server = tf.train.Server(tf.train.ClusterSpec(cluster), job_name="worker", task_index=index)
    print("ready", flush=True)
    sys.stdin.read()
    del server


def tf_measure(args, nbytes: int) -> dict:
    """The same workloads under TensorFlow's tf.compat.v1 (run in the TensorFlow interpreter): two
    `tf.train.Server` processes, the client here; TF relays a fetch through the master's task."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    cluster = {"worker": [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]}
    children = [_spawn(["--serve-tf-task", str(i), "--cluster", json.dumps(cluster)])[0] for i in range(2)]
    results = {}
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [1], name="x")
            y0 = x + 1.0
            with tf.device("/job:worker/task:1"):
                y1 = x + 1.0
                v = tf.Variable(tf.random_uniform([nbytes // 4]), name="v")
        with tf.Session("grpc://" + cluster["worker"][0], graph=g) as sess:
            xv = np.ones(1, np.float32)
            if not args.skip_step:
                for name, op in (("trivial_step", y0), ("trivial_step_on_task1", y1)):
                    fn = sess.make_callable(op, feed_list=[x])
                    fn(xv)
                    times = [_per_call(lambda: fn(xv), args.steps) for _ in range(args.rounds)]
                    results[name] = {"us_per_step": statistics.median(times) * 1e6,
                                     "best_us": min(times) * 1e6}
            if not args.skip_fetch:
                sess.run(v.initializer)
                sess.run(v)
                times = [_per_call(lambda: sess.run(v), args.fetches) for _ in range(args.rounds)]
                results[f"fetch_{args.mib}mib"] = {"MB_per_s": nbytes / statistics.median(times) / 1e6,
                                                   "ms": statistics.median(times) * 1e3}
        if not args.skip_fetch:
            # TF's best case too: a session whose master is the variable's own task (one hop).
            with tf.Session("grpc://" + cluster["worker"][1], graph=g) as sess:
                sess.run(v)
                times = [_per_call(lambda: sess.run(v), args.fetches) for _ in range(args.rounds)]
                results[f"fetch_{args.mib}mib_master_on_task1"] = {
                    "MB_per_s": nbytes / statistics.median(times) / 1e6, "ms": statistics.median(times) * 1e3}
    finally:
        _stop(children)
    return {"tensorflow": tf.__version__, "results": results}


def _run_tensorflow(tf_python: str, argv: list[str]) -> dict | None:
    r = subprocess.run([tf_python, os.path.abspath(__file__), "--tf-measure"] + argv, capture_output=True,
                       text=True, timeout=3600)
    if r.returncode != 0:
        print(f"TensorFlow run failed:\n{r.stderr[-3000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout)


def _stop(children) -> None:
    """Closes the children's stdin (they stop serving) and waits for them; kills a stuck one."""
    for p in children:
        p.stdin.close()
    for p in children:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def _spawn(args) -> tuple[subprocess.Popen, str]:
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + args, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().strip()
    if not line.startswith("ready"):
        raise RuntimeError(f"child {args} did not start (exit {p.wait()})")
    return p, line


# ---------------------------------------------------------------------------- measurements
def _per_call(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def _interleave(a, b, rounds: int, n: int) -> dict:
    """Alternates `n` calls of a and of b per round; medians of times and of per-round ratios a/b."""
    a(), b()
    ta, tb, ratios = [], [], []
    for _ in range(rounds):
        x = _per_call(a, n)
        y = _per_call(b, n)
        ta.append(x)
        tb.append(y)
        ratios.append(x / y)
    return {"a": statistics.median(ta), "b": statistics.median(tb), "ratio": statistics.median(ratios),
            "a_best": min(ta), "b_best": min(tb)}


def _fetch_result(r: dict, nbytes: int) -> dict:
    return {"MB_per_s": nbytes / r["a"] / 1e6, "grpc_unary_MB_per_s": nbytes / r["b"] / 1e6,
            "speedup_vs_grpc_unary": 1 / r["ratio"], "ms": r["a"] * 1e3, "grpc_unary_ms": r["b"] * 1e3}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=300, help="calls per round of the trivial steps")
    ap.add_argument("--fetches", type=int, default=2, help="64 MiB fetches per round")
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="3 rounds, 100 steps, 1 fetch per round")
    ap.add_argument("--skip-fetch", action="store_true")
    ap.add_argument("--skip-step", action="store_true")
    ap.add_argument("--skip-relay", action="store_true",
                    help="do not also measure the fetch relayed by the master (KERNFLOW_DIRECT_FETCH=0)")
    ap.add_argument("--tune-client-malloc", action="store_true",
                    help="apply the CPU plugin's malloc tuning in this (client) process too")
    ap.add_argument("--tf-python", help="a Python with tensorflow (a separate virtual environment): "
                    "the same workloads under TensorFlow, after kernflow's, in this run")
    ap.add_argument("--serve-task", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--serve-tf-task", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--tf-measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cluster", help=argparse.SUPPRESS)
    ap.add_argument("--serve-baseline", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    nbytes = args.mib << 20
    if args.serve_task is not None:
        serve_task(args.serve_task, json.loads(args.cluster))
        return 0
    if args.serve_baseline:
        serve_baseline(nbytes)
        return 0
    if args.quick:
        args.rounds, args.steps, args.fetches = 3, 100, 1
    if args.serve_tf_task is not None:
        serve_tf_task(args.serve_tf_task, json.loads(args.cluster))
        return 0
    if args.tf_measure:
        print(json.dumps(tf_measure(args, nbytes)))
        return 0

    import grpc

    import kernflow.core as kf
    from kernflow.client import fetch_stream
    tuned = False
    if args.tune_client_malloc:
        from kernflow.kernels.cpu.allocator import tune_host_allocator
        tuned = tune_host_allocator()

    cluster = {"worker": [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]}
    children = []
    try:
        base, line = _spawn(["--serve-baseline", "--mib", str(args.mib)])
        children.append(base)
        for i in range(2):
            children.append(_spawn(["--serve-task", str(i), "--cluster", json.dumps(cluster)])[0])
        opts = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
        channel = grpc.insecure_channel(f"127.0.0.1:{line.split()[1]}", options=opts)
        echo = channel.unary_unary("/bench.Plain/Echo", _IDENT, _IDENT)
        blob = channel.unary_unary("/bench.Plain/Blob", _IDENT, _IDENT)
        small = b"\x00\x00\x80\x3f"

        g = kf.Graph()
        with g.as_default():
            x = kf.placeholder(kf.float32, [1], name="x")
            y0 = x + 1.0
            with kf.device("/job:worker/task:1"):
                y1 = x + 1.0
                v = kf.Variable(kf.random_uniform([nbytes // 4]), name="v")
        target = "grpc://" + cluster["worker"][0]
        results = {}
        with kf.Session(target, graph=g) as sess:
            xv = np.ones(1, np.float32)
            if not args.skip_step:
                for name, op in (("trivial_step", y0), ("trivial_step_on_task1", y1)):
                    r = _interleave(lambda op=op: sess.run(op, {x: xv}), lambda: echo(small, timeout=10),
                                    args.rounds, args.steps)
                    results[name] = {"us_per_step": r["a"] * 1e6, "steps_per_s": 1 / r["a"],
                                     "grpc_echo_us": r["b"] * 1e6, "ratio_to_echo": r["ratio"],
                                     "best_us": r["a_best"] * 1e6, "best_echo_us": r["b_best"] * 1e6}
            if not args.skip_fetch:
                sess.run(v.initializer)
                got = sess.run(v)
                assert got.shape == (nbytes // 4,) and got.dtype == np.float32
                r = _interleave(lambda: sess.run(v), lambda: blob(b"", timeout=60), args.rounds, args.fetches)
                results[f"fetch_{args.mib}mib"] = _fetch_result(r, nbytes)
                if not args.skip_relay:   # the same fetch relayed by the master (RunStepStream)
                    os.environ[fetch_stream.ENV_VAR] = "0"
                    try:
                        got = sess.run(v)
                        r = _interleave(lambda: sess.run(v), lambda: blob(b"", timeout=60), args.rounds,
                                        args.fetches)
                    finally:
                        os.environ.pop(fetch_stream.ENV_VAR)
                    results[f"fetch_{args.mib}mib_relayed_by_master"] = _fetch_result(r, nbytes)
        channel.close()
    finally:
        _stop(children)
    if args.tf_python:
        passed, skip = [], False
        for a in (argv if argv is not None else sys.argv[1:]):
            if skip or a.startswith("--tf-python"):
                skip = a == "--tf-python" and not skip
                continue
            passed.append(a)
        tf_out = _run_tensorflow(args.tf_python, passed)
        if tf_out is not None:
            results["tensorflow"] = tf_out
            tr = tf_out["results"]
            ratios = {}
            for name in ("trivial_step", "trivial_step_on_task1"):
                if name in tr and name in results:
                    ratios[f"{name}_time_vs_tf"] = results[name]["us_per_step"] / tr[name]["us_per_step"]
            key = f"fetch_{args.mib}mib"
            if key in tr and key in results:
                ratios[f"{key}_MB_per_s_vs_tf"] = results[key]["MB_per_s"] / tr[key]["MB_per_s"]
                best = max(tr[key]["MB_per_s"], tr.get(key + "_master_on_task1", {}).get("MB_per_s", 0))
                ratios[f"{key}_MB_per_s_vs_tf_best"] = results[key]["MB_per_s"] / best
            results["kernflow_vs_tensorflow"] = ratios
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    out = {"command": f"python tools/bench_distributed.py {cmd}".strip(),
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                       "grpcio": grpc.__version__, "numpy": np.__version__,
                       "platform": platform.platform()},
           "rounds": args.rounds, "client_malloc_tuned": tuned, "results": results}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: asynchronous between-graph data-parallel training, kernflow against TensorFlow (JSON).

The workload of issue 17: the digits MLP 64-128-10 (ReLU, softmax cross entropy, plain SGD, batch
32), its four variables placed round-robin over 2 ps processes by `replica_device_setter`, and 1 or
4 worker processes, each with its own graph and session on its own server (TF1's between-graph
replication), training asynchronously. Every task is its own process on this machine. Each worker
runs `--warmup` steps, then `--steps` timed steps, and reports its start and end times; the
aggregate rate is all timed steps over the span from the first start to the last end. Worker 0 then
evaluates the shared model on the held-out digits. TensorFlow runs the identical program from
``--tf-python`` (a separate virtual environment); in each round the two frameworks run back to
back (each first in turn), and the JSON has the medians of each framework's rounds, each round's
ratio (kernflow / TF, of runs seconds apart) and the median of those ratios: on a machine whose
speed swings 3x between rounds, the paired ratio is the one to read.

Usage: python tools/bench_async_training.py [--tf-python PATH] [--workers 1 4] [--steps 300]
                                            [--warmup 30] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

_HERE = os.path.abspath(__file__)
BATCH = 32
LR = 0.1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _framework(name):
    if name == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow.compat.v1 as tf
        tf.disable_eager_execution()
        return tf
    import kernflow.core as kf
    return kf


def _digits():
    import numpy as np
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.RandomState(0).permutation(len(x))
    x, y = x[perm], y[perm]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def _role(cfg: dict) -> None:
    """One task: a ps serves until killed; a worker trains, reports, and (worker 0) evaluates."""
    import numpy as np
    tf = _framework(cfg["framework"])
    cluster = tf.train.ClusterSpec(cfg["cluster"])
    job, task = cfg["job"], cfg["task"]
    server = tf.train.Server(cluster, job_name=job, task_index=task)
    if job == "ps":
        print("ready", flush=True)
        server.join()
        return
    (xtr, ytr), (xte, yte) = _digits()
    g = tf.Graph()
    with g.as_default(), tf.device(tf.train.replica_device_setter(
            cluster=cluster, worker_device=f"/job:worker/task:{task}")):
        rng = np.random.RandomState(1)
        x = tf.placeholder(tf.float32, [None, 64])
        y = tf.placeholder(tf.int64, [None])
        w1 = tf.Variable((rng.randn(64, 128) * np.sqrt(2 / 64)).astype(np.float32))
        b1 = tf.Variable(np.zeros(128, np.float32))
        w2 = tf.Variable((rng.randn(128, 10) * np.sqrt(2 / 128)).astype(np.float32))
        b2 = tf.Variable(np.zeros(10, np.float32))
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train = tf.train.GradientDescentOptimizer(LR).minimize(loss)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int32))
        init = tf.global_variables_initializer()
    with g.as_default():
        uninitialized = tf.report_uninitialized_variables()
    print("ready", flush=True)
    with tf.Session(server.target, graph=g) as sess:
        if task == 0:
            sess.run(init)
        else:
            deadline = time.monotonic() + 60
            while len(sess.run(uninitialized)):
                if time.monotonic() > deadline:
                    raise RuntimeError("the chief did not initialize the variables")
                time.sleep(0.02)
        step = sess.make_callable([train, loss], feed_list=[x, y])
        data = np.random.RandomState(100 + task)
        batches = [data.randint(0, len(xtr), BATCH) for _ in range(64)]
        for i in range(cfg["warmup"]):
            idx = batches[i % len(batches)]
            step(xtr[idx], ytr[idx])
        ps_cpu0 = [_proc_cpu_s(pid) for pid in cfg.get("ps_pids", [])]
        cpu0 = time.process_time()
        start = time.time()
        for i in range(cfg["steps"]):
            idx = batches[i % len(batches)]
            step(xtr[idx], ytr[idx])
        end = time.time()
        cpu = time.process_time() - cpu0
        ps_cpu = [_proc_cpu_s(pid) - c for pid, c in zip(cfg.get("ps_pids", []), ps_cpu0)
                  if c is not None]
        out = {"start": start, "end": end, "steps": cfg["steps"], "cpu_s": cpu,
               "ps_cpu_s": sum(ps_cpu) if ps_cpu else None}
        if cfg.get("profile") and task == 0:
            out["profile"] = _profile(tf, sess, train, loss, x, y, xtr[batches[0]], ytr[batches[0]])
        if task == 0:
            # Wait for the others (files in the run directory) so the accuracy is of the whole run.
            deadline = time.monotonic() + 300
            while len(os.listdir(cfg["done_dir"])) < cfg["n_workers"] - 1 and time.monotonic() < deadline:
                time.sleep(0.02)
            out["accuracy"] = float(sess.run(correct, {x: xte, y: yte})) / len(xte)
        else:
            open(os.path.join(cfg["done_dir"], str(task)), "w").close()
    print("result " + json.dumps(out), flush=True)


def _proc_cpu_s(pid: int):
    """User + system CPU seconds of process `pid` so far (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _profile(tf, sess, train, loss, x, y, xb, yb) -> dict:
    """A FULL_TRACE step's time per op and device (ms), with the whole step's wall time."""
    meta = tf.RunMetadata()
    t = time.perf_counter()
    sess.run([train, loss], {x: xb, y: yb}, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=meta)
    wall = (time.perf_counter() - t) * 1e3
    per = {}
    for dev in meta.step_stats.dev_stats:
        for ns in dev.node_stats:
            key = f"{dev.device.split('/device:')[0]} {ns.node_name}"
            per[key] = round(per.get(key, 0) + ns.all_end_rel_micros / 1e3, 3)
    return {"traced_step_ms": round(wall, 3), "ops": dict(sorted(per.items(), key=lambda kv: -kv[1])[:25])}


def _python_for(framework: str, tf_python: str | None) -> str:
    return tf_python if framework == "tensorflow" else sys.executable


def run_cluster(framework: str, n_workers: int, args, python: str) -> dict:
    """Starts 2 ps and `n_workers` workers; returns the aggregate steps/s and the accuracy."""
    import tempfile
    cluster = {"ps": [f"127.0.0.1:{_free_port()}" for _ in range(2)],
               "worker": [f"127.0.0.1:{_free_port()}" for _ in range(n_workers)]}
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3")
    procs = []
    with tempfile.TemporaryDirectory(prefix="bench_async_") as done_dir:
        try:
            for job, n in (("ps", 2), ("worker", n_workers)):
                for task in range(n):
                    cfg = {"framework": framework, "cluster": cluster, "job": job, "task": task,
                           "steps": args.steps, "warmup": args.warmup, "n_workers": n_workers,
                           "done_dir": done_dir, "profile": args.profile,
                           "ps_pids": [q.pid for j, q in procs if j == "ps"]}
                    procs.append((job, subprocess.Popen([python, _HERE, "--role", json.dumps(cfg)],
                                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                        text=True, env=env)))
            results = []
            for job, p in procs:
                if job != "worker":
                    continue
                out, err = p.communicate(timeout=600)
                lines = [ln for ln in out.splitlines() if ln.startswith("result ")]
                if p.returncode != 0 or not lines:
                    raise RuntimeError(f"{framework} worker failed ({p.returncode}):\n{err[-3000:]}")
                results.append(json.loads(lines[-1][len("result "):]))
        finally:
            for _, p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    span = max(r["end"] for r in results) - min(r["start"] for r in results)
    total = sum(r["steps"] for r in results)
    row = {"steps_per_s": round(total / span, 1), "accuracy": round(results[0]["accuracy"], 4),
           # CPU per step: every worker process over its timed loop, and the ps processes over
           # worker 0's loop (the steps of all workers in that time).
           "worker_cpu_ms_per_step": round(1e3 * sum(r["cpu_s"] for r in results) / total, 3)}
    first = results[0]
    if first.get("ps_cpu_s") is not None:
        steps_then = total / span * (first["end"] - first["start"])
        row["ps_cpu_ms_per_step"] = round(1e3 * first["ps_cpu_s"] / steps_then, 3)
    if "profile" in results[0]:
        row["profile"] = results[0]["profile"]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--tf-python", help="a Python with tensorflow (a separate virtual environment)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", action="store_true", help="add worker 0's per-op times of a traced step")
    args = p.parse_args(argv)
    if args.role:
        _role(json.loads(args.role))
        return 0
    frameworks = ["kernflow"] + (["tensorflow"] if args.tf_python else [])
    runs = {f: {n: [] for n in args.workers} for f in frameworks}
    for r in range(args.rounds):
        for n in args.workers:
            # The frameworks run back to back, in turn first: a round's ratio compares runs a few
            # seconds apart (this machine's phases move a framework's rate 3x between rounds).
            for f in (frameworks if r % 2 == 0 else frameworks[::-1]):
                runs[f][n].append(run_cluster(f, n, args, _python_for(f, args.tf_python)))
    report = {"benchmark": "async_between_graph_training",
              "model": "digits MLP 64-128-10, SGD, batch 32, 2 ps, variables round-robin",
              "steps_per_worker": args.steps, "rounds": args.rounds, "cpus": os.cpu_count()}
    for f in frameworks:
        report[f] = {}
        for n in args.workers:
            rows = runs[f][n]
            report[f][f"{n}_workers"] = {
                "steps_per_s": statistics.median(r["steps_per_s"] for r in rows),
                "steps_per_s_rounds": [r["steps_per_s"] for r in rows],
                "accuracy": statistics.median(r["accuracy"] for r in rows),
                "worker_cpu_ms_per_step": statistics.median(r["worker_cpu_ms_per_step"] for r in rows)}
            ps = [r["ps_cpu_ms_per_step"] for r in rows if "ps_cpu_ms_per_step" in r]
            if ps:
                report[f][f"{n}_workers"]["ps_cpu_ms_per_step"] = statistics.median(ps)
            if args.profile:
                report[f][f"{n}_workers"]["profile"] = rows[-1].get("profile")
    if "tensorflow" in report:
        report["kernflow_vs_tensorflow_steps_per_s"] = {
            f"{n}_workers": round(report["kernflow"][f"{n}_workers"]["steps_per_s"]
                                  / report["tensorflow"][f"{n}_workers"]["steps_per_s"], 3)
            for n in args.workers}
        paired = {n: [round(k["steps_per_s"] / t["steps_per_s"], 3)
                      for k, t in zip(runs["kernflow"][n], runs["tensorflow"][n])] for n in args.workers}
        report["kernflow_vs_tensorflow_per_round"] = {f"{n}_workers": paired[n] for n in args.workers}
        report["kernflow_vs_tensorflow_median_of_rounds"] = {
            f"{n}_workers": statistics.median(paired[n]) for n in args.workers}
        report["goal"] = ">= 1.2 at both sizes"
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark of synchronous replicas with backup workers on a multi-process cluster (JSON).

A cluster of 1 ps and W worker processes (`kf.train.Server` each; every worker is also the client of
its own server, as a TF1 between-graph job) trains a small model: the digits MLP (64-128-128-10) on
a fixed batch of 64 per worker, plain SGD. Each worker step is ``--compute-ms`` of compute stood in
for by a sleep (so that W workers' compute does not fight over this machine's two cores and time
one another's steps) followed by the real step: forward and backward on the worker's task, the
variables read from the ps, the gradients sent to it. Every configuration starts a fresh cluster
(the token queue is shared by name on the ps, as in TF1, and must not carry tokens across runs).

Configurations (rounds alternate them; each row of the JSON is the median over rounds):

  async            W workers, the plain optimizer (asynchronous parameter-server training);
                   step time = a worker's wall time per step, the mean over workers.
  sync             `SyncReplicasOptimizer`, W of W gradients per step; step time = the chief's
                   wall time per global step.
  sync_straggler   the same, with worker W-1 a straggler: before 10% of its steps (``--p``) it sleeps
                   5x (``--slowdown``) the median compute time of a worker step, measured in the
                   async rounds of the same run (compute-ms plus the real step).
  backup_straggler W workers, W-1 gradients per step (one backup worker), the same straggler.

Step times are per round: wall time over the measured global steps (after ``--warmup``), so the
straggler's slow steps count with their weight; the JSON also gives each round's median and 90th
percentile of the gaps between global steps. Ratios: ``sync_straggler / sync`` (the paper's effect;
goal >= 1.5), ``backup_straggler / sync`` (goal <= 1.15), and with ``--workers 2``
``sync / async`` (goal <= 1.3).

Usage: python tools/bench_sync_replicas.py [--workers 4] [--rounds 3] [--steps 200] [--warmup 20]
                                           [--compute-ms 20] [--p 0.1] [--slowdown 5] [--quick]
       python tools/bench_sync_replicas.py --workers 2 --configs async,sync
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

_HERE = os.path.abspath(__file__)
CONFIGS = ("async", "sync", "sync_straggler", "backup_straggler")


# ---------------------------------------------------------------------------- child processes
def serve_ps(cluster: dict) -> None:
    import kernflow.core as kf
    server = kf.train.Server(cluster, job_name="ps", task_index=0)
    print("ready", flush=True)
    sys.stdin.read()   # until the parent closes our stdin
    server.stop()


def run_worker(cfg: dict) -> None:
    """One worker: trains until the global step reaches cfg["last_step"]; prints a JSON result."""
    import numpy as np

    import kernflow.core as kf
    from kernflow.core.demo import build_mlp
    task, workers = cfg["task"], len(cfg["cluster"]["worker"])
    cluster = kf.train.ClusterSpec(cfg["cluster"])
    server = kf.train.Server(cluster, job_name="worker", task_index=task)
    print("ready", flush=True)
    rs = np.random.RandomState(task)
    g = kf.Graph()
    with g.as_default(), kf.device(kf.train.replica_device_setter(
            cluster=cluster, worker_device=f"/job:worker/task:{task}")):
        x = kf.constant(rs.rand(64, 64).astype(np.float32))
        y = kf.constant(rs.randint(0, 10, 64).astype(np.int64))
        logits = build_mlp(kf, x, seed=1)
        loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        gs = kf.train.get_or_create_global_step()
        opt = kf.train.GradientDescentOptimizer(0.01)
        hooks = [kf.train.StopAtStepHook(last_step=cfg["last_step"])]
        if cfg["aggregate"]:
            opt = kf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=cfg["aggregate"],
                                                 total_num_replicas=workers)
        train = opt.minimize(loss, global_step=gs)
        if cfg["aggregate"]:
            hooks.append(opt.make_session_run_hook(is_chief=task == 0))
    config = kf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"])
    straggle = np.random.RandomState(100 + task)
    compute_s, delay_s = cfg["compute_ms"] / 1e3, cfg["delay_ms"] / 1e3
    times, steps, compute = [], [], []
    with g.as_default(), kf.train.MonitoredTrainingSession(
            master=server.target, is_chief=task == 0, hooks=hooks, save_checkpoint_secs=None,
            save_summaries_steps=None, log_step_count_steps=None, stop_grace_period_secs=2,
            config=config) as sess:
        while not sess.should_stop():
            if task == cfg["straggler"] and straggle.rand() < cfg["p"]:
                time.sleep(delay_s)
            t0 = time.perf_counter()
            time.sleep(compute_s)
            _, step = sess.run([train, gs])
            t1 = time.perf_counter()
            compute.append(t1 - t0)
            times.append(t1)
            steps.append(int(step))
    print("result " + json.dumps({"task": task, "times": times, "steps": steps, "compute": compute}),
          flush=True)


# ---------------------------------------------------------------------------- parent
def _spawn(args: list[str]) -> subprocess.Popen:
    from kernflow.core.testing.processes import spawn_script
    return spawn_script(_HERE, args)


def _read_line(proc: subprocess.Popen, prefix: str, what: str) -> str:
    from kernflow.core.testing.processes import read_prefixed
    return read_prefixed(proc, prefix, what)


def _free_ports(n: int) -> list[int]:
    from kernflow.core.testing.processes import free_ports
    return free_ports(n)


def run_round(name: str, workers: int, args, delay_ms: float) -> dict:
    """Starts a fresh cluster, trains `name`'s configuration, returns the round's figures."""
    ports = _free_ports(workers + 1)
    cluster = {"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{p}" for p in ports[1:]]}
    aggregate = {"async": 0, "sync": workers, "sync_straggler": workers,
                 "backup_straggler": workers - 1}[name]
    straggler = workers - 1 if name.endswith("straggler") else -1
    last_step = args.warmup + args.steps
    if name == "async":
        last_step = (args.warmup + args.steps) * workers   # every worker's steps count
    procs = [_spawn(["--serve-ps", json.dumps(cluster)])]
    try:
        for task in range(workers):
            cfg = {"cluster": cluster, "task": task, "aggregate": aggregate, "straggler": straggler,
                   "p": args.p, "delay_ms": delay_ms, "compute_ms": args.compute_ms,
                   "last_step": last_step}
            procs.append(_spawn(["--run-worker", json.dumps(cfg)]))
        for i, p in enumerate(procs):
            _read_line(p, "ready", f"task {i}")
        results = [json.loads(_read_line(p, "result ", f"worker {i}")[7:])
                   for i, p in enumerate(procs[1:])]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return _figures(name, results, args, workers)


def _figures(name, results, args, workers) -> dict:
    """Step time of one round (see the module docstring) and the compute time of a worker step."""
    compute = sorted(c for r in results for c in r["compute"][args.warmup:])
    if name == "async":
        per_worker = []
        for r in results:
            t = r["times"][args.warmup:]
            per_worker.append((t[-1] - t[0]) / max(len(t) - 1, 1))
        return {"step_s": statistics.mean(per_worker), "compute_median_s": statistics.median(compute)}
    chief = results[0]
    # The chief's view: the time it first saw each global step, from the first measured one.
    seen = {}
    for t, s in zip(chief["times"], chief["steps"]):
        seen.setdefault(s, t)
    lo, hi = args.warmup, args.warmup + args.steps
    keys = sorted(s for s in seen if lo <= s <= hi)
    span = keys[-1] - keys[0]
    gaps = sorted((seen[b] - seen[a]) / (b - a) for a, b in zip(keys, keys[1:]))
    return {"step_s": (seen[keys[-1]] - seen[keys[0]]) / span,
            "gap_median_s": statistics.median(gaps), "gap_p90_s": gaps[int(0.9 * (len(gaps) - 1))],
            "compute_median_s": statistics.median(compute)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--compute-ms", type=float, default=20.0)
    parser.add_argument("--p", type=float, default=0.1, help="the straggler's share of slow steps")
    parser.add_argument("--slowdown", type=float, default=5.0,
                        help="a slow step sleeps this many times the median compute time")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--quick", action="store_true", help="1 round of 100 steps")
    parser.add_argument("--serve-ps", help=argparse.SUPPRESS)
    parser.add_argument("--run-worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_ps:
        return serve_ps(json.loads(args.serve_ps))
    if args.run_worker:
        return run_worker(json.loads(args.run_worker))
    if args.quick:
        args.rounds, args.steps = 1, 100
    configs = [c for c in args.configs.split(",") if c]
    unknown = set(configs) - set(CONFIGS)
    if unknown:
        parser.error(f"unknown configurations {sorted(unknown)}; choose from {CONFIGS}")
    rows: dict[str, list[dict]] = {c: [] for c in configs}
    compute_median = None
    for r in range(args.rounds):
        for name in configs:
            if name.endswith("straggler") and compute_median is None:
                rows.setdefault("async", []).append(run_round("async", args.workers, args, 0.0))
                compute_median = rows["async"][-1]["compute_median_s"]
            delay_ms = args.slowdown * compute_median * 1e3 if name.endswith("straggler") else 0.0
            rows[name].append(run_round(name, args.workers, args, delay_ms))
            if name == "async":
                compute_median = statistics.median(x["compute_median_s"] for x in rows["async"])
            print(f"round {r + 1} {name}: {rows[name][-1]['step_s'] * 1e3:.1f} ms/step",
                  file=sys.stderr, flush=True)
    out = {"benchmark": "sync_replicas", "workers": args.workers, "rounds": args.rounds,
           "steps": args.steps, "warmup": args.warmup, "compute_ms": args.compute_ms, "p": args.p,
           "slowdown": args.slowdown, "machine": platform.platform(), "cpus": os.cpu_count(),
           "straggler_delay_ms": round(args.slowdown * (compute_median or 0.0) * 1e3, 2),
           "configs": {}}
    for name, rounds in rows.items():
        row = {"step_ms": round(statistics.median(x["step_s"] for x in rounds) * 1e3, 3),
               "step_ms_rounds": [round(x["step_s"] * 1e3, 3) for x in rounds],
               "compute_median_ms": round(statistics.median(x["compute_median_s"] for x in rounds) * 1e3, 3)}
        if "gap_median_s" in rounds[0]:
            row["gap_median_ms"] = round(statistics.median(x["gap_median_s"] for x in rounds) * 1e3, 3)
            row["gap_p90_ms"] = round(statistics.median(x["gap_p90_s"] for x in rounds) * 1e3, 3)
        out["configs"][name] = row
    ratios = {}
    c = out["configs"]
    if "sync" in c:
        for name, goal in (("sync_straggler", ">= 1.5"), ("backup_straggler", "<= 1.15")):
            if name in c:
                ratios[f"{name}/sync"] = {"ratio": round(c[name]["step_ms"] / c["sync"]["step_ms"], 3),
                                          "goal": goal}
        if "async" in c:
            ratios["sync/async"] = {"ratio": round(c["sync"]["step_ms"] / c["async"]["step_ms"], 3),
                                    "goal": "<= 1.3 (with --workers 2)"}
    out["ratios"] = ratios
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

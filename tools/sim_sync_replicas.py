"""Synchronous replication with backup workers at paper scale, by simulation (OSDI 2016, §4.4, Fig. 8c).

Usage: python tools/sim_sync_replicas.py [--workers 50 [100 200 ...]] [--backups B ...] [--steps 60]
                                         [--warmup 5] [--base-ms 60] [--jitter 0.1]
                                         [--straggler-prob 0.04] [--straggler-scale 0.5]
                                         [--straggler-alpha 2.5] [--seed 0] [--quick] [--png PATH]

For every N in --workers and every number of backup workers b, one process builds one graph with
N + b worker "towers" and runs it in one embedded `kf.Session`. Every tower is a real
`kf.train.SyncReplicasOptimizer` (replicas_to_aggregate=N, total_num_replicas=N + b) wrapping plain
gradient descent on a tiny model (one float32 variable of 4 elements, per-worker loss
``sum((w - c_i)^2)``). Within one session the towers share what the optimizer shares between
processes by ``shared_name`` (the variable's ConditionalAccumulator and the ``sync_token_q`` token
queue) while each keeps its own local step, exactly as N + b between-graph replicas would. Each
simulated worker is a Python thread looping: draw a compute time, sleep it (a timed wait, which
releases the GIL), run its tower's train op (apply the gradient with its local step, dequeue a token, set the
local step to it). A chief thread runs tower 0's sync op (what its chief QueueRunner runs: take the
mean of N gradients, apply it, increment the global step, enqueue N + b tokens) in a loop and
timestamps each completion; the step time is the time between consecutive completions, over
--steps global steps that start at the first step, from --warmup on, at which every worker has
finished a step of its own (a worker's first run prunes and compiles its step). The accumulator's
own counter (``dropped_gradients``) gives the stale gradients dropped during those steps (b per
step when every worker does one step per global step).

Against a TF1 job's script, four shortcuts, none of them in the coordination: each worker's
gradient ``2 (w - c_i)`` is written out rather than built by `kf.gradients` (which walks the whole
graph: quadratic in N + b); the non-chief towers' dropped-count variables, never used, are taken out
of GLOBAL_VARIABLES (each tower's readiness check would otherwise check every earlier tower's); the
chief runs the init ops directly instead of through `make_session_run_hook`; and its own loop
(which times the steps) replaces the QueueRunner's thread that would run the same sync op.

Compute times (seconds, drawn independently per worker step): ``base * LogNormal(0, jitter)``,
plus, with probability ``straggler_prob``, a straggler delay ``base * straggler_scale * P`` where P
is a classical Pareto variable with minimum 1 and shape ``straggler_alpha`` (a power-law tail).

Normalized speedup (as the paper's Fig. 8c): with t(b) the median step time with b backups,
``normalized_speedup(b) = [t(0) / t(b)] * [N / (N + b)]``: the step-time improvement discounted by
the extra workers used, i.e. training throughput per worker relative to no backups (1.0 at b = 0;
above 1 when backups pay for themselves).

Ideal: alongside each point, a Monte Carlo (numpy only) of the same distribution: the expected
and median N-th smallest of N + b independent draws, i.e. a step in which all N + b workers start
together and the step ends when N have finished, with no coordination cost. The gap to the
simulated step time is the cost of the real ops, the Python threads and the GIL, plus the effect
of workers not starting together (a dropped straggler keeps computing, then starts late).

What it models: the real coordination of TF1 synchronous replication, run by kernflow's own ops
and kernels: the conditional accumulator (aggregation of the first N gradients, dropping of stale
ones by local step), the token queue that releases workers into the next step, the chief's sync
op; heavy-tailed per-step compute times; the overhead of Python threads and the GIL on this
machine (part of what is measured).

What it does not model: network transfer time and bandwidth contention at the parameter server
(everything is in one process, gradients are 16 bytes), real computation, GPUs, multi-machine
effects (clock skew, NUMA, shared hosts that make stragglers correlated), failures and restarts.
Compute times are independent across workers and steps; real stragglers are often persistent.

Runtime on 2 cores: about 75 s for the default sweep (N = 50, 11 values of b, 60 steps each),
15 s with --quick; N = 200 takes 10-25 s per point (building and compiling 200-260 towers).

Output: JSON on stdout (configuration, machine, and per (N, b) point: step times, ideal step
times, normalized speedup, dropped gradients); --png PATH also writes a two-panel plot (step time
and normalized speedup against b, one line per N, ideal dashed), which needs matplotlib.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from dataclasses import asdict, dataclass

import numpy as np

# Backup workers as fractions of N: 0..15 for N = 50, 0..60 in steps of 4-12 for N = 200.
_BACKUP_FRACTIONS = (0, .02, .04, .06, .08, .1, .12, .16, .2, .24, .3)
_QUICK_FRACTIONS = (0, .04, .08, .16)
_DIM = 4                  # elements of the model's one variable
_IDEAL_TRIALS = 20000     # Monte Carlo steps per ideal point
_JOIN_S = 10.0            # how long the end of a point may take to release every thread


# ---------------------------------------------------------------------------- compute times
@dataclass(frozen=True)
class ComputeTimes:
    """The distribution of one worker step's compute time (see the module docstring).

    Args:
        base_ms: the median compute time of a worker step without a straggler delay.
        jitter: sigma of the lognormal factor on `base_ms`.
        straggler_prob: probability that a worker step is slowed by a straggler delay.
        straggler_scale: the smallest straggler delay, as a multiple of `base_ms`.
        straggler_alpha: the Pareto shape of the straggler delay (smaller: heavier tail).
    """

    base_ms: float = 60.0
    jitter: float = 0.1
    straggler_prob: float = 0.04
    straggler_scale: float = 0.5
    straggler_alpha: float = 2.5

    def draw(self, rng: np.random.Generator, size=None):
        """Compute times in seconds (an array of `size`, or a float)."""
        base = self.base_ms / 1000.0
        t = base * rng.lognormal(0.0, self.jitter, size)
        slow = rng.random(size) < self.straggler_prob
        delay = base * self.straggler_scale * (1.0 + rng.pareto(self.straggler_alpha, size))
        return t + slow * delay

    def mean_s(self) -> float:
        """The mean compute time in seconds (inf when the Pareto tail has no mean)."""
        base = self.base_ms / 1000.0
        a = self.straggler_alpha
        tail = a / (a - 1.0) if a > 1 else float("inf")
        return base * (np.exp(self.jitter ** 2 / 2) + self.straggler_prob * self.straggler_scale * tail)


def ideal_step_ms(times: ComputeTimes, n: int, b: int, trials: int = _IDEAL_TRIALS, seed: int = 0):
    """(mean, median) in ms of the N-th smallest of N + b compute times: the step time when all
    workers start each step together and the coordination costs nothing."""
    rng = np.random.default_rng([seed, n, b, 1])
    draws = times.draw(rng, (trials, n + b))
    nth = np.partition(draws, n - 1, axis=1)[:, n - 1] * 1000.0
    return float(np.mean(nth)), float(np.median(nth))


# ---------------------------------------------------------------------------- the graph
@dataclass
class _Sim:
    """One (N, b) configuration's graph and the ops the simulation runs."""

    graph: object
    trains: list            # one train op per worker tower
    init: list              # run in order before the threads start
    sync_op: object         # the chief's sync op (its QueueRunner's enqueue op)
    release: object         # N + b more tokens, for the workers still waiting at the end
    dropped: object         # the accumulator's dropped-gradient count


def build_sim(n: int, b: int) -> _Sim:
    """The graph of N + b workers: one SyncReplicasOptimizer tower per worker, tower 0 the chief."""
    import kernflow.core as kf
    g = kf.Graph()
    with g.as_default():
        w = kf.Variable(np.zeros([_DIM], np.float32), name="w")
        global_step = kf.train.get_or_create_global_step()
        base = kf.train.GradientDescentOptimizer(0.01)
        opts, trains = [], []
        for i in range(n + b):
            with kf.name_scope(f"worker_{i}"):
                # The gradient of this worker's loss sum((w - c_i)^2), written out: kf.gradients
                # walks the whole graph, which would make building N + b towers quadratic.
                grad = 2.0 * (w - kf.constant(np.full([_DIM], i / (n + b), np.float32)))
                opt = kf.train.SyncReplicasOptimizer(base, replicas_to_aggregate=n, total_num_replicas=n + b)
                trains.append(opt.apply_gradients([(grad, w)], global_step=global_step))
                opts.append(opt)
            if i > 0:
                # Only the chief's sync op runs, and with it only its dropped-count variable. Out of
                # GLOBAL_VARIABLES, the others do not enter every later tower's readiness check
                # (`report_uninitialized_variables`): O(N + b) graph nodes instead of O((N + b)^2).
                g.get_collection_ref(kf.GraphKeys.GLOBAL_VARIABLES).remove(opt.dropped_gradients_variable)
        chief = opts[0]
        init = [kf.group(kf.global_variables_initializer(), kf.local_variables_initializer()),
                kf.group(chief.chief_init_op, *[o.local_step_init_op for o in opts[1:]]),
                chief.get_init_tokens_op()]
        return _Sim(graph=g, trains=trains, init=init,
                    sync_op=chief.get_chief_queue_runner().enqueue_ops[0],
                    release=chief.get_init_tokens_op(n + b), dropped=chief.dropped_gradients)


# ---------------------------------------------------------------------------- one point
class _Run:
    """The shared state of one point's threads.

    The measured steps start at the first global step, from `warmup` on, at which every worker
    has finished a step of its own (its first run prunes and compiles its step, one worker at a
    time), and end `steps` global steps later. `marks` holds, for those two steps, the dropped
    gradients and the worker steps finished so far.
    """

    def __init__(self, workers: int, warmup: int, steps: int):
        self.workers, self.warmup, self.steps = workers, warmup, steps
        self.first_step: int | None = None
        self.stamps: list[float] = []              # when each global step completed
        self.marks: dict[int, tuple[int, int]] = {}
        self.iterations = 0                        # worker steps finished
        self.ready = 0                             # workers that finished a step
        self.stop = threading.Event()
        self.done = threading.Event()
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()

    def at_step(self, step: int) -> bool:
        """Whether `step` starts or ends the measured steps (deciding when it starts)."""
        if self.first_step is None and step >= self.warmup and self.ready == self.workers:
            self.first_step = step
            return True
        return self.first_step is not None and step == self.first_step + self.steps


def _is_cancelled(e: BaseException) -> bool:
    from kernflow.core.framework import errors
    return isinstance(e, errors.CancelledError) or \
        (isinstance(e, RuntimeError) and "closed Session" in str(e))


def _worker(sess, train, rng, times: ComputeTimes, run: _Run) -> None:
    first = True
    try:
        while not run.stop.is_set():
            if run.stop.wait(times.draw(rng)):     # the compute time (releases the GIL)
                return
            sess.run(train)
            with run.lock:
                run.iterations += 1
                run.ready += first
            first = False
    except BaseException as e:  # noqa: BLE001 - reported by the main thread
        if not _is_cancelled(e):
            run.errors.append(e)
            run.done.set()       # the others may now wait for this worker's gradients forever


def _chief(sess, sim: _Sim, run: _Run) -> None:
    try:
        while not run.stop.is_set():
            sess.run(sim.sync_op)
            run.stamps.append(time.perf_counter())
            step = len(run.stamps)
            if run.at_step(step):
                dropped = int(sess.run(sim.dropped))
                with run.lock:
                    run.marks[step] = (dropped, run.iterations)
                if step != run.first_step:
                    return
    except BaseException as e:  # noqa: BLE001 - reported by the main thread
        if not _is_cancelled(e):
            run.errors.append(e)
    finally:
        run.done.set()


def _finish(sess, sim: _Sim, run: _Run, threads, deadline: float) -> int:
    """Stops the threads: workers waiting for a token get release tokens; returns how many threads
    were still alive at the deadline (the session's close cancels their ops)."""
    run.stop.set()
    while time.monotonic() < deadline:
        alive = [t for t in threads if t.is_alive()]
        if not alive:
            return 0
        try:
            sess.run(sim.release)
        except BaseException as e:
            if not _is_cancelled(e):
                raise
        until = time.monotonic() + 0.05
        for t in alive:
            t.join(max(0.0, until - time.monotonic()))
    return sum(t.is_alive() for t in threads)


def run_point(n: int, b: int, times: ComputeTimes, steps: int, warmup: int, seed: int = 0,
              timeout_s: float | None = None) -> dict:
    """Simulates N + b workers for `warmup` + `steps` global steps; returns the point's numbers.

    Args:
        n: gradients aggregated per step (replicas_to_aggregate).
        b: backup workers (total_num_replicas = n + b).
        times: the compute time distribution.
        steps: measured global steps.
        warmup: global steps run before the measured ones (at least 1).
        seed: seeds the workers' compute times.
        timeout_s: give up on the measured steps after this long (default: generous).

    Returns:
        A dict: n, b, step_ms (mean, median, p90, steps measured), ideal_ms (mean, median),
        dropped (count and per step), worker steps per global step, timed_out, seconds.

    Raises:
        RuntimeError: a worker or the chief failed, or threads did not stop.
    """
    import kernflow.core as kf
    warmup = max(1, warmup)
    started = time.perf_counter()
    sim = build_sim(n, b)
    run = _Run(n + b, warmup, steps)
    if timeout_s is None:
        timeout_s = 60.0 + 20.0 * (warmup + steps) * min(times.mean_s(), 1.0)
    rngs = [np.random.default_rng(s) for s in np.random.SeedSequence([seed, n, b]).spawn(n + b)]
    with kf.Session(graph=sim.graph) as sess:
        for op in sim.init:
            sess.run(op)
        threads = [threading.Thread(target=_chief, args=(sess, sim, run), name="sim-chief", daemon=True)]
        threads += [threading.Thread(target=_worker, args=(sess, train, rngs[i], times, run),
                                     name=f"sim-worker-{i}", daemon=True)
                    for i, train in enumerate(sim.trains)]
        for t in threads:
            t.start()
        timed_out = not run.done.wait(timeout_s)
        stuck = _finish(sess, sim, run, threads[1:], time.monotonic() + _JOIN_S)
    # Closing the session cancelled the chief's take and any op still waiting.
    until = time.monotonic() + _JOIN_S
    for t in threads:
        t.join(max(0.0, until - time.monotonic()))
    if run.errors:
        raise RuntimeError(f"N={n} b={b}: {run.errors[0]!r}") from run.errors[0]
    if any(t.is_alive() for t in threads):
        raise RuntimeError(f"N={n} b={b}: {sum(t.is_alive() for t in threads)} threads did not stop")
    return _summary(n, b, times, run, timed_out, stuck, time.perf_counter() - started, seed)


def _summary(n, b, times, run: _Run, timed_out, stuck, seconds, seed) -> dict:
    first = run.first_step
    marks = [run.marks.get(first), run.marks.get(first + run.steps)] if first else [None, None]
    measured = 0
    if first is not None:
        gaps = np.diff(run.stamps[first - 1:first + run.steps]) * 1000.0
        measured = len(gaps)
    ideal_mean, ideal_median = ideal_step_ms(times, n, b, seed=seed)
    out = {"n": n, "b": b, "warmup_steps": first, "steps_measured": measured,
           "step_ms": {"mean": _round(np.mean(gaps)) if measured else None,
                       "median": _round(np.median(gaps)) if measured else None,
                       "p90": _round(np.percentile(gaps, 90)) if measured else None},
           "ideal_ms": {"mean": _round(ideal_mean), "median": _round(ideal_median)},
           "dropped": None, "dropped_per_step": None, "worker_steps_per_step": None,
           "timed_out": timed_out, "seconds": _round(seconds, 2)}
    if None not in marks and measured:
        (d0, i0), (d1, i1) = marks
        out["dropped"] = d1 - d0
        out["dropped_per_step"] = _round((d1 - d0) / measured, 3)
        out["worker_steps_per_step"] = _round((i1 - i0) / measured, 3)
    if stuck:
        out["threads_cancelled_at_close"] = stuck
    return out


def _round(x, digits=3):
    return None if x is None else round(float(x), digits)


def add_speedups(points: list[dict]) -> None:
    """Adds speedup and normalized_speedup (simulated and ideal, from medians) relative to the
    b = 0 point of the same N (None when there is none)."""
    base = {p["n"]: p for p in points if p["b"] == 0}
    for p in points:
        p0 = base.get(p["n"])
        for key, src in (("", "step_ms"), ("ideal_", "ideal_ms")):
            t0 = p0[src]["median"] if p0 else None
            tb = p[src]["median"]
            speed = t0 / tb if t0 and tb else None
            p[key + "speedup"] = _round(speed)
            p[key + "normalized_speedup"] = _round(speed * p["n"] / (p["n"] + p["b"])) if speed else None


# ---------------------------------------------------------------------------- sweep, plot, main
def backups_for(n: int, fractions=_BACKUP_FRACTIONS) -> list[int]:
    """The numbers of backup workers swept for N: round(N * f) for each fraction, deduplicated."""
    return sorted({round(n * f) for f in fractions})


def plot(points: list[dict], path: str) -> None:
    """Writes the two-panel PNG: step time and normalized speedup against b, ideal dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, n in enumerate(sorted({p["n"] for p in points})):
        mine = sorted((p for p in points if p["n"] == n), key=lambda p: p["b"])
        color = f"C{i}"
        bs = [p["b"] for p in mine]
        ax_t.plot(bs, [p["step_ms"]["median"] for p in mine], "o-", color=color, label=f"N={n} simulated")
        ax_t.plot(bs, [p["ideal_ms"]["median"] for p in mine], "--", color=color, label=f"N={n} ideal")
        ax_s.plot(bs, [p["normalized_speedup"] for p in mine], "o-", color=color, label=f"N={n} simulated")
        ax_s.plot(bs, [p["ideal_normalized_speedup"] for p in mine], "--", color=color,
                  label=f"N={n} ideal")
    ax_t.set(xlabel="backup workers b", ylabel="median step time (ms)", title="Step time")
    ax_s.axhline(1.0, color="grey", lw=0.8)
    ax_s.set(xlabel="backup workers b", ylabel="t(0)/t(b) × N/(N+b)", title="Normalized speedup")
    for ax in (ax_t, ax_s):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Synchronous replicas with backup workers, simulated (cf. OSDI'16 TensorFlow Fig. 8c)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, nargs="+", default=[50], metavar="N",
                    help="gradients aggregated per step (the paper: 50); one sweep per N")
    ap.add_argument("--backups", type=int, nargs="+", default=None, metavar="B",
                    help="backup-worker counts (default: round(N * f) for f in "
                         f"{list(_BACKUP_FRACTIONS)})")
    ap.add_argument("--steps", type=int, default=60, help="measured global steps per point")
    ap.add_argument("--warmup", type=int, default=5, help="global steps before the measured ones")
    defaults = ComputeTimes()
    ap.add_argument("--base-ms", type=float, default=defaults.base_ms, help="median compute time (ms)")
    ap.add_argument("--jitter", type=float, default=defaults.jitter, help="lognormal sigma on --base-ms")
    ap.add_argument("--straggler-prob", type=float, default=defaults.straggler_prob,
                    help="probability of a straggler delay per worker step")
    ap.add_argument("--straggler-scale", type=float, default=defaults.straggler_scale,
                    help="smallest straggler delay, in units of --base-ms")
    ap.add_argument("--straggler-alpha", type=float, default=defaults.straggler_alpha,
                    help="Pareto shape of the straggler delay (smaller: heavier tail)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help=f"20 steps, 3 warmup, b = round(N * f) for f in {list(_QUICK_FRACTIONS)}")
    ap.add_argument("--png", metavar="PATH", help="also write the plot (needs matplotlib)")
    return ap


def _check_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise SystemExit("--png needs matplotlib, which is not installed: pip install matplotlib") from None


def main(argv=None) -> dict:
    """Runs the sweep, prints the JSON and (with --png) writes the plot; returns the JSON's dict."""
    args = _parser().parse_args(argv)
    if args.png:
        _check_matplotlib()
    if args.quick:
        args.steps, args.warmup = 20, 3
    if any(n < 1 for n in args.workers) or (args.backups and min(args.backups) < 0) or args.steps < 2:
        raise SystemExit("--workers must be >= 1, --backups >= 0 and --steps >= 2")
    times = ComputeTimes(args.base_ms, args.jitter, args.straggler_prob, args.straggler_scale,
                         args.straggler_alpha)
    started = time.perf_counter()
    points = []
    for n in args.workers:
        bs = sorted(set(args.backups)) if args.backups else \
            backups_for(n, _QUICK_FRACTIONS if args.quick else _BACKUP_FRACTIONS)
        for b in bs:
            p = run_point(n, b, times, args.steps, args.warmup, seed=args.seed)
            print(f"N={n} b={b}: median step {p['step_ms']['median']} ms (ideal {p['ideal_ms']['median']}),"
                  f" dropped {p['dropped']}, {p['seconds']} s", file=sys.stderr, flush=True)
            points.append(p)
    add_speedups(points)
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    out = {"command": f"python tools/sim_sync_replicas.py {cmd}".strip(),
           "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                       "numpy": np.__version__, "platform": platform.platform()},
           "compute_times": asdict(times), "compute_mean_ms": _round(times.mean_s() * 1000.0),
           "steps": args.steps, "warmup": args.warmup, "seed": args.seed,
           "normalized_speedup": "median t(0) / median t(b) * N / (N + b)",
           "seconds": _round(time.perf_counter() - started, 1), "points": points}
    print(json.dumps(out, indent=2))
    if args.png:
        os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
        plot(points, args.png)
    return out


if __name__ == "__main__":
    main()
    sys.exit(0)

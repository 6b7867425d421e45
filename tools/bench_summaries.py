"""Summary-writing overhead: the digits MLP of bench_training.py (64-128-128-10, ReLU, SGD, batch 64).

Times one training step
  (a) ``plain``: ``[train, loss]`` through ``Session.make_callable``, no summaries;
  (b) ``every_step``: ``[train, loss, merged]`` (scalar summaries of loss and batch accuracy) and
      ``FileWriter.add_summary`` after every step;
  (c) under ``MonitoredTrainingSession``: ``mts_summaries`` (summary_dir set, save_summaries_steps=100,
      so a SummarySaverHook and TF's default StepCounterHook) against ``mts_off`` (no summary_dir: no
      hooks), and ``mts_summary_hook_only`` (log_step_count_steps=0) to tell the two hooks apart.
Contenders alternate every ``--block`` steps (50) so load on a shared machine hits them alike; each
ratio is the median of the rounds' ratios, each of its blocks' totals.
``add_summary_us`` is the time ``add_summary`` kept the training thread (it encodes the event and
enqueues it; the writer thread frames and writes), with the deepest queue seen: measured on a copy of
(b), ``every_step_timed``, so that the timing code is not in (b)'s ratio.

``--tf-python PATH`` runs the identical program under TensorFlow's tf.compat.v1 in that interpreter
(same data, same graph code) and reports it side by side.

Each framework is measured in ``--processes`` fresh processes (3), the frameworks taking turns to
go first; every figure is the median over the processes (a process's memory layout alone moves a
ratio by a percent or two), with each process's ratios under ``per_process``.

Usage: python tools/bench_summaries.py [--steps 300] [--rounds 7] [--block 50] [--processes 3]
                                       [--tf-python /tmp/tfvenv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_training import LR, _init  # noqa: E402  (the same model and initial weights)

GOALS = {"every_step_ratio": 1.1, "mts_ratio": 1.02}


def load_framework(name):
    """kernflow.core, or tensorflow.compat.v1 in graph mode."""
    if name == "kernflow":
        import kernflow.core as fw
        return fw
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow.compat.v1 as fw
    fw.disable_eager_execution()
    return fw


def build(fw):
    """The MLP with a global step and the loss/accuracy scalar summaries, in a new graph."""
    ws, bs = _init()
    g = fw.Graph()
    with g.as_default():
        x = fw.placeholder(fw.float32, [None, 64], name="x")
        y = fw.placeholder(fw.int64, [None], name="y")
        h = x
        for i, (w0, b0) in enumerate(zip(ws, bs)):
            h = fw.matmul(h, fw.Variable(w0)) + fw.Variable(b0)
            if i < len(ws) - 1:
                h = fw.nn.relu(h)
        loss = fw.reduce_mean(fw.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
        accuracy = fw.reduce_mean(fw.cast(fw.equal(fw.argmax(h, 1), y), fw.float32))
        step = fw.train.get_or_create_global_step()
        train = fw.train.GradientDescentOptimizer(LR).minimize(loss, global_step=step)
        fw.summary.scalar("loss", loss)
        fw.summary.scalar("accuracy", accuracy)
        merged = fw.summary.merge_all()
        init = fw.global_variables_initializer()
    return types.SimpleNamespace(graph=g, x=x, y=y, loss=loss, train=train, merged=merged, init=init)


class Plain:
    """(a): make_callable([train, loss])."""

    def __init__(self, fw, logdir):
        self.m = build(fw)
        self.sess = fw.Session(graph=self.m.graph)
        self.sess.run(self.m.init)
        self.fn = self.sess.make_callable([self.m.train, self.m.loss], feed_list=[self.m.x, self.m.y])

    def step(self, xb, yb):
        self.fn(xb, yb)

    def close(self):
        self.sess.close()


class EveryStep(Plain):
    """(b): make_callable([train, loss, merged]) and add_summary after every step."""

    def __init__(self, fw, logdir):
        super().__init__(fw, logdir)
        self.fn = self.sess.make_callable([self.m.train, self.m.loss, self.m.merged],
                                          feed_list=[self.m.x, self.m.y])
        self.writer = fw.summary.FileWriter(logdir, self.m.graph)
        self.i = 0

    def step(self, xb, yb):
        self.writer.add_summary(self.fn(xb, yb)[2], self.i)
        self.i += 1

    def close(self):
        self.writer.close()
        super().close()


class EveryStepTimed(EveryStep):
    """(b) with `add_summary` timed and the writer's queue depth sampled: for the latencies only,
    so that the timing code is not in the ratio."""

    def __init__(self, fw, logdir):
        super().__init__(fw, logdir)
        self.queue = getattr(getattr(self.writer, "event_writer", None), "_queue", None)
        self.add_s, self.depth = [], 0

    def step(self, xb, yb):
        summary = self.fn(xb, yb)[2]
        if self.queue is not None:
            self.depth = max(self.depth, self.queue.qsize())
        t = time.perf_counter()
        self.writer.add_summary(summary, self.i)
        self.add_s.append(time.perf_counter() - t)
        self.i += 1


class Monitored:
    """(c): MonitoredTrainingSession.run([train, loss], feed_dict) with the given summary options."""

    def __init__(self, fw, logdir, **mts_args):
        self.m = build(fw)
        with self.m.graph.as_default():
            self.sess = fw.train.MonitoredTrainingSession(**mts_args)
        self.fetches = [self.m.train, self.m.loss]

    def step(self, xb, yb):
        self.sess.run(self.fetches, {self.m.x: xb, self.m.y: yb})

    def close(self):
        self.sess.close()


CONTENDERS = {
    "plain": Plain,
    "every_step": EveryStep,
    "every_step_timed": EveryStepTimed,
    "mts_off": lambda fw, d: Monitored(fw, d, summary_dir=None),
    "mts_summaries": lambda fw, d: Monitored(fw, d, summary_dir=d, save_summaries_steps=100),
    "mts_summary_hook_only": lambda fw, d: Monitored(fw, d, summary_dir=d, save_summaries_steps=100,
                                                      log_step_count_steps=0),
}


def _time(contender, batches, steps):
    t = time.perf_counter()
    for i in range(steps):
        contender.step(*batches[i % len(batches)])
    return (time.perf_counter() - t) / steps


def measure(framework, batches, steps, rounds, block=50):
    """Per-step seconds of every contender's blocks: `rounds` rounds of `steps` steps each, the
    contenders alternating every `block` steps."""
    fw = load_framework(framework)
    with tempfile.TemporaryDirectory(prefix="bench_summaries_") as root:
        live = {name: make(fw, os.path.join(root, name)) for name, make in CONTENDERS.items()}
        try:
            for c in live.values():  # warm up: compile the steps, start the writer threads
                _time(c, batches, 30)
            # Contenders alternate every `block` steps, so each ratio compares blocks run within a
            # few milliseconds of each other: this machine's phases (the same step taking 420 us
            # or 1,000 us for seconds at a time) then move both sides of a ratio alike.
            # A round's ratio is of its totals, so it includes the steps that save (every 100th).
            times = {name: [] for name in live}
            blocks = max(1, steps // block)
            for _ in range(rounds):
                total = dict.fromkeys(live, 0.0)
                for _ in range(blocks):
                    for name, c in live.items():
                        total[name] += _time(c, batches, min(block, steps))
                for name in live:
                    times[name].append(total[name] / blocks)
            every = live["every_step_timed"]
            add_us = np.array(every.add_s[30 * 1:]) * 1e6  # without the warm-up
            depth = every.depth if every.queue is not None else None
        finally:
            for c in live.values():
                c.close()
    return _report(times, add_us, depth)


def _ratio(times, a, b):
    return round(statistics.median(x / y for x, y in zip(times[a], times[b])), 3)


def _report(times, add_us, depth):
    row = {f"{name}_us": round(statistics.median(v) * 1e6, 1) for name, v in times.items()}
    row["every_step_ratio"] = _ratio(times, "every_step", "plain")
    row["mts_ratio"] = _ratio(times, "mts_summaries", "mts_off")
    row["mts_summary_hook_only_ratio"] = _ratio(times, "mts_summary_hook_only", "mts_off")
    row["add_summary_us"] = {"p50": round(float(np.percentile(add_us, 50)), 1),
                             "p99": round(float(np.percentile(add_us, 99)), 1),
                             "max": round(float(add_us.max()), 1)}
    row["writer_queue_max_depth"] = depth
    return row


def _batches(path=None, batch=64):
    if path:
        with np.load(path) as d:
            return list(zip(d["x"], d["y"]))
    from bench_training import _data
    return _data(batch)


def _child(python, framework, data_path, args):
    """One framework measured in a fresh process (`python` runs this file): its row, or raises."""
    r = subprocess.run([python, os.path.abspath(__file__), "--framework", framework, "--child", "--data",
                        data_path, "--steps", str(args.steps), "--rounds", str(args.rounds),
                        "--block", str(args.block)], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        raise RuntimeError(f"{framework} run failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout)


def _combine(rows):
    """The rows of several processes as one: each figure the median over the processes, with each
    process's ratios beside it."""
    out = {}
    for key, v in rows[0].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = round(statistics.median(r[key] for r in rows), 3 if "ratio" in key else 1)
        elif key == "writer_queue_max_depth" and all(r[key] is not None for r in rows):
            out[key] = max(r[key] for r in rows)
        elif key == "add_summary_us":
            out[key] = {k: round(statistics.median(r[key][k] for r in rows), 1) for k in v}
        else:
            out[key] = v if len(rows) == 1 else [r[key] for r in rows]
    if len(rows) > 1:
        out["per_process"] = {key: [r[key] for r in rows] for key in rows[0] if key.endswith("ratio")}
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="steps per contender and round")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--block", type=int, default=50, help="steps a contender runs before the next one's turn")
    p.add_argument("--processes", type=int, default=3,
                   help="fresh processes per framework (each its rounds); figures are their medians")
    p.add_argument("--tf-python", default=None,
                   help="a Python with TensorFlow (e.g. /tmp/tfvenv/bin/python) to run the same program")
    p.add_argument("--framework", choices=["kernflow", "tensorflow"], default="kernflow",
                   help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    batches = _batches(args.data)
    if args.child:   # one framework in this process, bare JSON
        print(json.dumps(measure(args.framework, batches, args.steps, args.rounds, args.block)))
        return 0
    res = {"workload": "digits MLP 64-128-128-10 SGD step, batch 64", "steps_per_round": args.steps,
           "rounds": args.rounds, "block": args.block, "processes": args.processes}
    tf_python = args.tf_python
    if tf_python and not os.path.exists(tf_python):
        res["tensorflow_skipped"] = f"no TensorFlow interpreter at {tf_python!r}: TensorFlow not measured"
        print(f"bench_summaries: {res['tensorflow_skipped']}", file=sys.stderr)
        tf_python = None
    rows = {"kernflow": [], "tensorflow": []}
    with tempfile.TemporaryDirectory(prefix="bench_summaries_data_") as d:
        path = os.path.join(d, "batches.npz")
        np.savez(path, x=np.stack([b[0] for b in batches]), y=np.stack([b[1] for b in batches]))
        for i in range(args.processes):
            # The frameworks take turns going first; a process's memory layout moves a ratio by a
            # percent or two, so each is measured in several fresh processes.
            order = [("kernflow", sys.executable)] + ([("tensorflow", tf_python)] if tf_python else [])
            for framework, python in (order if i % 2 == 0 else order[::-1]):
                try:
                    rows[framework].append(_child(python, framework, path, args))
                except RuntimeError as e:
                    if framework == "kernflow":
                        raise
                    res["tensorflow_skipped"] = str(e)
                    print(f"bench_summaries: {e}", file=sys.stderr)
                    tf_python = None
    res["kernflow"] = _combine(rows["kernflow"])
    if rows["tensorflow"]:
        res["tensorflow"] = _combine(rows["tensorflow"])
    res["goals"] = GOALS
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

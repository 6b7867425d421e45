"""What the Python session layer adds to a step: `Session.run` against `make_callable`, fetching a
Variable, and a monitored session's hooks.

Every contender runs the same trivial graph (two placeholders reduced, a variable and the global
step bumped), so the kernels cost a few microseconds and the rest is the session layer:

  run_feed_dict     ``sess.run([a, b], {x: .., y: ..})``
  make_callable     the same step through ``sess.make_callable([a, b], [x, y])``
  run_tensor_step   ``sess.run([train, step_read])`` (the global step as a tensor)
  run_variable_step ``sess.run([train, global_step])`` (the Variable itself, as TF1 loops do)
  mts_off           ``MonitoredTrainingSession.run([train, loss], feeds)``, no hooks
  mts_counter       with a StepCounterHook (every 100 steps)
  mts_saver         with a SummarySaverHook (every 100 steps)
  mts_both          with both (what ``summary_dir`` + ``save_summaries_steps`` install)

Rounds alternate between the contenders; each figure is the median over rounds of CPU time
(`time.process_time`) per step, in microseconds, and each ``*_extra_us`` the median of per-round
differences against its baseline. CPU time, not wall time: on a shared 2-core machine it is the
steadier of the two for differences of a few microseconds.

Usage: python tools/bench_session_overhead.py [--steps 3000] [--rounds 9]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import numpy as np

import kernflow.core as kf


def _graph():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 4], name="x")
        y = kf.placeholder(kf.int64, [None], name="y")
        a, b = kf.reduce_sum(x), kf.reduce_sum(y)
        v = kf.Variable(np.zeros(4, np.float32))
        step = kf.train.get_or_create_global_step()
        train = kf.group(kf.assign_add(v, kf.reduce_mean(x, 0)), kf.assign_add(step, 1))
        kf.summary.scalar("a", a)
        g.init = kf.global_variables_initializer()
    return g, x, y, a, b, step, train


def _contenders(logdir):
    xb, yb = np.ones((8, 4), np.float32), np.ones(8, np.int64)
    out = {}
    g, x, y, a, b, step, train = _graph()
    sess = kf.Session(graph=g)
    sess.run(g.init)
    fetches, feeds = [a, b], {x: xb, y: yb}
    out["run_feed_dict"] = lambda: sess.run(fetches, feeds)
    fn = sess.make_callable(fetches, [x, y])
    out["make_callable"] = lambda: fn(xb, yb)
    with g.as_default():
        step_read = kf.identity(step)
    tensor_step, variable_step = [train, step_read], [train, step]
    out["run_tensor_step"] = lambda: sess.run(tensor_step, feeds)
    out["run_variable_step"] = lambda: sess.run(variable_step, feeds)

    def monitored(kind):
        g, x, y, a, b, step, train = _graph()
        with g.as_default():
            hooks = []
            if kind in ("counter", "both"):
                hooks.append(kf.train.StepCounterHook(every_n_steps=100, output_dir=f"{logdir}/{kind}"))
            if kind in ("saver", "both"):
                hooks.append(kf.train.SummarySaverHook(save_steps=100, output_dir=f"{logdir}/{kind}",
                                                       summary_op=kf.summary.merge_all()))
            mts = kf.train.MonitoredTrainingSession(hooks=hooks)
        f, fd = [train, a], {x: xb, y: yb}
        return lambda: mts.run(f, fd), mts

    closers = [sess.close]
    for kind in ("off", "counter", "saver", "both"):
        out[f"mts_{kind}"], mts = monitored(kind)
        closers.append(mts.close)
    return out, closers


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_session_overhead_") as logdir:
        live, closers = _contenders(logdir)
        try:
            for f in live.values():   # warm up: compile the steps, start the writers
                for _ in range(200):
                    f()
            times = {k: [] for k in live}
            for _ in range(args.rounds):
                for k, f in live.items():
                    t = time.process_time()
                    for _ in range(args.steps):
                        f()
                    times[k].append((time.process_time() - t) / args.steps * 1e6)
        finally:
            for close in closers:
                close()

    def extra(k, base):
        return round(statistics.median(a - b for a, b in zip(times[k], times[base])), 2)

    row = {f"{k}_us": round(statistics.median(v), 2) for k, v in times.items()}
    row.update({
        "run_feed_dict_extra_us": extra("run_feed_dict", "make_callable"),
        "fetch_variable_extra_us": extra("run_variable_step", "run_tensor_step"),
        "mts_counter_extra_us": extra("mts_counter", "mts_off"),
        "mts_saver_extra_us": extra("mts_saver", "mts_off"),
        "mts_both_extra_us": extra("mts_both", "mts_off"),
    })
    print(json.dumps({"benchmark": "session_overhead", "unit": "us of CPU per step",
                      "steps_per_round": args.steps, "rounds": args.rounds, "kernflow": row}, indent=2))


if __name__ == "__main__":
    main()

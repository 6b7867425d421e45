"""Loops and conditionals split over two worker processes give the embedded runtime's results.

The master partitions with core's `partition`, so each task gets the per-device control loops of
runtime/partition_control_flow.py; the loop predicate and loop tensors cross between the tasks
once per iteration over gRPC, with their frame and iteration in the rendezvous key, and dead
tensors of untaken branches cross as dead.
"""

from __future__ import annotations

import contextlib
import json
import sys

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import ChildProcess, free_ports

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

pytestmark = pytest.mark.slow

_START_TIMEOUT_S = 30.0

SERVER = r"""
import json, sys
import kernflow.core as kf
server = kf.train.Server(json.loads(sys.argv[1]), job_name=sys.argv[2], task_index=int(sys.argv[3]))
print("ready", server.target, flush=True)
server.join()
"""


@contextlib.contextmanager
def _workers(n: int):
    """Starts `n` worker tasks; yields their targets and kills them on the way out."""
    cluster = {"worker": [f"localhost:{p}" for p in free_ports(n)]}
    kids = []
    try:
        for i in range(n):
            kids.append(ChildProcess(f"/job:worker/task:{i}",
                                     [sys.executable, "-c", SERVER, json.dumps(cluster), "worker", str(i)]))
        yield [kid.expect("ready", _START_TIMEOUT_S, prefix=True).split()[1] for kid in kids]
    finally:
        for kid in kids:
            kid.kill()


def _graph(dev0, dev1, parallel_iterations):
    """Nested while loops and a cond, with the ops of every loop on both devices (None: unplaced).

    for i < n: x = tanh(1.1 x + i / 100) (dev1); s = sum_{j < i} j * mean(x) (j on dev1, s on
    dev0); acc += sum(x) + s (dev0). Then 2x if acc > 10 else x - 1 (dev1).
    """
    def on(dev):
        return kf.device(dev) if dev else contextlib.nullcontext()

    g = kf.Graph()
    with g.as_default():
        n = kf.placeholder(kf.int32, [], name="n")
        x0 = kf.placeholder(kf.float32, [8], name="x0")

        def body(i, x, acc):
            with on(dev1):
                x1 = kf.tanh(x * 1.1 + kf.cast(i, kf.float32) * 0.01)

            def inner_body(j, s):
                with on(dev1):
                    j1 = j + 1
                with on(dev0):
                    s1 = s + kf.cast(j, kf.float32) * kf.reduce_mean(x1)
                return j1, s1

            with on(dev0):
                _, inner = kf.while_loop(lambda j, s: j < i, inner_body,
                                         [kf.constant(0), kf.constant(0.0)],
                                         parallel_iterations=parallel_iterations)
                acc1 = acc + kf.reduce_sum(x1) + inner
                i1 = i + 1
            return i1, x1, acc1

        with on(dev0):
            outs = kf.while_loop(lambda i, x, acc: i < n, body, [kf.constant(0), x0, kf.constant(0.0)],
                                 parallel_iterations=parallel_iterations)
        with on(dev1):
            res = kf.cond(outs[2] > 10.0, lambda: outs[1] * 2.0, lambda: outs[1] - 1.0)
    return g, n, x0, list(outs) + [res]


_CASES = [0, 1, 4, 25]


def _run_all(target, dev0, dev1, parallel_iterations):
    g, n, x0, fetches = _graph(dev0, dev1, parallel_iterations)
    xv = np.linspace(-1.0, 1.0, 8).astype(np.float32)
    with kf.Session(target, graph=g) as sess:
        out = [sess.run(fetches, {n: nv, x0: xv}) for nv in _CASES]
        md = kf.RunMetadata()
        sess.run(fetches, {n: 2, x0: xv}, options=kf.RunOptions(output_partition_graphs=True),
                 run_metadata=md)
    return out, md.partition_graphs


@pytest.mark.parametrize("parallel_iterations", [1, 10])
def test_loops_split_over_two_workers_match_the_embedded_run(parallel_iterations):
    want, _ = _run_all("", None, None, parallel_iterations)
    assert [w[0] for w in want] == _CASES
    assert want[-1][2] > 10.0 > want[1][2]       # both branches of the cond are taken
    with _workers(2) as targets:
        got, parts = _run_all(targets[0], "/job:worker/task:0", "/job:worker/task:1",
                              parallel_iterations)
    # Each task runs a control loop for the outer and the inner loop.
    loops = {}
    for p in parts:
        for nd in p.node:
            if nd.op == "Merge" and nd.name.startswith("_loop_"):
                loops.setdefault(nd.device.split("/device")[0], []).append(nd.name)
    assert sorted(loops) == ["/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]
    assert all(len(v) == 2 for v in loops.values()), loops
    for w, a in zip(want, got):
        for u, v in zip(w, a):
            np.testing.assert_array_equal(v, u)

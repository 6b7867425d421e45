"""A queue on the ps task of a multi-process cluster, fed by one worker and drained by another.

Three processes, each a ``kf.train.Server``: the ps serves; worker 0 builds a graph whose shared
FIFOQueue sits on ``/job:ps/task:0``, computes batches on its own task and enqueues them; worker 1
builds the same queue and dequeues. Each worker runs its own session on its own task. The queue is
smaller than what is sent, so both sides block on each other across processes: worker 1 starts
first and waits on an empty queue, worker 0 then waits on a full one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernflow.core.testing.processes import ChildProcess, free_ports

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

pytestmark = pytest.mark.slow

_TIMEOUT_S = 60.0

PS = r"""
import json, sys
import kernflow.core as kf
server = kf.train.Server(json.loads(sys.argv[1]), job_name="ps", task_index=0)
print("ready", server.target, flush=True)
server.join()
"""

# Both workers build the queue the same way: shared by name, on the ps task.
COMMON = r"""
import json, sys
import numpy as np
import kernflow.core as kf
from kernflow.core.framework import errors

cfg = json.loads(sys.argv[1])
task = cfg["task"]
server = kf.train.Server(cfg["cluster"], job_name="worker", task_index=task)
print("ready", server.target, flush=True)
g = kf.Graph()
with g.as_default():
    with kf.device("/job:ps/task:0"):
        q = kf.FIFOQueue(cfg["capacity"], [kf.float32, kf.int32], shapes=[[4], []],
                         shared_name="ps_queue", name="ps_queue")
"""

PRODUCER = COMMON + r"""
    with kf.device("/job:worker/task:0"):
        ids = kf.placeholder(kf.int32, [None], name="ids")
        rows = kf.tile(kf.reshape(kf.cast(ids, kf.float32) * 2.0, [-1, 1]), [1, 4])  # on worker 0
    enq = q.enqueue_many([rows, ids])
    close = q.close()
sent = 0
with kf.Session(server.target, graph=g) as sess:
    for start in range(0, cfg["n"], cfg["chunk"]):
        chunk = np.arange(start, min(start + cfg["chunk"], cfg["n"]), dtype=np.int32)
        sess.run(enq, {ids: chunk})
        sent += len(chunk)
    sess.run(close)
print("produced", json.dumps({"sent": sent, "queue_device": q.queue_ref.op.device,
                              "enqueue_device": enq.device, "rows_device": rows.op.device}),
      flush=True)
server.join()
"""

CONSUMER = COMMON + r"""
    xs, ids = q.dequeue_up_to(cfg["batch"])
    with kf.device("/job:worker/task:1"):
        total = kf.reduce_sum(xs)                                                     # on worker 1
got, sums, batches = [], 0.0, 0
with kf.Session(server.target, graph=g) as sess:
    print("consuming", flush=True)
    while True:
        try:
            i, s = sess.run([ids, total])
        except errors.OutOfRangeError:
            break
        got.extend(int(v) for v in i)
        sums += float(s)
        batches += 1
print("consumed", json.dumps({"ids": got, "sum": sums, "batches": batches,
                              "dequeue_device": ids.op.device}), flush=True)
server.join()
"""



def test_ps_queue_fed_by_one_worker_and_drained_by_another():
    ps_port, w0_port, w1_port = free_ports(3)
    cluster = {"ps": [f"localhost:{ps_port}"],
               "worker": [f"localhost:{w0_port}", f"localhost:{w1_port}"]}
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    n, capacity = 120, 8
    kids = []
    try:
        ps = ChildProcess("ps", [sys.executable, "-c", PS, json.dumps(cluster)], env=env)
        kids.append(ps)
        ps.expect("ready", _TIMEOUT_S, prefix=True)
        base = {"cluster": cluster, "capacity": capacity}
        consumer = ChildProcess("worker 1", [sys.executable, "-c", CONSUMER,
                                             json.dumps(dict(base, task=1, batch=5))], env=env)
        kids.append(consumer)
        consumer.expect("consuming", _TIMEOUT_S, prefix=True)
        producer = ChildProcess("worker 0", [sys.executable, "-c", PRODUCER,
                                             json.dumps(dict(base, task=0, n=n, chunk=7))], env=env)
        kids.append(producer)
        produced = json.loads(producer.expect("produced", _TIMEOUT_S, prefix=True).split(" ", 1)[1])
        consumed = json.loads(consumer.expect("consumed", _TIMEOUT_S, prefix=True).split(" ", 1)[1])
    finally:
        for k in kids:
            k.kill()
    assert produced["sent"] == n
    assert produced["queue_device"].startswith("/job:ps/task:0")
    assert produced["enqueue_device"].startswith("/job:ps/task:0")   # colocated with the queue
    assert produced["rows_device"].startswith("/job:worker/task:0")
    assert consumed["dequeue_device"].startswith("/job:ps/task:0")
    assert consumed["ids"] == list(range(n))                          # FIFO, nothing lost
    assert consumed["sum"] == pytest.approx(sum(2.0 * i * 4 for i in range(n)))
    assert consumed["batches"] == n // 5

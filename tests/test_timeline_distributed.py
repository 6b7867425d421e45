"""Step timelines and summaries of a step spread over a 3-task cluster (1 ps + 2 workers).

The tasks are `kf.train.Server`s in this process (gRPC on loopback). A FULL_TRACE step returns the
step stats of every task, merged by the master, and one cost graph over all of them; its timeline
has a process row per device of each task and a flow arrow for every _Send/_Recv pair.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.client import timeline
from kernflow.core.testing.processes import free_ports, have_distributed

if not have_distributed():
    pytest.skip("kernflow-client, -master and -worker are not installed", allow_module_level=True)

pytestmark = pytest.mark.slow

TASKS = ("/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1")
_TRANSFER = re.compile(r"(?:\[[^\]]*\] )*(\S+) = (_Send|_Recv)\((\S+) @(\S+)\)$")


@pytest.fixture(scope="module")
def cluster():
    ports = free_ports(3)
    spec = kf.train.ClusterSpec({"ps": [f"localhost:{ports[0]}"],
                                 "worker": [f"localhost:{p}" for p in ports[1:]]})
    servers = [kf.train.Server(spec, job_name="ps", task_index=0),
               kf.train.Server(spec, job_name="worker", task_index=0),
               kf.train.Server(spec, job_name="worker", task_index=1)]
    yield servers
    for s in servers:
        s.stop()


def _spread_graph():
    """w on the ps; h = x w on worker 0; y = sum(relu(h)) on worker 1; z on worker 0 again."""
    with kf.device("/job:ps/task:0"):
        w = kf.Variable(kf.fill([16, 8], 0.25), name="w")
    with kf.device("/job:worker/task:0"):
        x = kf.placeholder(kf.float32, [None, 16], name="x")
        h = kf.matmul(x, w, name="h")
    with kf.device("/job:worker/task:1"):
        y = kf.reduce_sum(kf.nn.relu(h - 1.0), name="y")
    with kf.device("/job:worker/task:0"):
        z = kf.multiply(y, 2.0, name="z")
    return x, z


@pytest.fixture(scope="module")
def traced(cluster):
    g = kf.Graph()
    with g.as_default():
        x, z = _spread_graph()
        init = kf.global_variables_initializer()
    with kf.Session(cluster[1].target, graph=g) as sess:
        sess.run(init)
        md = kf.RunMetadata()
        value = sess.run(z, {x: np.ones((4, 16), np.float32)},
                         options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE), run_metadata=md)
    return value, md


def _task_of(device: str) -> str:
    return device.rsplit("/device:", 1)[0]


def _transfers(step_stats):
    found = []
    for ds in step_stats.dev_stats:
        for ns in ds.node_stats:
            m = _TRANSFER.match(ns.timeline_label)
            if m:
                found.append((m.group(2), m.group(3), ds.device, m.group(4)))
    return found


def test_traced_step_returns_stats_and_costs_of_every_task(traced):
    value, md = traced
    assert value == pytest.approx(2 * 4 * 8 * (16 * 0.25 - 1.0))
    assert {_task_of(ds.device) for ds in md.step_stats.dev_stats} == set(TASKS)
    cg = md.cost_graph
    ids = {n.id: n for n in cg.node}
    assert len(ids) == len(cg.node) > 0                  # one id space over the tasks
    assert {_task_of(n.device) for n in cg.node} == set(TASKS)
    for n in cg.node:
        for ii in n.input_info:
            assert ii.preceding_node in ids and ids[ii.preceding_node].device == n.device
    h = next(n for n in cg.node if n.name == "h")
    assert h.compute_cost > 0 and h.output_info[0].size == 4 * 8 * 4


def test_timeline_has_a_row_per_device_of_each_task_and_a_flow_per_send_recv(traced):
    _, md = traced
    events = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_memory=True))
    events = events["traceEvents"]
    for e in events:
        assert {"ph", "pid", "tid", "ts"} <= set(e), e
        assert e.get("dur", 0) >= 0
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    compute_rows = {n[:-len(" Compute")] for n in names.values() if n.endswith(" Compute")}
    assert compute_rows == {ds.device for ds in md.step_stats.dev_stats}
    assert {_task_of(d) for d in compute_rows} == set(TASKS)
    transfers = _transfers(md.step_stats)
    sends = [t for t in transfers if t[0] == "_Send"]
    recvs = {(t[1], t[3], t[2]) for t in transfers if t[0] == "_Recv"}
    assert {_task_of(s[2]) for s in sends} == set(TASKS)   # every task sends something
    assert {(t, src, dst) for _, t, src, dst in sends} == recvs
    flows = {}
    for e in events:
        if e["ph"] in "sf":
            flows.setdefault(e["id"], {})[e["ph"]] = e
    assert all(set(f) == {"s", "f"} for f in flows.values())
    for _, tensor, src, dst in sends:
        hits = [f for f in flows.values() if f["s"]["name"] == tensor
                and names[f["s"]["pid"]] == f"{src} Compute" and names[f["f"]["pid"]] == f"{dst} Compute"]
        assert len(hits) == 1, (tensor, src, dst)
    assert [e for e in events if e["ph"] == "C"]


def test_summary_op_on_a_worker_task_runs_there_and_comes_back(cluster, tmp_path):
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:ps/task:0"):
            v = kf.Variable(3.5, name="v")
        with kf.device("/job:worker/task:1"):
            s = kf.summary.scalar("loss", v * 2.0)
        init = kf.global_variables_initializer()
    with kf.Session(cluster[1].target, graph=g) as sess:
        sess.run(init)
        md = kf.RunMetadata()
        result = sess.run(s, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE), run_metadata=md)
    ran_on = {ns.node_name: ds.device for ds in md.step_stats.dev_stats for ns in ds.node_stats}
    summary_nodes = [n for n in ran_on if n.startswith("loss")]
    assert summary_nodes and all(_task_of(ran_on[n]) == TASKS[2] for n in summary_nodes)
    writer = kf.summary.FileWriter(str(tmp_path))
    writer.add_summary(result, global_step=7)
    writer.close()
    (path,) = [os.path.join(tmp_path, f) for f in os.listdir(tmp_path) if "tfevents" in f]
    values = [(e.step, v.tag, v.simple_value) for e in kf.train.summary_iterator(path)
              if e.HasField("summary") for v in e.summary.value]
    assert values == [(7, "loss", 7.0)]

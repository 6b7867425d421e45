"""One trace per `Session.run` across the processes of a cluster (W3C context in gRPC metadata).

Two `kernflow worker` processes, a `kernflow master` process and a client process, each exporting
its spans as OTLP/JSON lines (``KERNFLOW_TRACE=file:PATH``) into one file. One step whose graph spans both
workers with tensors crossing between them must give one trace:

    Session.run (client) -> Master.RunStep (master) -> RunGraph per task (master)
        -> Worker.RunGraph (that task's worker) -> PushTensors (a value pushed, on the producing
            worker) -> Worker.PushTensors (on the receiving worker)
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

pytestmark = pytest.mark.slow

_START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Proc:
    """A child process whose stdout lines are collected by a thread."""

    def __init__(self, args, env):
        self.popen = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.popen.stderr), daemon=True).start()

    def _pump_stdout(self):
        for line in self.popen.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern: str) -> re.Match:
        while True:
            try:
                line = self.lines.get(timeout=_START_TIMEOUT_S)
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} from {self.popen.args}; "
                                     f"stderr: {''.join(self.stderr)[-3000:]}") from None
            if line is None:
                raise AssertionError(f"{self.popen.args} exited ({self.popen.wait()}) before printing "
                                     f"{pattern!r}; stderr: {''.join(self.stderr)[-3000:]}")
            m = re.search(pattern, line)
            if m:
                return m

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


_CLIENT = textwrap.dedent("""
    import sys
    import numpy as np
    from kernflow.core import tracing_sdk
    tracing_sdk.configure_from_env(service_name="client")
    import kernflow.core as kf

    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:0"):
            a = x * 2.0
        with kf.device("/job:worker/task:1"):
            b = a + 1.0          # task 1 receives a from task 0
        with kf.device("/job:worker/task:0"):
            c = b * 3.0          # task 0 receives b from task 1
    with kf.Session(sys.argv[1], graph=g) as sess:
        print("result", sess.run(c, {x: np.array([1.0, 2.0], np.float32)}).tolist(), flush=True)
""")


@pytest.fixture
def cluster(tmp_path):
    spans = tmp_path / "spans.jsonl"
    env = dict(os.environ, KERNFLOW_TRACE=f"file:{spans}", PYTHONUNBUFFERED="1")
    ports = [_free_port(), _free_port()]
    spec = json.dumps({"worker": [f"127.0.0.1:{p}" for p in ports]})
    cli = [sys.executable, "-m", "kernflow.core.cli"]
    procs = []
    try:
        for i, port in enumerate(ports):
            procs.append(_Proc(cli + ["worker", "--job", "worker", "--task", str(i), "--port", str(port),
                                      "--cluster-spec", spec], env))
        for p in procs:
            p.wait_for(r"listening on")
        master = _Proc(cli + ["master", "--port", "0", "--cluster-spec", spec], env)
        procs.append(master)
        target = "grpc://" + master.wait_for(r"grpc://(\S+)").group(1)
        yield target, env, spans, procs
    finally:
        for p in procs:
            p.stop()


def _read_spans(*paths) -> list[dict]:
    from kernflow.core import trace_export
    return trace_export.read_spans(paths)


def test_one_trace_spans_client_master_workers_and_recv_tensor(cluster):
    target, env, spans_path, procs = cluster
    w0_pid, w1_pid, master_pid = (p.popen.pid for p in procs)
    out = subprocess.run([sys.executable, "-c", _CLIENT, target], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "result [9.0, 15.0]" in out.stdout
    # Stop the servers, so every process has exported (and closed) its spans.
    for p in procs:
        p.stop()
    assert [p.popen.returncode for p in procs] == [0, 0, 0], [''.join(p.stderr)[-2000:] for p in procs]

    spans = _read_spans(spans_path)
    by_id = {s["span_id"]: s for s in spans}
    names = sorted(s["name"] for s in spans)
    assert len({s["trace_id"] for s in spans}) == 1, f"more than one trace: {names}"

    (root,) = [s for s in spans if s["name"] == "Session.run"]
    assert root["parent_span_id"] is None and root["pid"] not in (w0_pid, w1_pid, master_pid)
    (step,) = [s for s in spans if s["name"] == "Master.RunStep"]
    assert step["parent_span_id"] == root["span_id"] and step["parent_is_remote"]
    assert step["pid"] == master_pid

    run_graphs = [s for s in spans if s["name"] == "RunGraph"]
    tasks = {"/job:worker/replica:0/task:0": w0_pid, "/job:worker/replica:0/task:1": w1_pid}
    assert sorted(s["attributes"]["kernflow.task"] for s in run_graphs) == sorted(tasks)
    assert all(s["parent_span_id"] == step["span_id"] and s["pid"] == master_pid for s in run_graphs)

    worker_runs = [s for s in spans if s["name"] == "Worker.RunGraph"]
    assert len(worker_runs) == 2
    for s in worker_runs:
        parent = by_id[s["parent_span_id"]]
        assert parent["name"] == "RunGraph" and s["parent_is_remote"]
        assert parent["attributes"]["kernflow.task"] == s["attributes"]["kernflow.task"]
        assert s["pid"] == tasks[s["attributes"]["kernflow.task"]]

    pushes = [s for s in spans if s["name"] == "PushTensors"]
    delivered = [s for s in spans if s["name"] == "Worker.PushTensors"]
    assert len(pushes) >= 2 and len(delivered) == len(pushes), names
    for s in pushes:   # each push is a child of the producing worker's RunGraph span
        parent = by_id[s["parent_span_id"]]
        assert parent["name"] == "Worker.RunGraph" and parent["pid"] == s["pid"]
    assert {s["pid"] for s in pushes} == {w0_pid, w1_pid}   # tensors crossed both ways
    for s in delivered:  # ... and the receiver's side is a child of the push, in another process
        parent = by_id[s["parent_span_id"]]
        assert parent["name"] == "PushTensors" and s["parent_is_remote"] and parent["pid"] != s["pid"]
        assert parent["attributes"]["kernflow.rendezvous_key"] == s["attributes"]["kernflow.rendezvous_key"]



_CLUSTER_CLIENT = textwrap.dedent("""
    import sys
    import numpy as np
    from kernflow.core import tracing_sdk
    tracing_sdk.configure_from_env(service_name="client")
    import kernflow.core as kf

    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:ps/task:0"):
            a = x * 2.0
        with kf.device("/job:worker/task:0"):
            b = a + 1.0
    with kf.Session(sys.argv[1], graph=g) as sess:
        print("result", sess.run(b, {x: np.array([1.0, 2.0], np.float32)}).tolist(), flush=True)
""")


def _kernflow(*argv, env=None, timeout=90):
    return subprocess.run([sys.executable, "-m", "kernflow.core.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, env=env or dict(os.environ, PYTHONUNBUFFERED="1"))


@pytest.mark.etcd
@pytest.mark.timeout(180)
def test_cluster_up_passes_tracing_down_and_a_step_exports_as_one_trace(tmp_path):
    """`cluster up --trace file:DIR/{task}.jsonl`: one file per process, one trace per step, which
    `kernflow trace export` turns into Chrome JSON with a process per service and flows between them."""
    spans_dir, state_dir = tmp_path / "spans", tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNFLOW_")}
    up = _kernflow("cluster", "up", "--ps", "1", "--workers", "1", "--cluster", "tr", "--state-dir",
                   str(state_dir), "--timeout", "60", "--trace", f"file:{spans_dir}/{{task}}.jsonl",
                   "--log-level", "info", env=env)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        target = next(line.split(": ", 1)[1] for line in up.stdout.splitlines()
                      if line.startswith("target: "))
        client_env = dict(env, KERNFLOW_TRACE=f"file:{spans_dir}/client.jsonl")
        out = subprocess.run([sys.executable, "-c", _CLUSTER_CLIENT, target], env=client_env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "result [3.0, 5.0]" in out.stdout
        state = json.loads((state_dir / "cluster.json").read_text())
    finally:
        if (state_dir / "cluster.json").exists():
            _kernflow("cluster", "down", "--state-dir", str(state_dir), "--grace", "5", env=env)
    # `up` traces itself too (cluster.jsonl) and records the options, so restarts keep them
    assert sorted(p.name for p in spans_dir.iterdir()) == ["client.jsonl", "cluster.jsonl", "master.jsonl",
                                                           "ps-0.jsonl", "worker-0.jsonl"]
    passed = ["--trace", f"file:{spans_dir}/{{task}}.jsonl", "--log-level", "INFO"]
    for rec in [state["master"], *state["tasks"]]:
        i = rec["argv"].index("--trace")
        assert rec["argv"][i:i + 4] == passed
    spans = _read_spans(*sorted(spans_dir.iterdir()))
    step = [s for s in spans if s["name"] == "Session.run"]
    assert len(step) == 1
    trace_spans = [s for s in spans if s["trace_id"] == step[0]["trace_id"]]
    by_service = {s["service"] for s in trace_spans}
    assert by_service == {"client", "kernflow-master", "kernflow-ps", "kernflow-worker"}, by_service
    runs = {s["resource"]["kernflow.task"] for s in trace_spans if s["name"] == "Worker.RunGraph"}
    assert runs == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}
    assert all(s["resource"]["kernflow.cluster"] == "tr" for s in trace_spans if s["service"] != "client")

    chrome = tmp_path / "step.json"
    out = _kernflow("trace", "export", "--format", "chrome", "-o", str(chrome), "--trace-id",
                    step[0]["trace_id"], *map(str, sorted(spans_dir.iterdir())), env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(chrome.read_text())
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert sorted(name.split(" ")[0] for name in procs.values()) == [
        "client", "kernflow-master", "kernflow-ps", "kernflow-worker"]
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(trace_spans) and {e["args"]["trace_id"] for e in xs} == {step[0]["trace_id"]}
    flows = [e for e in doc["traceEvents"] if e["ph"] == "s"]
    assert len(flows) >= 3   # client -> master, and master -> each task (plus the RecvTensor pulls)
    flow_pids = {(e["pid"]) for e in doc["traceEvents"] if e["ph"] in ("s", "f")}
    assert flow_pids == set(procs)

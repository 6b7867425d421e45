"""A cluster of one CPU-only task and one GPU task trains the demo: variables on the CPU ps (its
process runs without the GPU plugin), the computation on the worker's GPU, tensors crossing device
and task every step. Needs a GPU (skips with the usual reason otherwise)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import ChildProcess, free_ports

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

SERVER = r"""
import json, sys
import kernflow.core as kf
server = kf.train.Server(json.loads(sys.argv[1]), job_name=sys.argv[2], task_index=int(sys.argv[3]))
print("ready", server.target, flush=True)
server.join()
"""


def test_demo_trains_on_a_cpu_ps_and_a_gpu_worker(tmp_path):
    ps_port, w_port = free_ports(2)
    cluster = {"ps": [f"localhost:{ps_port}"], "worker": [f"localhost:{w_port}"]}
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    kids = [ChildProcess("/job:ps/task:0", [sys.executable, "-c", SERVER, json.dumps(cluster), "ps", "0"],
                         env=dict(env, KERNFLOW_DISABLE_PLUGINS="gpu")),
            ChildProcess("/job:worker/task:0",
                         [sys.executable, "-c", SERVER, json.dumps(cluster), "worker", "0"], env=env)]
    try:
        target = kids[1].expect("ready", 60, prefix=True).split()[1]
        kids[0].expect("ready", 60, prefix=True)
        with kf.Session(target, graph=kf.Graph()) as s:
            devices = sorted(d.name for d in s.list_devices())
        assert "/job:worker/replica:0/task:0/device:GPU:0" in devices, devices
        assert not any("ps" in d and "GPU" in d for d in devices), devices
        r = subprocess.run([sys.executable, "-m", "kernflow.core.cli", "demo", "--no-progress",
                            "--checkpoint-dir", str(tmp_path), "--target", target, "--device", "gpu",
                            "--epochs", "5"], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "variables on 1 ps task(s), computation on /job:worker/task:0/device:GPU:0" in r.stdout
        m = re.search(r"final test accuracy: ([\d.]+)%", r.stdout)
        assert m and float(m.group(1)) >= 90.0, r.stdout + r.stderr
        print(r.stdout)
    finally:
        for k in kids:
            k.kill()

"""`kf.estimator.train_and_evaluate` on a TF_CONFIG cluster of separate processes.

One ps, the chief, one worker and the evaluator each run the same program (a LinearRegressor over
a numeric feature column) with their own TF_CONFIG and one shared model_dir, on free loopback
ports. The ps serves until the test kills it; the chief and the worker train asynchronously on the
ps's variables (each counts its own steps with a hook); the chief saves checkpoints and summaries;
the evaluator evaluates each new checkpoint until the one at max_steps and exports it. Every wait
has a deadline and every process is killed in a ``finally``.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import ChildProcess, free_ports

pytest.importorskip("kernflow.master.master", reason="kernflow-master is not installed")
pytest.importorskip("kernflow.worker.worker", reason="kernflow-worker is not installed")

pytestmark = pytest.mark.slow

MAX_STEPS = 200
_DEADLINE_S = 120.0   # the whole run; it takes ~15 s on 2 cores

# The program every task runs: argv = model_dir, out_dir, max_steps; TF_CONFIG names the task.
PROGRAM = r"""
import json, logging, os, sys, time
import numpy as np
import kernflow.core as kf

logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
logging.getLogger("kernflow.core.estimator.training").setLevel(logging.INFO)

model_dir, out_dir, max_steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
task = json.loads(os.environ["TF_CONFIG"])["task"]
name = f"{task['type']}{task['index']}"
rng = np.random.RandomState(0)
x = rng.uniform(-1.0, 1.0, (512, 2)).astype(np.float32)
y = (x @ np.array([[2.0], [-3.0]], np.float32) + 1.0).astype(np.float32)


def wait_for(path, timeout):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)


class CountSteps(kf.estimator.SessionRunHook):
    # Counts this process's training steps. Halfway, the chief waits for the worker's first step,
    # so both train whichever starts first.
    def begin(self):
        self.steps, self.global_step = 0, kf.train.get_global_step()

    def before_run(self, run_context):
        return kf.estimator.SessionRunArgs(self.global_step)

    def after_run(self, run_context, run_values):
        self.steps += 1
        if self.steps == 1:
            open(os.path.join(out_dir, name + ".started"), "w").close()
        if task["type"] == "chief" and run_values.results >= max_steps // 2:
            wait_for(os.path.join(out_dir, "worker0.started"), 60)

    def end(self, session):
        with open(os.path.join(out_dir, name + ".json"), "w") as f:
            json.dump({"steps": self.steps}, f)


def serving_input_receiver_fn():
    return kf.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": kf.placeholder(kf.float32, [None, 2], name="x")})()


config = kf.estimator.RunConfig(save_checkpoints_steps=max_steps // 4, save_summary_steps=20,
                                log_step_count_steps=50, experimental_max_worker_delay_secs=1,
                                session_creation_timeout_secs=60, tf_random_seed=1)
est = kf.estimator.LinearRegressor([kf.feature_column.numeric_column("x", shape=[2])],
                                   model_dir=model_dir, config=config)
train_spec = kf.estimator.TrainSpec(
    kf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=32, num_epochs=None, shuffle=True),
    max_steps=max_steps, hooks=[CountSteps()])
eval_spec = kf.estimator.EvalSpec(
    kf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=128, num_epochs=1, shuffle=False),
    steps=None, exporters=kf.estimator.FinalExporter("final", serving_input_receiver_fn),
    start_delay_secs=0, throttle_secs=1)
print("config", json.dumps({"master": config.master, "is_chief": config.is_chief,
                            "num_ps_replicas": config.num_ps_replicas,
                            "num_worker_replicas": config.num_worker_replicas}), flush=True)
result = kf.estimator.train_and_evaluate(est, train_spec, eval_spec)
if task["type"] == "evaluator":
    metrics, exports = result
    print("evaluated", json.dumps({"metrics": {k: float(v) for k, v in metrics.items()},
                                   "exports": [os.fsdecode(e) for e in exports]}), flush=True)
print("done", flush=True)
"""


def _left(deadline):
    left = deadline - time.monotonic()
    assert left > 0, "the cluster did not finish in time"
    return left


def _graph_def(path):
    from google.protobuf import text_format

    from kernflow.core.protobuf import graph_pb2
    with open(path) as f:
        return text_format.Parse(f.read(), graph_pb2.GraphDef())


def test_train_and_evaluate_on_a_ps_chief_worker_evaluator_cluster(tmp_path):
    ports = free_ports(3)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"], "chief": [f"127.0.0.1:{ports[1]}"],
               "worker": [f"127.0.0.1:{ports[2]}"]}
    model_dir, out_dir = tmp_path / "model", tmp_path / "out"
    out_dir.mkdir()
    deadline = time.monotonic() + _DEADLINE_S
    kids = {}
    try:
        for task_type in ("ps", "chief", "worker", "evaluator"):
            tf_config = {"cluster": cluster, "task": {"type": task_type, "index": 0}}
            kids[task_type] = ChildProcess(
                task_type, [sys.executable, "-c", PROGRAM, str(model_dir), str(out_dir), str(MAX_STEPS)],
                env=dict(os.environ, PYTHONUNBUFFERED="1", TF_CONFIG=json.dumps(tf_config)))
        configs = {t: json.loads(k.expect("config", _left(deadline), prefix=True).split(" ", 1)[1])
                   for t, k in kids.items()}
        evaluated = json.loads(kids["evaluator"].expect("evaluated", _left(deadline), prefix=True)
                               .split(" ", 1)[1])
        for task_type in ("chief", "worker", "evaluator"):
            kids[task_type].expect("done", _left(deadline), prefix=True)
            assert kids[task_type].proc.wait(_left(deadline)) == 0, kids[task_type].output()
        assert kids["ps"].proc.poll() is None, kids["ps"].output()   # serves until killed, as TF's
        logs = {t: k.output() for t, k in kids.items()}
    finally:
        for kid in kids.values():
            kid.kill()

    # What each task's RunConfig made of its TF_CONFIG.
    assert configs["chief"] == {"master": "grpc://" + cluster["chief"][0], "is_chief": True,
                                "num_ps_replicas": 1, "num_worker_replicas": 2}
    assert configs["worker"]["master"] == "grpc://" + cluster["worker"][0]
    assert not configs["worker"]["is_chief"]
    assert configs["evaluator"] == {"master": "", "is_chief": False, "num_ps_replicas": 0,
                                    "num_worker_replicas": 0}
    assert "Waiting 1 secs before starting training" in logs["worker"]

    # Both trainers made steps, asynchronously, on the same global step.
    steps = {t: json.loads((out_dir / f"{t}0.json").read_text())["steps"] for t in ("chief", "worker")}
    assert steps["chief"] >= 1 and steps["worker"] >= 1, steps
    ckpt = kf.train.latest_checkpoint(str(model_dir))
    global_step = int(kf.train.load_variable(ckpt, "global_step"))
    assert steps["chief"] + steps["worker"] >= global_step >= MAX_STEPS, (steps, global_step)

    # The chief saved checkpoints (from step 0 on), its graph with the variables on the ps, and the
    # summaries; the worker wrote none of them.
    saved = sorted(int(p.rsplit("-", 1)[1].split(".")[0])
                   for p in glob.glob(str(model_dir / "model.ckpt-*.index")))
    # (A checkpoint is named by the global step its hook read; the worker may step once more
    # before the ps saves the variables.)
    assert len(saved) >= 3 and global_step >= saved[-1] >= MAX_STEPS, (saved, global_step)
    assert ckpt.endswith(f"model.ckpt-{saved[-1]}"), ckpt
    variables = [n for n in _graph_def(model_dir / "graph.pbtxt").node if n.op == "VariableV2"]
    assert variables and {n.device for n in variables} == {"/job:ps/task:0"}, variables
    assert len(glob.glob(str(model_dir / "events.out.tfevents.*"))) == 1

    # The evaluator evaluated a checkpoint at max_steps or later, the model learned
    # y = 2 x0 - 3 x1 + 1 (a zero model's average loss is ~5.3), and the final exporter exported it.
    metrics = evaluated["metrics"]
    print(f"steps {steps}, global step {global_step}, checkpoints {saved}, eval {metrics}")
    assert MAX_STEPS <= metrics["global_step"] <= global_step   # (the chief may save twice at the end)
    assert metrics["average_loss"] < 0.05, metrics
    assert len(evaluated["exports"]) == 1 and kf.saved_model.contains_saved_model(evaluated["exports"][0])
    assert os.path.dirname(evaluated["exports"][0]) == str(model_dir / "export" / "final")
    eval_steps = {e.step for f in glob.glob(str(model_dir / "eval" / "events.out.tfevents.*"))
                  for e in kf.train.summary_iterator(f) if e.HasField("summary")}
    assert int(metrics["global_step"]) in eval_steps, eval_steps
    assert np.isfinite(metrics["loss"])

"""A third-party package (tests/plugins/kernflow-example-plugin) adds an op and its kernel through
the `kernflow` entry point only; the README's test command installs it like any user would."""

import importlib.metadata
import os
import subprocess
import sys

PROGRAM = """
import numpy as np
import kernflow.core as kf
from kernflow_example_plugin import soft_clip
x = kf.placeholder(kf.float64, [3])
y = soft_clip(x, limit=2.0)
with kf.Session() as s:
    out = s.run(y, {x: [-10.0, 0.5, 10.0]})
np.testing.assert_allclose(out, 2.0 * np.tanh(np.array([-10.0, 0.5, 10.0]) / 2.0))
print("ok", y.op.type, out.dtype)
"""


def _run(env_extra):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env,
                          timeout=120)


def test_example_plugin_is_installed_through_its_entry_point():
    eps = importlib.metadata.entry_points(group="kernflow")
    assert "example" in {ep.name for ep in eps}, "install tests/plugins/kernflow-example-plugin"
    assert "cpu" in {ep.name for ep in eps}


def test_third_party_op_runs():
    r = _run({})
    assert r.returncode == 0, r.stderr
    assert "ok ExampleSoftClip float64" in r.stdout


def test_blocked_plugin_is_not_loaded():
    r = _run({"KERNFLOW_DISABLE_PLUGINS": "example"})
    assert r.returncode != 0
    assert "Op type not registered 'ExampleSoftClip'" in r.stderr


TRAIN = """
import numpy as np
import kernflow.core as kf
opt_cls = kf.train.get_optimizer("ExampleSignSGD")
x = kf.placeholder(kf.float32, [None, 2])
y = kf.placeholder(kf.float32, [None])
w = kf.Variable(np.zeros([2, 1], np.float32))
pred = kf.reshape(kf.matmul(x, w), [-1])
loss = kf.reduce_mean(kf.square(pred - y))
train = opt_cls(0.01).minimize(loss)
rng = np.random.RandomState(0)
xs = rng.randn(256, 2).astype(np.float32)
ys = xs @ np.array([1.5, -2.0], np.float32)
with kf.Session() as s:
    s.run(kf.global_variables_initializer())
    first = s.run(loss, {x: xs, y: ys})
    for _ in range(300):
        s.run(train, {x: xs, y: ys})
    last = s.run(loss, {x: xs, y: ys})
print("losses", first, last, type(opt_cls).__name__)
assert last < first / 20, (first, last)
"""


def test_third_party_optimizer_trains():
    r = subprocess.run([sys.executable, "-c", TRAIN], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "losses" in r.stdout

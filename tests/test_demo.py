"""The README's main job: `kernflow demo` trains the digits MLP to >= 96% and resumes from its
checkpoint; the convnet example reaches >= 97%."""

import re
import subprocess
import sys

import pytest


def _demo(tmp_path, *args):
    r = subprocess.run([sys.executable, "-m", "kernflow.core.cli", "demo", "--no-progress",
                        "--checkpoint-dir", str(tmp_path), *args], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _accuracy(out):
    m = re.search(r"final test accuracy: ([\d.]+)%", out)
    assert m, out
    return float(m.group(1))


@pytest.mark.slow
def test_mlp_demo_reaches_96_percent_and_resumes(tmp_path):
    out = _demo(tmp_path)
    assert _accuracy(out) >= 96.0, out
    assert (tmp_path / "mlp" / "checkpoint").exists()
    more = _demo(tmp_path, "--resume", "--epochs", "22")
    assert "resumed from" in more and "(epoch 20)" in more, more
    assert "epoch  21" in more and "epoch   1 " not in more
    assert _accuracy(more) >= 96.0, more


@pytest.mark.slow
def test_convnet_demo_reaches_97_percent(tmp_path):
    out = _demo(tmp_path, "--model", "convnet")
    assert _accuracy(out) >= 97.0, out

"""The README's main job: `kernflow demo` trains the digits MLP to >= 96% and resumes from its
checkpoint; the convnet example reaches >= 97%. ``--device`` pins the model to the CPU or the GPU.
Bad options and unreachable targets end in one line and a non-zero status, never a traceback."""

import re
import socket
import subprocess
import sys

import pytest


def _run(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "kernflow.core.cli", "demo", "--no-progress",
                           "--checkpoint-dir", str(tmp_path), *args], capture_output=True, text=True,
                          timeout=600)


def _demo(tmp_path, *args):
    r = _run(tmp_path, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _kernflow_has_gpu():
    import kernflow.core as kf
    with kf.Session(graph=kf.Graph()) as s:
        return any(d.device_type == "GPU" for d in s.list_devices())


def _model_line(out):
    m = re.search(r"^model on (.*) \(--device (\w+)\)$", out, re.M)
    assert m, out
    return m.group(1)


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


def test_device_cpu_trains_on_the_cpu_and_resumes(tmp_path):
    out = _demo(tmp_path, "--device", "cpu", "--epochs", "2")
    assert _model_line(out).endswith("/device:CPU:0"), out
    assert _accuracy(out) >= 70.0, out
    more = _demo(tmp_path, "--device", "cpu", "--epochs", "3", "--resume")
    assert "(epoch 2)" in more and "epoch   3" in more, more
    assert _accuracy(more) >= 70.0, more


def test_device_gpu_without_a_gpu_is_a_usage_error(tmp_path):
    if _kernflow_has_gpu():
        pytest.skip("a GPU device is registered here")
    r = _run(tmp_path, "--device", "gpu", "--epochs", "1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--device gpu" in r.stderr and "no GPU device" in r.stderr, r.stderr
    assert 'pip install "packages/kernels-gpu[cuda13]"' in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "mlp" / "checkpoint").exists()


@pytest.mark.gpu
def test_device_gpu_trains_on_the_gpu_and_resumes(tmp_path):
    if not _kernflow_has_gpu():
        pytest.skip("kernflow lists no GPU device: the GPU plugin (packages/kernels-gpu) is not installed")
    out = _demo(tmp_path, "--device", "gpu", "--epochs", "2")
    assert "/device:GPU:0" in _model_line(out), out
    assert _accuracy(out) >= 70.0, out
    more = _demo(tmp_path, "--device", "gpu", "--epochs", "3", "--resume")
    assert "(epoch 2)" in more and "epoch   3" in more, more
    assert _accuracy(more) >= 70.0, more


def _summaries(run_dir):
    """{tag: [(step, value)]} and the session logs [(step, status)] of the event files in run_dir."""
    import glob
    import os

    import kernflow.core as kf
    scalars, logs, graphs = {}, [], 0
    for path in sorted(glob.glob(os.path.join(str(run_dir), "events.out.tfevents.*"))):
        for e in kf.train.summary_iterator(path):
            for v in e.summary.value:
                scalars.setdefault(v.tag, []).append((e.step, v.simple_value))
            if e.HasField("session_log"):
                logs.append((e.step, e.session_log.status))
            graphs += bool(e.graph_def)
    return scalars, logs, graphs


def test_demo_writes_tensorboard_summaries_and_resumes_them(tmp_path):
    import kernflow.core as kf
    start = kf.summary.SessionLog.START
    out = _demo(tmp_path, "--epochs", "2")
    logdir = tmp_path / "logs"
    assert f"tensorboard --logdir {logdir}" in out, out
    scalars, logs, graphs = _summaries(logdir / "mlp")
    steps = 2 * 23  # 1437 training digits in batches of 64
    assert [s for s, _ in scalars["train/loss"]] == list(range(1, steps + 1, 10))
    assert [s for s, _ in scalars["train/accuracy"]] == list(range(1, steps + 1, 10))
    assert [s for s, _ in scalars["test/accuracy"]] == [23, 46]
    assert scalars["train/epoch_loss"][1][1] < scalars["train/epoch_loss"][0][1]
    assert all(0 <= a <= 1 for _, a in scalars["train/accuracy"] + scalars["test/accuracy"])
    assert scalars["test/accuracy"][-1][1] * 100 == pytest.approx(_accuracy(out), abs=0.01)
    assert logs == [(0, start)] and graphs == 1
    _demo(tmp_path, "--epochs", "3", "--resume")
    scalars, logs, graphs = _summaries(logdir / "mlp")
    assert logs == [(0, start), (46, start)]  # TensorBoard drops events from step 46 on of the first run
    assert [s for s, _ in scalars["test/accuracy"]] == [23, 46, 69]


def test_demo_logdir_options(tmp_path):
    out = _demo(tmp_path, "--epochs", "1", "--no-logdir")
    assert not (tmp_path / "logs").exists() and "tensorboard" not in out
    out = _demo(tmp_path, "--epochs", "1", "--logdir", "")
    assert not (tmp_path / "logs").exists() and "tensorboard" not in out
    out = _demo(tmp_path, "--epochs", "1", "--logdir", str(tmp_path / "tb"), "--model", "convnet")
    assert f"tensorboard --logdir {tmp_path / 'tb'}" in out
    scalars, _, graphs = _summaries(tmp_path / "tb" / "convnet")
    assert set(scalars) == {"train/loss", "train/accuracy", "train/epoch_loss", "test/accuracy"}
    assert graphs == 1


def _error_line(r, status):
    """The one-line error `r` ended in (its last stderr line), checking the status and no traceback."""
    assert r.returncode == status, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r.stderr.strip().splitlines()[-1]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_plugin_optimizer_from_the_command_line(tmp_path):
    # ExampleSignSGD: registered by tests/plugins/kernflow-example-plugin through its entry point.
    out = _demo(tmp_path, "--optimizer", "plugin:ExampleSignSGD", "--learning-rate", "0.001",
                "--epochs", "1", "--no-logdir")
    assert _accuracy(out) >= 50.0, out


def test_an_unknown_plugin_optimizer_is_named_in_one_line(tmp_path):
    line = _error_line(_run(tmp_path, "--optimizer", "plugin:NoSuchOpt"), 2)
    assert line.startswith("kernflow demo: --optimizer plugin:NoSuchOpt: no optimizer named 'NoSuchOpt'; "
                           "registered: "), line
    assert "'ExampleSignSGD'" in line and "'Momentum'" in line
    assert not (tmp_path / "mlp").exists()


@pytest.mark.parametrize("option, value, expected", [
    ("--batch-size", "0", "expected an integer >= 1, got '0'"),
    ("--epochs", "-1", "expected an integer >= 0, got '-1'"),
    ("--learning-rate", "0", "expected a number > 0, got '0'"),
    ("--optimizer", "lbfgs", "invalid choice 'lbfgs' (choose from adagrad, adam, momentum, rmsprop, sgd "
                             "or plugin:NAME)"),
])
def test_bad_option_values_are_one_line_usage_errors(tmp_path, option, value, expected):
    line = _error_line(_run(tmp_path, option, value), 2)
    assert line == f"kernflow demo: error: argument {option}: {expected}"


def test_demo_options_have_help_texts():
    import argparse

    from kernflow.core import demo
    parser = argparse.ArgumentParser()
    demo.configure(parser)
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert len(options) > 15
    assert [a.option_strings[0] for a in options if not a.help] == []


def test_resume_without_a_checkpoint_says_so_and_starts_over(tmp_path):
    r = _run(tmp_path, "--resume", "--epochs", "1", "--no-logdir")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"kernflow demo: --resume: no checkpoint in {tmp_path / 'mlp'}; training from scratch" in r.stderr
    assert "epoch   1 " in r.stdout and "resumed from" not in r.stdout


@pytest.mark.parametrize("target, words", [
    ("nosuch://host:1", "Session target 'nosuch://host:1': no session factory serves nosuch://"),
    ("grpc://127.0.0.1:{port}", "master at 127.0.0.1:{port} is unavailable"),
    ("etcd://127.0.0.1:{port}/c1", "etcd at 127.0.0.1:{port} is unavailable"),
])
def test_a_bad_or_unreachable_target_is_one_line(tmp_path, target, words):
    port = _free_port()   # nothing listens there
    r = subprocess.run([sys.executable, "-m", "kernflow.core.cli", "demo", "--no-progress",
                        "--checkpoint-dir", str(tmp_path), "--target", target.format(port=port)],
                       capture_output=True, text=True, timeout=60)
    line = _error_line(r, 1)
    assert line.startswith("kernflow demo: ") and words.format(port=port) in line, line

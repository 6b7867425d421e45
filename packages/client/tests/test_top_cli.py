"""`kernflow top` without a cluster: where the options point, the table of a sample, steps/s."""

import io
import json
import time

import pytest
from rich.console import Console

from kernflow.client import top_cli
from kernflow.client.top_cli import Sampler, TaskStatus, render, resolve_target
from kernflow.core.framework import errors


def test_resolve_target_from_each_kind_of_option(tmp_path):
    assert resolve_target(None, None, "etcd://127.0.0.1:2400/c1") == ("127.0.0.1:2400", "c1")
    assert resolve_target("localhost:2401", "c2", None) == ("localhost:2401", "c2")
    assert resolve_target("localhost", None, None) == ("localhost:2379", "local")
    (tmp_path / "cluster.json").write_text(json.dumps({"target": "etcd://127.0.0.1:2402/local"}))
    assert resolve_target(None, None, None, str(tmp_path)) == ("127.0.0.1:2402", "local")


@pytest.mark.parametrize("args, words", [
    (("h:1", None, "etcd://h:1/c"), "either --target or --etcd"),
    ((None, "c", None), "--cluster needs --etcd"),
    ((None, None, None), "no cluster given"),
])
def test_resolve_target_errors(tmp_path, args, words):
    with pytest.raises(ValueError, match=words):
        resolve_target(*args, state_dir=str(tmp_path / "none"))


def test_bad_target_is_an_invalid_argument():
    with pytest.raises(errors.InvalidArgumentError):
        resolve_target(None, None, "grpc://h:1")


def _text(table) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(table)
    return out.getvalue()


def test_render_shows_up_and_down_tasks():
    now_ms = int(time.time() * 1000)
    rows = [TaskStatus("/job:worker/replica:0/task:0", "127.0.0.1:5000", up=True, devices=("CPU:0",),
                       steps=120, failed=1, steps_per_s=39.5, last_error="InvalidArgumentError: [boom]",
                       last_error_time_ms=now_ms - 5000, start_time_ms=now_ms - 600_000),
            TaskStatus("/job:worker/replica:0/task:1", "127.0.0.1:5001",
                       down_reason="UnavailableError: connection refused")]
    text = _text(render(rows, "127.0.0.1:2379", "c", "127.0.0.1:4000"))
    assert "1/2 tasks up" in text and "master 127.0.0.1:4000" in text
    line0 = next(ln for ln in text.splitlines() if "task:0" in ln)
    for cell in ("127.0.0.1:5000", "up", "CPU:0", "39.5", "120", "10m", "5s ago:",
                 "InvalidArgumentError: [boom]"):
        assert cell in line0, (cell, line0)
    line1 = next(ln for ln in text.splitlines() if "task:1" in ln)
    assert "down" in line1 and "UnavailableError: connection refused" in line1
    assert "no task is registered" in _text(render([], "h:1", "c"))


def test_steps_per_second_needs_two_samples_of_one_incarnation():
    s = Sampler("127.0.0.1:1", "c")
    try:
        first = TaskStatus("t", "a", up=True, steps=10, start_time_ms=1)
        s._rate(first, 100.0)
        assert first.steps_per_s is None
        second = TaskStatus("t", "a", up=True, steps=30, start_time_ms=1)
        s._rate(second, 102.0)
        assert second.steps_per_s == pytest.approx(10.0)
        restarted = TaskStatus("t", "a", up=True, steps=3, start_time_ms=2)
        s._rate(restarted, 103.0)
        assert restarted.steps_per_s is None
    finally:
        s.close()


def test_run_without_a_cluster_exits_2(tmp_path, capsys):
    args = type("Args", (), dict(etcd=None, cluster=None, target=None, state_dir=str(tmp_path),
                                 interval=1.0, timeout=1.0, once=True))()
    assert top_cli.run(args) == 2
    assert "no cluster given" in capsys.readouterr().err


def test_top_is_a_kernflow_command():
    from kernflow.core.plugins.manager import registries
    assert "top" in registries().commands.commands

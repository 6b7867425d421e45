"""`kernflow demo --sync-replicas` on a `kernflow cluster up --restart on-failure` cluster (1 ps, 3 workers).

* Sync training, 3 of 3 gradients per step: an uninterrupted run, then a run whose ps is killed -9
  mid-training. The cluster supervisor restarts the ps, every replica's MonitoredTrainingSession
  recovers (the chief restores the last checkpoint, the others wait for it), global_step goes on from
  that checkpoint (not from 0), and the final accuracy is within 0.5 points of the uninterrupted run.
* 2 of 3 gradients per step (one backup worker) reaches the embedded demo's accuracy (within 2
  points: which gradients are dropped is up to timing).

Every process is stopped in ``finally`` blocks (`kernflow cluster down`), and every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from kernflow.core.testing.processes import ChildProcess, have_distributed

pytest.importorskip("sklearn", reason="the demo needs scikit-learn (kernflow-core[demo])")
if not have_distributed():
    pytest.skip("kernflow-client, -master and -worker are not installed", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(900)]

_ENV = dict(os.environ, PYTHONUNBUFFERED="1")
_ACCURACY = re.compile(r"final test accuracy: ([0-9.]+)% .*global step (\d+)")
_SESSION = re.compile(r"replica (\d+): session at global step (\d+) \((started|recovered)\)")


def _cli(*argv, timeout=60):
    return subprocess.run([sys.executable, "-m", "kernflow.core.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, env=_ENV)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A 1 ps + 3 worker cluster with a supervisor that restarts what dies; yields its state path."""
    state_dir = tmp_path_factory.mktemp("sync-cluster")
    up = _cli("cluster", "up", "--ps", "1", "--workers", "3", "--cluster", "sync", "--state-dir",
              str(state_dir), "--timeout", "60", "--restart", "on-failure")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield state_dir / "cluster.json"
    finally:
        _cli("cluster", "down", "--state-dir", str(state_dir), "--grace", "3")


def _demo(state_file, ckpt_dir, *extra):
    target = json.loads(state_file.read_text())["target"]
    return ChildProcess("demo", [sys.executable, "-m", "kernflow.core.cli", "demo", "--target", target,
                                 "--no-progress", "--checkpoint-dir", str(ckpt_dir), *extra], env=_ENV)


def _final(kid, timeout):
    """(accuracy in %, global step) from the demo's last line; the demo must exit 0."""
    m = _ACCURACY.search(kid.expect("final test accuracy", timeout))
    assert kid.proc.wait(30) == 0, kid.output()
    return float(m.group(1)), int(m.group(2))


def _ps(state_file) -> dict:
    return next(t for t in json.loads(state_file.read_text())["tasks"] if t["job"] == "ps")


def _latest_checkpoint_step(ckpt_dir) -> int:
    """The step of the checkpoint the directory's state file names (what a restore would use:
    a checkpoint's files exist a moment before the Saver records it as the latest)."""
    import kernflow.core as kf
    latest = kf.train.latest_checkpoint(str(ckpt_dir)) if os.path.isdir(ckpt_dir) else None
    return int(latest.rsplit("-", 1)[1]) if latest else -1


SYNC3 = ("--sync-replicas", "3", "--epochs", "4", "--save-checkpoint-steps", "15")   # 92 global steps


def test_a_killed_ps_is_restarted_and_training_resumes_from_the_last_checkpoint(cluster, tmp_path):
    plain = _demo(cluster, tmp_path / "plain", *SYNC3)
    try:
        reference, last = _final(plain, 400)
    finally:
        plain.kill()
    assert last == 92

    ckpt_dir = tmp_path / "faulty" / "mlp-sync"
    kid = _demo(cluster, tmp_path / "faulty", *SYNC3)
    try:
        for _ in range(3):
            assert _SESSION.search(kid.expect("session at global step", 60)).group(3) == "started"
        deadline = time.monotonic() + 90
        while _latest_checkpoint_step(ckpt_dir) < 30:      # two checkpoints written: kill mid-run
            assert time.monotonic() < deadline, f"no checkpoint >= 30 in 90 s:\n{kid.output()}"
            time.sleep(0.05)
        ps = _ps(cluster)
        os.kill(ps["pid"], signal.SIGKILL)
        killed_at = time.monotonic()
        recovered = {}
        while len(recovered) < 3:
            m = _SESSION.search(kid.expect("session at global step", 90))
            assert m.group(3) == "recovered", kid.output()
            recovered[int(m.group(1))] = int(m.group(2))
        took = time.monotonic() - killed_at
        accuracy, final_step = _final(kid, 400)
    finally:
        kid.kill()
    restarted = _ps(cluster)
    assert restarted["pid"] != ps["pid"] and restarted.get("restarts", 0) >= 1, restarted
    # Every replica resumed at the same checkpointed step (a multiple of 15, at least the one
    # that existed when the ps died), not at 0.
    steps = set(recovered.values())
    assert len(steps) == 1, recovered
    step = steps.pop()
    assert step >= 30 and step % 15 == 0, recovered
    assert final_step == 92
    assert abs(accuracy - reference) <= 0.5, (accuracy, reference, kid.output())
    print(f"ps killed -9: recovered at global step {step} in {took:.1f} s; accuracy {accuracy:.2f}% "
          f"(uninterrupted {reference:.2f}%)")


def test_one_backup_worker_reaches_the_embedded_accuracy(cluster, tmp_path):
    embedded = subprocess.run([sys.executable, "-m", "kernflow.core.cli", "demo", "--no-progress",
                               "--epochs", "10", "--checkpoint-dir", str(tmp_path / "embedded")],
                              capture_output=True, text=True, timeout=120, env=_ENV)
    assert embedded.returncode == 0, embedded.stdout + embedded.stderr
    reference = float(re.search(r"final test accuracy: ([0-9.]+)%", embedded.stdout).group(1))
    kid = _demo(cluster, tmp_path / "backup", "--sync-replicas", "2", "--backup-workers", "1",
                "--epochs", "10")
    try:
        accuracy, final_step = _final(kid, 600)   # ~45 s on an idle 2-core machine
        dropped = int(re.search(r"stale gradients dropped[^:]*: (\d+)", kid.output()).group(1))
    finally:
        kid.kill()
    assert final_step == 230
    # Each step averages the first 2 of 3 gradients (twice the batch of the embedded run). Which
    # two arrive first is up to timing, so the result varies from run to run: 95.82-97.21% in ten
    # runs against the embedded run's 96.94% (the test set has 359 digits: 0.28 points each). The
    # embedded demo reaches 95.82% after 7 epochs and 93.59% after 5, so 2 points below it still
    # tells a run that trained like the embedded one from one that lost a third of its steps.
    assert accuracy >= reference - 2.0, (accuracy, reference, kid.output())
    assert dropped > 0, kid.output()
    print(f"2 of 3 with a backup: {accuracy:.2f}% (embedded {reference:.2f}%), {dropped} dropped")

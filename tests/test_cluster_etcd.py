"""Multi-process clusters that find each other through a real etcd (started here, stopped by PID).

* a worker's key is removed when it stops cleanly, and expires one lease TTL after it is killed;
* ``kernflow cluster up`` / ``down`` round trip with a real step through ``kf.Session(target)``;
* a worker killed and restarted on a new port is found again and steps succeed again;
* etcd restarted (empty) while the cluster runs: the registrations come back, steps keep working.

Every process started is stopped in a finalizer, by its recorded PID.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.client import discovery
from kernflow.client.etcd_server import free_port, pid_alive, start_etcd, stop_pids

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(40)]

TTL = 2
CONFIG = kf.ConfigProto(operation_timeout_in_ms=10_000)


def _cli(*argv, timeout=45):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-m", "kernflow.core.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture
def procs():
    """spawn(*cli args) -> Popen, once it listens; all are stopped afterwards."""
    started = []

    def spawn(*argv):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        p = subprocess.Popen([sys.executable, "-m", "kernflow.core.cli", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env)
        started.append(p)
        seen = []
        while not seen or "listening on" not in seen[-1]:  # log lines (warnings) may come first
            seen.append(p.stdout.readline())
            assert seen[-1], "".join(seen)  # EOF: the process exited
        return p

    yield spawn
    stop_pids([(p.pid, None) for p in started if p.poll() is None], grace_s=3.0)
    for p in started:
        p.wait(5)
        p.stdout.close()


@pytest.fixture
def cluster(tmp_path):
    """``kernflow cluster up --ps 1 --workers 2`` in tmp_path; returns its state; always torn down."""
    state_dir = tmp_path / "state"
    up = _cli("cluster", "up", "--ps", "1", "--workers", "2", "--cluster", "t", "--state-dir",
              str(state_dir), "--ttl", str(TTL), "--timeout", "30")
    state_file = state_dir / "cluster.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else None
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        lines = dict(line.split(": ", 1) for line in up.stdout.splitlines() if ": " in line)
        assert lines["target"] == state["target"] == f"etcd://{state['etcd']['address']}/t"
        assert lines["master"] == state["master"]["target"]
        state["_dir"] = str(state_dir)
        yield state
    finally:
        if state_file.exists():
            _cli("cluster", "down", "--state-dir", str(state_dir), "--grace", "3")
        if state is not None:  # safety net: nothing recorded may survive the test
            recs = [state["etcd"], state["master"], *state["tasks"]]
            stop_pids([(r["pid"], r.get("start_time")) for r in recs if r and r.get("pid")], 2.0)


def _graph():
    """A step through every task: the variable on ps:0, then worker:0, then worker:1."""
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:ps/task:0"):
            v = kf.Variable(np.float32(2.0), name="v")
        x = kf.placeholder(kf.float32, [3], name="x")
        with kf.device("/job:worker/task:0"):
            a = x * v
        with kf.device("/job:worker/task:1"):
            y = a + 1.0
        init = kf.global_variables_initializer()
    return g, init, x, y


def _wait_cluster(endpoint, cluster, check, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    view = None
    while time.monotonic() < deadline:
        try:
            view = discovery.list_cluster(endpoint, cluster, timeout_s=1.0)
        except errors.UnavailableError:
            view = None
        if view is not None and check(view):
            return view
        time.sleep(0.1)
    raise AssertionError(f"cluster {cluster} did not reach the expected state; last view {view}")


def _task(state, name):
    return next(r for r in state["tasks"] if r["name"] == name)


def test_worker_key_removed_on_clean_stop_and_expires_after_kill(etcd, procs):
    ep = etcd.address
    common = ["--etcd", ep, "--cluster", "w", "--ttl", str(TTL), "--port", "0"]
    clean = procs("worker", *common, "--job", "worker", "--task", "0")
    killed = procs("worker", *common, "--job", "worker", "--task", "1")
    view = _wait_cluster(ep, "w", lambda v: len(v["workers"]) == 2)
    assert view["workers"]["/job:worker/replica:0/task:1"]["pid"] == killed.pid
    assert view["workers"]["/job:worker/replica:0/task:0"]["devices"] == [
        "/job:worker/replica:0/task:0/device:CPU:0"]

    clean.send_signal(signal.SIGTERM)
    assert clean.wait(10) == 0
    view = discovery.list_cluster(ep, "w")  # revoked before the process exited
    assert list(view["workers"]) == ["/job:worker/replica:0/task:1"]

    killed.send_signal(signal.SIGKILL)
    killed.wait(5)
    t0 = time.monotonic()
    assert discovery.list_cluster(ep, "w")["workers"]  # still there until the lease expires
    _wait_cluster(ep, "w", lambda v: not v["workers"], timeout_s=TTL + 4)
    assert 0.5 < time.monotonic() - t0 < TTL + 3


def test_cluster_up_step_and_down(cluster):
    g, init, x, y = _graph()
    with kf.Session(cluster["target"], graph=g, config=CONFIG) as sess:
        sess.run(init)
        np.testing.assert_allclose(sess.run(y, {x: [1.0, 2.0, 3.0]}), [3.0, 5.0, 7.0])
        names = sorted(d.name for d in sess.list_devices())
    assert names == ["/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0",
                     "/job:worker/replica:0/task:1/device:CPU:0"]
    with kf.Session(cluster["master"]["target"], graph=g, config=CONFIG) as sess:  # grpc:// works too
        np.testing.assert_allclose(sess.run(y, {x: [0.0, 0.0, 1.0]}), [1.0, 1.0, 3.0])

    again = _cli("cluster", "up", "--state-dir", cluster["_dir"])
    assert again.returncode == 1 and "already up" in again.stderr

    recs = [cluster["etcd"], cluster["master"], *cluster["tasks"]]
    down = _cli("cluster", "down", "--state-dir", cluster["_dir"], "--grace", "5")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not os.path.exists(os.path.join(cluster["_dir"], "cluster.json"))
    assert not os.path.exists(cluster["etcd"]["data_dir"])
    for rec in recs:
        assert not pid_alive(rec["pid"], rec["start_time"]), rec
        assert f"pid {rec['pid']} terminated" in down.stdout  # each stopped cleanly by SIGTERM
    with pytest.raises(errors.UnavailableError, match=cluster["etcd"]["address"]):
        kf.Session(cluster["target"], graph=g)


def test_worker_restarted_on_a_new_port_is_found_again(cluster, procs):
    ep, target = cluster["etcd"]["address"], cluster["target"]
    g, init, x, y = _graph()
    with kf.Session(target, graph=g, config=CONFIG) as sess:
        sess.run(init)
        np.testing.assert_allclose(sess.run(y, {x: [1.0, 1.0, 1.0]}), [3.0] * 3)
        old = _task(cluster, "/job:worker/task:1")
        os.kill(old["pid"], signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises((errors.UnavailableError, errors.AbortedError)):
            sess.run(y, {x: [1.0, 1.0, 1.0]})
        assert time.monotonic() - t0 < 8  # a clear error, not a hang

        port = free_port()
        while f":{port}" in old["address"]:
            port = free_port()
        new = procs("worker", "--etcd", ep, "--cluster", "t", "--ttl", str(TTL), "--job", "worker",
                    "--task", "1", "--port", str(port))
        _wait_cluster(ep, "t", lambda v: v["workers"].get("/job:worker/replica:0/task:1", {}).get("pid")
                      == new.pid)
        deadline, failures = time.monotonic() + 15, []
        while True:
            try:
                out = sess.run(y, {x: [1.0, 2.0, 3.0]})
                break
            except (errors.UnavailableError, errors.AbortedError, errors.NotFoundError) as e:
                failures.append(e)
                assert time.monotonic() < deadline, failures
                time.sleep(0.2)
        np.testing.assert_allclose(out, [3.0, 5.0, 7.0])  # ps:0 kept the variable
        assert len(failures) <= 2, failures
        np.testing.assert_allclose(sess.run(y, {x: [0.0, 0.0, 0.0]}), [1.0] * 3)
    with kf.Session(target, graph=g, config=CONFIG) as sess:  # a new session sees the new task too
        np.testing.assert_allclose(sess.run(y, {x: [1.0, 0.0, 0.0]}), [3.0, 1.0, 1.0])


def test_etcd_restart_while_the_cluster_runs(cluster):
    ep, target, e = cluster["etcd"]["address"], cluster["target"], cluster["etcd"]
    g, init, x, y = _graph()
    with kf.Session(target, graph=g, config=CONFIG) as sess:
        sess.run(init)
        np.testing.assert_allclose(sess.run(y, {x: [1.0, 1.0, 1.0]}), [3.0] * 3)
        stop_pids([(e["pid"], e["start_time"])], grace_s=5.0)
        # etcd is down: running sessions keep working from the last known addresses ...
        np.testing.assert_allclose(sess.run(y, {x: [2.0, 2.0, 2.0]}), [5.0] * 3)
        # ... and new sessions fail at once with an error naming etcd
        t0 = time.monotonic()
        with pytest.raises(errors.UnavailableError, match=f"etcd at {ep}"):
            kf.Session(target, graph=g)
        assert time.monotonic() - t0 < 7
        # a new etcd on the same port with no data: everything registers again
        server = start_etcd(client_port=e["client_port"], peer_port=e["peer_port"])
        try:
            pids = {r["pid"] for r in cluster["tasks"]}
            view = _wait_cluster(ep, "t", lambda v: v["master"] is not None and {
                w["pid"] for w in v["workers"].values()} == pids, timeout_s=10)
            assert view["master"]["address"] == cluster["master"]["address"]
            # The master's watch may deliver the last re-registration a few ms after etcd has it.
            deadline = time.monotonic() + 2
            while True:
                try:
                    out = sess.run(y, {x: [3.0, 3.0, 3.0]})
                    break
                except errors.UnavailableError as err:
                    assert "not registered in etcd" in err.message and time.monotonic() < deadline, err
                    time.sleep(0.05)
            np.testing.assert_allclose(out, [7.0] * 3)
            with kf.Session(target, graph=g, config=CONFIG) as sess2:
                np.testing.assert_allclose(sess2.run(y, {x: [0.0, 1.0, 0.0]}), [1.0, 3.0, 1.0])
            # the master's watch works on the new etcd: a task that leaves is noticed
            w0 = _task(cluster, "/job:worker/task:0")
            os.kill(w0["pid"], signal.SIGTERM)
            _wait_cluster(ep, "t", lambda v: "/job:worker/replica:0/task:0" not in v["workers"])
            deadline = time.monotonic() + 5
            while True:  # first "connection refused", at the latest once the master saw the delete:
                with pytest.raises(errors.UnavailableError) as info:
                    sess.run(y, {x: [0.0, 0.0, 0.0]})
                if "/job:worker/replica:0/task:0 is not registered in etcd" in info.value.message:
                    break
                assert time.monotonic() < deadline, info.value.message
                time.sleep(0.1)
        finally:
            server.stop()


def _wait_for(check, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.mark.timeout(120)
def test_cluster_up_restart_on_failure_brings_killed_processes_back(tmp_path):
    state_dir = tmp_path / "state"
    up = _cli("cluster", "up", "--ps", "1", "--workers", "2", "--cluster", "r", "--state-dir", str(state_dir),
              "--ttl", str(TTL), "--timeout", "30", "--restart", "on-failure")
    state_file = state_dir / "cluster.json"
    seen = []
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = json.loads(state_file.read_text())
        seen += [state["supervisor"], state["etcd"], state["master"], *state["tasks"]]
        assert "supervisor (restart on-failure)" in up.stdout
        ep, target = state["etcd"]["address"], state["target"]
        g, init, x, y = _graph()
        with kf.Session(target, graph=g, config=CONFIG) as sess:
            sess.run(init)
            np.testing.assert_allclose(sess.run(y, {x: [1.0, 1.0, 1.0]}), [3.0] * 3)
        old = _task(state, "/job:worker/task:1")
        os.kill(old["pid"], signal.SIGKILL)

        def restarted():
            rec = _task(json.loads(state_file.read_text()), "/job:worker/task:1")
            return rec if rec["pid"] != old["pid"] and pid_alive(rec["pid"]) else None
        new = _wait_for(restarted, 20, "the supervisor to restart /job:worker/task:1")
        seen.append(new)
        assert new["restarts"] == 1
        _wait_cluster(ep, "r", lambda v: v["workers"].get("/job:worker/replica:0/task:1", {}).get("pid")
                      == new["pid"], timeout_s=15)
        with kf.Session(target, graph=g, config=CONFIG) as sess:   # found through etcd; ps kept v
            np.testing.assert_allclose(sess.run(y, {x: [1.0, 2.0, 3.0]}), [3.0, 5.0, 7.0])

        etcd_old = json.loads(state_file.read_text())["etcd"]
        os.kill(etcd_old["pid"], signal.SIGKILL)
        etcd_new = _wait_for(lambda: (lambda e: e if e["pid"] != etcd_old["pid"] and pid_alive(e["pid"])
                                      else None)(json.loads(state_file.read_text())["etcd"]),
                             20, "the supervisor to restart etcd")
        seen.append(etcd_new)
        _wait_cluster(ep, "r", lambda v: v["master"] is not None and len(v["workers"]) == 3, timeout_s=15)
        status = _cli("cluster", "status", "--state-dir", str(state_dir))
        assert "supervisor" in status.stdout and "(restarted 1x)" in status.stdout, status.stdout

        down = _cli("cluster", "down", "--state-dir", str(state_dir), "--grace", "5")
        assert down.returncode == 0, down.stdout + down.stderr
        time.sleep(1.0)   # nothing comes back after down
        for rec in seen:
            assert not pid_alive(rec["pid"], rec.get("start_time")), rec
    finally:
        if state_file.exists():
            _cli("cluster", "down", "--state-dir", str(state_dir), "--grace", "3")
        stop_pids([(r["pid"], r.get("start_time")) for r in seen if r and r.get("pid")], 2.0)

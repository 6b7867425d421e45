"""``kernflow cluster up --secure``: generated credentials, etcd with TLS and authentication, and a
client that runs a step with exactly what ``up`` printed (issue 18, point 3).

One cluster (etcd, a master, one worker task) on 127.0.0.1; every process it started is stopped by
its recorded PID whatever happens.
"""

import json
import os
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernflow.core.framework import errors
from kernflow.client import discovery
from kernflow.client.etcd_client import EtcdCredentials
from kernflow.client.etcd_server import pid_alive, stop_pids

pytestmark = [pytest.mark.slow, pytest.mark.etcd, pytest.mark.timeout(120)]

_SECURITY_ENV = ("KERNFLOW_TLS_CA", "KERNFLOW_TLS_CERT", "KERNFLOW_TLS_KEY", "KERNFLOW_TLS_SERVER_NAME",
                 "KERNFLOW_TOKEN", "KERNFLOW_TOKEN_FILE", "KERNFLOW_ETCD_USER", "KERNFLOW_ETCD_PASSWORD_FILE")

# A step on the cluster, run by a client process that has only the environment `up` printed.
_CLIENT = """
import sys
import kernflow.core as kf
g = kf.Graph()
with g.as_default():
    x = kf.placeholder(kf.float32, [3], name="x")
    with kf.device("/job:worker/task:0"):
        y = x * 3.0 + 1.0
with kf.Session(sys.argv[1], graph=g) as sess:
    print("result", sess.run(y, {x: [1.0, 2.0, 3.0]}).tolist())
"""


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in _SECURITY_ENV}
    env.update(PYTHONUNBUFFERED="1", **extra)
    return env


def _cli(*argv, timeout=60):
    return subprocess.run([sys.executable, "-m", "kernflow.core.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, env=_env())


def _printed(stdout: str) -> tuple[dict, dict]:
    """(``{"target": ..., "master": ...}``, the variables of the ``export`` line)."""
    lines = dict(line.split(": ", 1) for line in stdout.splitlines()
                 if line.startswith(("target:", "master:")))
    exports = [line for line in stdout.splitlines() if line.startswith("export ")]
    assert len(exports) == 1, stdout
    return lines, dict(word.split("=", 1) for word in shlex.split(exports[0])[1:])


@pytest.fixture
def secure_cluster(tmp_path):
    state_dir = tmp_path / "state"
    up = _cli("cluster", "up", "--secure", "--ps", "0", "--workers", "1", "--cluster", "sec",
              "--state-dir", str(state_dir), "--ttl", "3", "--timeout", "45", timeout=90)
    state_file = state_dir / "cluster.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else None
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state["_dir"], state["_up"] = str(state_dir), up
        yield state
    finally:
        if state_file.exists():
            _cli("cluster", "down", "--state-dir", str(state_dir), "--grace", "3")
        if state is not None:  # safety net: nothing recorded may survive the test
            recs = [state["etcd"], state["master"], *state["tasks"]]
            stop_pids([(r["pid"], r.get("start_time")) for r in recs if r and r.get("pid")], 2.0)


def test_cluster_up_secure_generates_credentials_and_locks_etcd(secure_cluster):
    state, up = secure_cluster, secure_cluster["_up"]
    lines, exports = _printed(up.stdout)
    port = state["etcd"]["client_port"]
    assert "(secure: TLS, cluster token, etcd authentication)" in up.stdout
    assert lines["target"] == state["target"] == f"etcds://127.0.0.1:{port}/sec"
    assert state["etcd"]["address"] == f"https://127.0.0.1:{port}"

    # The files: a private state directory, a private credentials directory, private files.
    creds_dir = state["credentials"]
    assert stat.S_IMODE(os.stat(state["_dir"]).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(creds_dir).st_mode) == 0o700
    names = sorted(os.listdir(creds_dir))
    assert names == sorted(["ca.crt", "ca.key", "server.crt", "server.key", "client.crt", "client.key",
                            "token", "etcd-root.password", "etcd-kernflow.password",
                            "etcd-kernflow-client.password"])
    for name in names:
        assert stat.S_IMODE(os.stat(os.path.join(creds_dir, name)).st_mode) == 0o600, name
    assert set(exports) == {"KERNFLOW_TLS_CA", "KERNFLOW_TLS_CERT", "KERNFLOW_TLS_KEY", "KERNFLOW_TOKEN_FILE",
                            "KERNFLOW_ETCD_USER", "KERNFLOW_ETCD_PASSWORD_FILE"}
    assert all(exports[k].startswith(creds_dir) for k in exports if k != "KERNFLOW_ETCD_USER")
    # The services were started with the TLS options and the token, and without secrets in argv.
    argv = state["master"]["argv"]
    for flag in ("--tls-cert", "--tls-key", "--tls-ca", "--token-file"):
        assert flag in argv
    secrets = [open(os.path.join(creds_dir, n)).read().strip() for n in names
               if n.endswith((".password", "token"))]
    recorded = (Path(state["_dir"]) / "cluster.json").read_text()
    assert not any(s in recorded for s in secrets)

    # etcd refuses an anonymous client, and one with the certificate but no user, at once.
    for anon in (EtcdCredentials(ca_file=exports["KERNFLOW_TLS_CA"]),
                 EtcdCredentials(ca_file=exports["KERNFLOW_TLS_CA"], cert_file=exports["KERNFLOW_TLS_CERT"],
                                 key_file=exports["KERNFLOW_TLS_KEY"])):
        t0 = time.monotonic()
        with pytest.raises(errors.UnauthenticatedError, match=f"etcd at https://127.0.0.1:{port}"):
            discovery.list_cluster(state["etcd"]["address"], "sec", timeout_s=5, credentials=anon)
        assert time.monotonic() - t0 < 3
    with pytest.raises(errors.UnavailableError, match="etcds://"):   # plain text to a TLS etcd
        discovery.list_cluster(f"127.0.0.1:{port}", "sec", timeout_s=5, credentials=EtcdCredentials())
    # ... and the printed client environment reads the registrations (but may not write them).
    client = EtcdCredentials.from_env(exports)
    view = discovery.list_cluster(state["etcd"]["address"], "sec", timeout_s=5, credentials=client)
    assert view["master"]["address"] == state["master"]["address"]
    with pytest.raises(errors.PermissionDeniedError):
        discovery.Registration(state["etcd"]["address"], discovery.master_key("sec"), {"address": "evil:1"},
                               ttl_s=2, credentials=client).start()

    # A client process with exactly the printed environment runs a step through the printed target.
    run = subprocess.run([sys.executable, "-c", _CLIENT, lines["target"]], capture_output=True, text=True,
                         timeout=60, env=_env(**exports))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "result [4.0, 7.0, 10.0]" in run.stdout
    # Without the token, the master refuses the same client.
    no_token = {k: v for k, v in exports.items() if k != "KERNFLOW_TOKEN_FILE"}
    run = subprocess.run([sys.executable, "-c", _CLIENT, lines["target"]], capture_output=True, text=True,
                         timeout=60, env=_env(**no_token))
    assert run.returncode != 0 and "UnauthenticatedError" in run.stderr, run.stdout + run.stderr

    status = _cli("cluster", "status", "--state-dir", state["_dir"])
    assert status.returncode == 0, status.stdout + status.stderr
    assert f"registered master: {state['master']['address']}" in status.stdout
    recs = [state["etcd"], state["master"], *state["tasks"]]
    down = _cli("cluster", "down", "--state-dir", state["_dir"], "--grace", "5")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not os.path.exists(creds_dir)             # the CA key and the secrets go with the cluster
    for rec in recs:
        assert not pid_alive(rec["pid"], rec["start_time"]), rec


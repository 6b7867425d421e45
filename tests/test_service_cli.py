"""`kernflow worker` and `kernflow master`: what cannot work is refused in one line, never a traceback;
every command's cluster in etcd is `local` unless named."""

import argparse
import socket
import subprocess
import sys

import pytest


def _kernflow(*args):
    return subprocess.run([sys.executable, "-m", "kernflow.core.cli", *args], capture_output=True, text=True,
                          timeout=60)


def _error_line(r, status):
    assert r.returncode == status, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    return r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args, why", [
    (["--task", "5"], "/job:worker/task:5 is not in --cluster-spec (job worker has tasks 0)"),
    (["--job", "ps"], "/job:ps/task:0 is not in --cluster-spec (it has no job ps; jobs: worker)"),
])
def test_worker_refuses_a_task_its_cluster_spec_does_not_list(args, why):
    r = _kernflow("worker", *args, "--cluster-spec", '{"worker": ["127.0.0.1:0"]}')
    assert _error_line(r, 2) == f"kernflow worker: {why}"


@pytest.mark.parametrize("command", [["worker"], ["master", "--cluster-spec", '{"worker": ["127.0.0.1:1"]}']])
def test_a_port_in_use_is_named(command):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        r = _kernflow(*command, "--port", str(port))
    line = _error_line(r, 1)
    assert line.startswith(f"kernflow {command[0]}: "), line
    assert line.endswith(f"port {port} is already in use"), line


@pytest.mark.parametrize("command, argv", [("worker", []), ("master", []), ("cluster", ["up"])])
def test_the_cluster_name_defaults_to_local(command, argv):
    from kernflow.core.plugins import registries
    parser = argparse.ArgumentParser()
    registries().commands.commands[command].configure(parser)
    assert parser.parse_args(argv).cluster == "local"

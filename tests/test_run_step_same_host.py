"""A client process's RunStep to a task server on its host goes over the same-host channel: the
server killed mid-session fails the next step with UnavailableError (not a hang), and a server
restarted on the same port serves new sessions over the socket again."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import kernflow.core as kf
from kernflow.client import local_channel

pytestmark = pytest.mark.slow

_SERVER = textwrap.dedent("""
    import sys
    import kernflow.core as kf
    server = kf.train.Server(kf.train.ClusterSpec({"worker": ["127.0.0.1:" + sys.argv[1]]}),
                             job_name="worker", task_index=0)
    print("ready", flush=True)
    server.join()
""")


def _start(port: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", _SERVER, str(port)], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
    assert p.stdout.readline().strip() == "ready"
    return p


def _graph():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None])
        y = kf.reduce_sum(x * 2.0)
    return g, x, y


def test_run_step_over_the_socket_survives_a_killed_and_restarted_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"127.0.0.1:{port}"
    g, x, y = _graph()
    server = _start(port)
    try:
        sess = kf.Session(f"grpc://{address}", graph=g)
        assert sess.run(y, {x: [1.0, 2.0]}) == 6.0
        assert isinstance(local_channel._by_address.get(address), local_channel.LocalChannel)
        server.send_signal(signal.SIGKILL)   # as a crash: no goodbye on either channel
        server.wait()
        t = time.monotonic()
        with pytest.raises(kf.errors.UnavailableError):
            sess.run(y, {x: [1.0]}, options=kf.RunOptions(timeout_in_ms=5000))
        assert time.monotonic() - t < 10
        server = _start(port)
        deadline = time.monotonic() + 40   # (gRPC's reconnect backoff; the socket's 1-30 s retry)
        while True:   # as a user's retrying loop: a new session once the server answers again
            try:
                with kf.Session(f"grpc://{address}", graph=g) as fresh:
                    assert fresh.run(y, {x: [3.0]}) == 6.0
                    if isinstance(local_channel._by_address.get(address), local_channel.LocalChannel):
                        break
            except kf.errors.UnavailableError:
                pass
            assert time.monotonic() < deadline, "RunStep never went back to the socket"
            time.sleep(0.5)
        with pytest.raises(kf.errors.AbortedError, match="not found"):
            sess.close()   # the restarted master does not know the old session
    finally:
        server.kill()
        server.wait()
        local_channel.forget()

"""`channels.bind`: a server's port, and errors that say why an address cannot be bound."""

import concurrent.futures
import contextlib
import socket

import grpc
import pytest

from kernflow.client import channels
from kernflow.core.framework import errors


@pytest.fixture
def server():
    s = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=1), options=channels.SERVER_OPTIONS)
    yield s
    s.stop(None)


def test_bind_port_zero_picks_a_free_port(server):
    assert channels.bind(server, "127.0.0.1", 0) > 0


@contextlib.contextmanager
def _held_port(reuse=False):
    """A port another socket listens on (127.0.0.1), for the duration of the block."""
    with socket.socket() as held:
        if reuse:
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def test_bind_a_port_in_use_says_so(server):
    with _held_port() as port:
        with pytest.raises(errors.UnavailableError) as e:
            channels.bind(server, "127.0.0.1", port)
    assert e.value.message == f"cannot bind 127.0.0.1:{port}: port {port} is already in use"


def test_bind_an_address_not_on_this_machine_gives_grpcs_reason(server):
    with pytest.raises(errors.UnavailableError, match=r"^cannot bind 192\.0\.2\.1:0: Failed to bind"):
        channels.bind(server, "192.0.2.1", 0)   # TEST-NET-1: never a local address


def test_bind_localhost_whose_ipv4_port_another_process_holds_fails_instead_of_serving_ipv6_alone(server):
    """gRPC binds a name to every address it resolves to and succeeds if one bind does: a worker on
    "localhost:P" with 127.0.0.1:P held elsewhere served on [::1]:P alone, and callers reaching
    127.0.0.1:P talked to the other process as if it were the task (a test's "frozen" task 1 kept
    answering)."""
    with _held_port(reuse=True) as port:
        with pytest.raises(errors.UnavailableError) as e:
            channels.bind(server, "localhost", port)
    assert e.value.message == f"cannot bind localhost:{port} (127.0.0.1:{port}): port {port} is already in use"


def test_bind_localhost_serves_both_loopback_addresses():
    from kernflow.core.testing.processes import free_ports
    port = free_ports(1)[0]
    s = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=1), options=channels.SERVER_OPTIONS)
    try:
        assert channels.bind(s, "localhost", port) == port
        s.start()
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            if host == "::1" and not channels._bindable("::1"):
                continue   # (no IPv6 loopback on this machine)
            with socket.socket(family, socket.SOCK_STREAM) as c:
                c.settimeout(5)
                c.connect((host, port))   # accepted: this server listens there
    finally:
        s.stop(None)

"""`channels.bind`: a server's port, and errors that say why an address cannot be bound."""

import concurrent.futures
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


def test_bind_a_port_in_use_says_so(server):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(errors.UnavailableError) as e:
            channels.bind(server, "127.0.0.1", port)
    assert e.value.message == f"cannot bind 127.0.0.1:{port}: port {port} is already in use"


def test_bind_an_address_not_on_this_machine_gives_grpcs_reason(server):
    with pytest.raises(errors.UnavailableError, match=r"^cannot bind 192\.0\.2\.1:0: Failed to bind"):
        channels.bind(server, "192.0.2.1", 0)   # TEST-NET-1: never a local address

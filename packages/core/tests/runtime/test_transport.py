"""Transport selection (kernflow/core/runtime/transport.py) over a registry of fake transports: the
priority order, what both ends must serve, the same-host rule, probes, KERNFLOW_TRANSPORT and the
host id. The real transports are tested in packages/client/tests and packages/worker/tests, the
multi-process rules in tests/test_transports.py."""

import types

import pytest

from kernflow.core.framework import errors
from kernflow.core.plugins import hookimpl, manager
from kernflow.core.runtime import transport
from kernflow.core.runtime.transport import Probe, Transport


class _Fake(Transport):
    def __init__(self, same_host_only=False):
        self.same_host_only = same_host_only
        self.closed = False

    def close(self):
        self.closed = True


class _TokenProbe(Probe):
    def __init__(self, token):
        super().__init__(b"challenge")
        self.token = token
        self.closed = False

    def accepts(self, params):
        return params == self.token

    def close(self):
        self.closed = True


@pytest.fixture
def fakes(monkeypatch):
    """Registries holding only fake transports: grpc (0), shm-like "near" (100, same host), "far" (50),
    "also" (50); returns {name: instance}."""
    def kernflow_register_transports(registry):
        registry.register("grpc", _Fake, priority=0)
        registry.register("near", lambda: _Fake(same_host_only=True), priority=100)
        registry.register("far", _Fake, priority=50)
        registry.register("also", _Fake, priority=50)

    pm = manager.KernflowPluginManager()
    pm.register(types.SimpleNamespace(kernflow_register_transports=hookimpl(kernflow_register_transports)),
                name="fake_transports")
    monkeypatch.setattr(manager, "_registries", manager.Registries(pm))
    monkeypatch.delenv(transport.TRANSPORT_ENV, raising=False)
    monkeypatch.setenv(transport.HOST_ID_ENV, "host-a")
    yield {t.name: t for t in transport.transports()}
    transport.reset_for_tests()


def test_transports_come_in_priority_order_ties_by_name(fakes):
    assert [t.name for t in transport.transports()] == ["near", "also", "far", "grpc"]
    assert transport.transports() is transport.transports()   # one instance each per process
    assert transport.default() is fakes["grpc"]


def test_the_first_transport_both_ends_serve_is_chosen(fakes):
    offers, probes = {"grpc": b"", "far": b"", "also": b""}, transport.open_probes()
    assert transport.select("host-b", offers, probes) is fakes["also"]
    assert transport.select("host-b", {"grpc": b"", "far": b""}, probes) is fakes["far"]
    assert transport.select("host-b", {"grpc": b""}, probes) is fakes["grpc"]
    assert transport.select("host-b", {}, probes) is fakes["grpc"]          # a peer that lists nothing
    assert transport.select("host-b", offers, {}) is fakes["grpc"]          # no probe sent: not chosen


def test_a_same_host_transport_needs_equal_host_ids(fakes):
    offers, probes = {"grpc": b"", "near": b"", "far": b""}, transport.open_probes()
    assert transport.select("host-a", offers, probes) is fakes["near"]
    assert transport.select("host-b", offers, probes) is fakes["far"]
    assert transport.select("", offers, probes) is fakes["far"]             # unknown host: never


def test_a_probe_must_accept_the_offer(fakes):
    probes = dict(transport.open_probes(), near=_TokenProbe(b"secret"))
    offers = {"grpc": b"", "near": b"wrong", "far": b""}
    assert transport.select("host-a", offers, probes) is fakes["far"]
    assert transport.select("host-a", dict(offers, near=b"secret"), probes) is fakes["near"]


def test_a_failing_transport_is_never_chosen(fakes, monkeypatch, caplog):
    def broken(*args):
        raise RuntimeError("boom")
    monkeypatch.setattr(fakes["near"], "probe", broken)
    probes = transport.open_probes()
    assert sorted(probes) == ["also", "far"] and "'near' failed to make its probe" in caplog.text
    assert transport.select("host-a", {"grpc": b"", "near": b""}, probes) is fakes["grpc"]
    probes["near"] = Probe()
    monkeypatch.setattr(probes["near"], "accepts", broken)
    assert transport.select("host-a", {"grpc": b"", "near": b""}, probes) is fakes["grpc"]
    assert "'near' failed to check an offer" in caplog.text


def test_kernflow_transport_limits_what_is_chosen(fakes, monkeypatch, caplog):
    offers, probes = {"grpc": b"", "near": b"", "far": b"", "also": b""}, transport.open_probes()
    monkeypatch.setenv(transport.TRANSPORT_ENV, "grpc")
    assert [t.name for t in transport.allowed()] == ["grpc"]
    assert not transport.needs_negotiation()
    assert transport.select("host-a", offers, probes) is fakes["grpc"]
    assert transport.open_probes() == {}
    monkeypatch.setenv(transport.TRANSPORT_ENV, "far, nope")
    assert [t.name for t in transport.allowed()] == ["far", "grpc"]     # grpc is always allowed
    assert "unknown transports ['nope']" in caplog.text
    assert transport.select("host-a", offers, probes) is fakes["far"]
    assert transport.env_setting() == "far, nope"


def test_open_probes_makes_one_per_allowed_transport_but_grpc(fakes):
    probes = transport.open_probes()
    assert sorted(probes) == ["also", "far", "near"]
    assert all(type(p) is Probe and p.challenge == b"" and p.accepts(b"anything") for p in probes.values())


def test_unknown_transport_and_missing_grpc_name_what_exists(fakes, monkeypatch):
    with pytest.raises(errors.NotFoundError, match="no transport named 'rdma'; registered: 'near'"):
        transport.get("rdma")

    def only_far(registry):
        registry.register("far", _Fake)
    pm = manager.KernflowPluginManager()
    pm.register(types.SimpleNamespace(kernflow_register_transports=hookimpl(only_far)), name="only_far")
    monkeypatch.setattr(manager, "_registries", manager.Registries(pm))
    with pytest.raises(errors.NotFoundError, match="no 'grpc' transport is registered.*far.*kernflow-client"):
        transport.transports()


def test_rebuilt_registries_close_the_old_instances(fakes, monkeypatch):
    old = fakes["far"]
    pm = manager.KernflowPluginManager()
    pm.register(types.SimpleNamespace(kernflow_register_transports=hookimpl(
        lambda registry: registry.register("grpc", _Fake))), name="grpc_only")
    monkeypatch.setattr(manager, "_registries", manager.Registries(pm))
    assert [t.name for t in transport.transports()] == ["grpc"]
    assert old.closed


def test_registry_rejects_duplicates_and_bad_names(fakes):
    regs = manager.registries().transports
    with pytest.raises(ValueError, match="transport 'far' registered twice: first at .*test_transport.py"):
        regs.register("far", _Fake)
    with pytest.raises(ValueError, match="transport name 'a b'"):
        regs.register("a b", _Fake)
    assert regs.priority("near") == 100 and regs.names() == ["also", "far", "grpc", "near"]


def test_host_id(monkeypatch):
    monkeypatch.setenv(transport.HOST_ID_ENV, "simulated-host")
    assert transport.host_id() == "simulated-host"
    monkeypatch.delenv(transport.HOST_ID_ENV)
    real = transport.host_id()
    assert real == transport.host_id() and real.split(":")[0] in ("boot", "machine", "process")

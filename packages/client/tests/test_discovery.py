"""etcd discovery (`kernflow.client.discovery`) against a real etcd started here on free ports.

Registrations under leases (revoked on stop, expiring after a crash), the watched worker table and
its resolver, re-registration after etcd restarts without its data, ``etcd://`` session targets,
and clear `UnavailableError`s naming etcd's address when it is down.
"""

import os
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.client import discovery
from kernflow.client import etcd_server
from kernflow.client.etcd_server import free_port, start_etcd

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def etcd():
    server = start_etcd()
    yield server
    server.stop()


@pytest.fixture
def cleanup():
    """Objects with stop() registered here are stopped after the test, whatever happens."""
    objs = []
    yield objs.append
    for obj in reversed(objs):
        try:
            obj.stop()
        except Exception:  # noqa: BLE001 - cleanup
            pass


def _dead_endpoint():
    return f"127.0.0.1:{free_port()}"


# ---------------------------------------------------------------------------- starting etcd
def test_a_port_taken_after_it_was_picked_is_retried_on_new_ports(monkeypatch):
    """free_port's pick can be taken before etcd binds it (tests running side by side): etcd exits
    at once, and start_etcd starts it again on new ports instead of failing."""
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        picks = [port]   # the first pick (the client port) is the taken one
        real = etcd_server.free_port
        monkeypatch.setattr(etcd_server, "free_port",
                            lambda host="127.0.0.1": picks.pop() if picks else real(host))
        server = start_etcd()
    try:
        assert not picks and server.client_port != port
        reg = discovery.worker_registration(server.endpoint, "retry", "w", 0, "127.0.0.1:1")
        reg.start(wait_s=5.0)
        reg.stop()
    finally:
        server.stop()


def test_a_taken_port_given_by_the_caller_is_not_retried():
    import socket
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(errors.UnavailableError, match=f"etcd at http://127.0.0.1:{port} exited"):
            start_etcd(client_port=port, peer_port=free_port())


# ---------------------------------------------------------------------------- names
def test_targets_keys_and_task_names():
    assert discovery.parse_etcd_target("etcd://127.0.0.1:2379/prod") == ("127.0.0.1:2379", "prod")
    assert discovery.parse_etcd_target("etcd://h:1/c/") == ("h:1", "c")
    assert discovery.parse_etcd_target("etcd://h:1") == ("h:1", "local")
    assert discovery.DEFAULT_CLUSTER == "local"   # the name `kernflow cluster up` uses too
    for bad in ("grpc://h:1/c", "etcd:///c", "etcd://h:x/c", "etcd://h:1/a b"):
        with pytest.raises(errors.InvalidArgumentError):
            discovery.parse_etcd_target(bad)
    assert discovery.parse_endpoint("http://10.0.0.1:2379/") == "10.0.0.1:2379"
    assert discovery.parse_endpoint("etcd.local") == "etcd.local:2379"
    assert discovery.parse_endpoint("[::1]:23") == "[::1]:23"
    key = discovery.worker_key("c", "ps", 3)
    assert key == "/kernflow/c/workers/ps/3" and discovery.master_key("c") == "/kernflow/c/master"
    assert discovery.task_from_key("c", key.encode()) == "/job:ps/replica:0/task:3"
    assert discovery.task_from_key("c", "/kernflow/c/workers/ps/x") is None
    assert discovery.task_from_key("other", key) is None
    assert discovery.canonical_task("/job:w/task:1/device:CPU:0") == "/job:w/replica:0/task:1"
    with pytest.raises(errors.InvalidArgumentError):
        discovery.canonical_task("/job:w")
    with pytest.raises(errors.InvalidArgumentError):
        discovery.worker_key("c", "a/b", 0)
    assert discovery.advertised_address("127.0.0.1", 5) == "127.0.0.1:5"
    assert discovery.advertised_address("0.0.0.0", 5, advertise="node7") == "node7:5"


def test_etcd_binary_lookup(monkeypatch, tmp_path):
    monkeypatch.setenv("ETCD_BIN", str(tmp_path / "missing"))
    with pytest.raises(errors.NotFoundError, match="ETCD_BIN"):
        etcd_server.find_etcd_binary()
    monkeypatch.delenv("ETCD_BIN")
    path = etcd_server.find_etcd_binary()
    assert os.access(path, os.X_OK)


# ---------------------------------------------------------------------------- registrations
def test_register_watch_resolve_and_revoke(etcd, cleanup):
    table = discovery.WorkerTable(etcd.address, "reg").start()
    cleanup(table)
    assert table.entries() == {} and table.watching
    r0 = discovery.worker_registration(etcd.address, "reg", "worker", 0, "127.0.0.1:1000",
                                       devices=["/job:worker/replica:0/task:0/device:CPU:0"], ttl_s=2)
    r1 = discovery.worker_registration(etcd.address, "reg", "ps", 0, "127.0.0.1:1001", ttl_s=2)
    cleanup(r0.start())
    cleanup(r1.start())
    assert r0.registered and r0.registrations == 1
    assert table.wait_until(lambda e: len(e) == 2, 5)
    assert table.tasks() == ["/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"]
    entry = table.entries()["/job:worker/replica:0/task:0"]
    assert entry["address"] == "127.0.0.1:1000" and entry["pid"] == os.getpid()
    assert entry["devices"] == ["/job:worker/replica:0/task:0/device:CPU:0"]
    resolve = table.resolver()
    client = resolve("/job:worker/task:0")
    assert client.address == "127.0.0.1:1000" and resolve("/job:worker/replica:0/task:0") is client
    view = discovery.list_cluster(etcd.address, "reg")
    assert view["master"] is None and sorted(view["workers"]) == table.tasks()

    t0 = time.monotonic()
    r0.stop()  # revokes the lease: the key goes at once
    assert table.wait_until(lambda e: "/job:worker/replica:0/task:0" not in e, 2)
    assert time.monotonic() - t0 < 1.5
    assert discovery.list_cluster(etcd.address, "reg")["workers"].keys() == {"/job:ps/replica:0/task:0"}
    assert table.known_tasks() == ["/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"]
    with pytest.raises(errors.UnavailableError, match=f"not registered in etcd at {etcd.address}"):
        resolve("/job:worker/task:0")


def test_key_expires_after_ttl_when_holder_stops_refreshing(etcd, cleanup):
    table = discovery.WorkerTable(etcd.address, "ttl").start()
    cleanup(table)
    reg = discovery.worker_registration(etcd.address, "ttl", "worker", 0, "127.0.0.1:1", ttl_s=2).start()
    cleanup(reg)
    time.sleep(2.5)  # longer than the TTL: the keepalive holds the key
    assert discovery.list_cluster(etcd.address, "ttl")["workers"]
    reg.stop(revoke=False)  # what a crash looks like to etcd
    t0 = time.monotonic()
    assert table.wait_until(lambda e: not e, 5)
    assert 0.8 < time.monotonic() - t0 < 4.0


def test_resolver_follows_a_task_to_a_new_address(etcd, cleanup):
    table = discovery.WorkerTable(etcd.address, "move").start()
    cleanup(table)
    old = discovery.worker_registration(etcd.address, "move", "worker", 1, "127.0.0.1:2001", ttl_s=2)
    cleanup(old.start())
    assert table.wait_until(lambda e: len(e) == 1, 5)
    resolve = table.resolver(client_timeout_s=3.0)
    first = resolve("/job:worker/task:1")
    assert first.address == "127.0.0.1:2001" and first.default_timeout_s == 3.0
    old.stop(revoke=False)  # the old process died; the restarted one overwrites its key at once
    new = discovery.worker_registration(etcd.address, "move", "worker", 1, "127.0.0.1:2002", ttl_s=2)
    cleanup(new.start())
    assert table.wait_until(lambda e: e.get("/job:worker/replica:0/task:1", {}).get("address")
                            == "127.0.0.1:2002", 5)
    second = resolve("/job:worker/task:1")
    assert second is not first and second.address == "127.0.0.1:2002"
    time.sleep(2.6)  # the dead process's lease expires; the key now belongs to the new lease
    assert table.address("/job:worker/task:1") == "127.0.0.1:2002"


def test_reregisters_and_relists_after_etcd_restarts_empty(cleanup):
    server = start_etcd()
    cleanup(server)
    ep = server.address
    table = discovery.WorkerTable(ep, "r").start()
    cleanup(table)
    reg = discovery.master_registration(ep, "r", "127.0.0.1:3000", ttl_s=2).start()
    worker = discovery.worker_registration(ep, "r", "worker", 0, "127.0.0.1:3001", ttl_s=2).start()
    cleanup(reg)
    cleanup(worker)
    assert table.wait_until(lambda e: len(e) == 1, 5)
    port, peer = server.client_port, server.peer_port
    server.stop()  # the data directory goes too: the new etcd knows no key and no lease
    with pytest.raises(errors.UnavailableError, match=ep):
        discovery.lookup_master(ep, "r", timeout_s=1.0)
    time.sleep(0.5)
    assert table.address("/job:worker/task:0") == "127.0.0.1:3001"  # the last table stays usable
    server = start_etcd(client_port=port, peer_port=peer)
    cleanup(server)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            view = discovery.list_cluster(ep, "r", timeout_s=1.0)
        except errors.UnavailableError:
            view = None
        # (the table may list the new etcd before the worker registers again: it then learns of
        # the worker through its watch, a moment after `list_cluster` sees it)
        if view and view["master"] and view["workers"] and table.listings >= 2 and table.watching \
                and table.address("/job:worker/task:0") == "127.0.0.1:3001":
            break
        time.sleep(0.1)
    assert view["master"]["address"] == "127.0.0.1:3000"
    assert reg.registrations >= 2 and worker.registrations >= 2 and table.listings >= 2
    assert table.address("/job:worker/task:0") == "127.0.0.1:3001"
    worker.stop()
    assert table.wait_until(lambda e: not e, 3)  # the watch works on the new etcd


# ---------------------------------------------------------------------------- etcd down
def test_etcd_down_gives_unavailable_naming_its_address():
    ep = _dead_endpoint()
    t0 = time.monotonic()
    with pytest.raises(errors.UnavailableError, match=f"etcd at {ep}"):
        discovery.lookup_master(ep, "c", timeout_s=1.0)
    with pytest.raises(errors.UnavailableError, match=f"etcd at {ep}"):
        discovery.list_cluster(ep, "c", timeout_s=1.0)
    with pytest.raises(errors.UnavailableError, match=f"etcd at {ep}"):
        discovery.worker_registration(ep, "c", "w", 0, "127.0.0.1:1").start(wait_s=1.0)
    with pytest.raises(errors.UnavailableError, match=f"etcd at {ep}"):
        discovery.WorkerTable(ep, "c").start(wait_s=1.0)
    with pytest.raises(errors.UnavailableError, match=f"etcd at {ep}"):
        kf.Session(f"etcd://{ep}/c")
    assert time.monotonic() - t0 < 8


# ---------------------------------------------------------------------------- etcd:// sessions
def test_plugin_registers_etcd_scheme_and_cluster_command():
    from kernflow.client import grpc_session
    from kernflow.core.plugins import registries
    factory = registries().session_factories.get("etcd")
    assert factory is grpc_session.etcd_session_factory and factory.reset is grpc_session.etcd_reset
    assert "cluster" in registries().commands.commands


def test_session_without_a_registered_master(etcd):
    with pytest.raises(errors.UnavailableError, match="no master of cluster 'nomaster'"):
        kf.Session(f"etcd://{etcd.address}/nomaster")


def test_a_bare_etcd_target_means_local_and_falls_back_to_the_legacy_default(etcd, cleanup):
    bare = f"etcd://{etcd.address}"
    neither = "no master of cluster 'local' nor of cluster 'default'"
    with pytest.raises(errors.UnavailableError, match=neither):
        discovery.resolve_master_target(bare)
    cleanup(discovery.master_registration(etcd.address, "default", "127.0.0.1:1001", ttl_s=2).start())
    assert discovery.resolve_master_target(bare) == "grpc://127.0.0.1:1001"
    with pytest.raises(errors.UnavailableError, match="no master of cluster 'local' is registered"):
        discovery.resolve_master_target(bare + "/local")   # a named cluster never falls back
    cleanup(discovery.master_registration(etcd.address, "local", "127.0.0.1:1002", ttl_s=2).start())
    assert discovery.resolve_master_target(bare) == "grpc://127.0.0.1:1002"
    assert discovery.resolve_master_target(bare + "/") == "grpc://127.0.0.1:1002"


def test_etcd_session_finds_the_registered_master(etcd, fake_master, cleanup):
    cleanup(discovery.master_registration(etcd.address, "sess", fake_master.address, ttl_s=2).start())
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        y = x * 3.0
    target = f"etcd://{etcd.address}/sess"
    with kf.Session(target, graph=g) as sess:
        np.testing.assert_allclose(sess.run(y, {x: [1.0, 2.0]}), [3.0, 6.0])
        assert sess.sess_str == target
    kf.Session.reset(target, ["c1"])
    resets = [r for m, r in fake_master.servicer.requests if m == "Reset"]
    assert list(resets[-1].container) == ["c1"]


# ---------------------------------------------------------------------------- the cluster command
def test_cluster_command_errors(tmp_path, capsys):
    from kernflow.core.cli import main
    assert main(["cluster", "down", "--state-dir", str(tmp_path)]) == 1
    assert "nothing to stop" in capsys.readouterr().err
    assert main(["cluster", "up", "--ps", "0", "--workers", "0", "--state-dir", str(tmp_path)]) == 2
    assert main(["cluster", "up", "--cluster", "a/b", "--state-dir", str(tmp_path)]) == 2
    assert main(["cluster", "status", "--state-dir", str(tmp_path)]) == 1
    assert not (tmp_path / "cluster.json").exists()

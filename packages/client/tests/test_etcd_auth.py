"""etcd with TLS and authentication: the credentials `kernflow cluster up` generates
(`kernflow.client.cluster_credentials`), an etcd started with them (`etcd_server.start_etcd` with
``tls=`` and ``auth=``), and the clients (`etcd_client`, `discovery`) with and without the right ones.

One secure etcd serves the module (a real etcd on 127.0.0.1, free ports): it refuses clients
without a certificate, without a user, with a wrong password, or writing without the right, each
at once with a one-line error; it serves put/get/watch/lease and the registration/discovery round
trip to the right credentials.
"""

import base64
import datetime
import json
import os
import re
import ssl
import stat
import time
import urllib.error
import urllib.request

import pytest

from kernflow.core.framework import errors
from kernflow.client import cluster_credentials, discovery
from kernflow.client.etcd_client import EtcdConnection, EtcdCredentials, EtcdLoop, once
from kernflow.client.etcd_server import EtcdAuth, EtcdTLS, EtcdUser, is_loopback, start_etcd

pytestmark = [pytest.mark.etcd, pytest.mark.timeout(90)]

FAST_S = 3.0    # a refusal must come this quickly: never a wait for a deadline


@pytest.fixture(scope="module")
def creds(tmp_path_factory):
    return cluster_credentials.generate(str(tmp_path_factory.mktemp("secure") / "credentials"),
                                        cluster_credentials.host_names("127.0.0.1"))


def _auth(creds):
    return EtcdAuth(creds.etcd_password("root"), tuple(
        EtcdUser(user, creds.etcd_password(user), prefix, write)
        for user, (prefix, write) in cluster_credentials.ETCD_USERS.items() if user != "root"))


@pytest.fixture(scope="module")
def etcd(creds, tmp_path_factory):
    server = start_etcd(data_dir=str(tmp_path_factory.mktemp("etcd-data")),
                        tls=EtcdTLS(creds.server_cert, creds.server_key, creds.ca_cert), auth=_auth(creds))
    yield server
    server.stop(remove_data=True)


def _service(creds) -> EtcdCredentials:
    """What the master and the tasks of a secure cluster are: user `kernflow`, the server certificate."""
    return EtcdCredentials.from_files("kernflow", creds.etcd_password_file("kernflow"), creds.ca_cert,
                                      creds.server_cert, creds.server_key)


def _client_env(creds) -> dict:
    """The environment `cluster up` prints for a client."""
    return {"KERNFLOW_ETCD_USER": "kernflow-client",
            "KERNFLOW_ETCD_PASSWORD_FILE": creds.etcd_password_file("kernflow-client"),
            "KERNFLOW_TLS_CA": creds.ca_cert, "KERNFLOW_TLS_CERT": creds.client_cert,
            "KERNFLOW_TLS_KEY": creds.client_key}


@pytest.fixture
def cleanup():
    objs = []
    yield objs.append
    for obj in reversed(objs):
        obj.stop()


def _run(endpoint, fn, credentials, timeout_s=FAST_S):
    """``fn(client)`` once against etcd; returns (result or the OpError raised, seconds taken)."""
    t0 = time.monotonic()
    try:
        out = EtcdLoop.get().call(once(endpoint, "test op", fn, timeout_s, credentials), timeout_s + 2)
    except errors.OpError as e:
        out = e
    return out, time.monotonic() - t0


def _get(key):
    return lambda c: c.get(key.encode())


# ---------------------------------------------------------------------------- the generated files
def test_generated_credentials_are_private_and_name_the_hosts(tmp_path):
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    d = tmp_path / "credentials"
    creds = cluster_credentials.generate(str(d), cluster_credentials.host_names("10.1.2.3", "node7"))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert sorted(os.listdir(d)) == sorted(os.path.basename(p) for p in creds.files())
    for path in creds.files():
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    server = x509.load_pem_x509_certificate(open(creds.server_cert, "rb").read())
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {"node7", "localhost"}
    assert {str(a) for a in san.get_values_for_type(x509.IPAddress)} == {"10.1.2.3", "127.0.0.1", "::1"}
    usages = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    client = x509.load_pem_x509_certificate(open(creds.client_cert, "rb").read())
    assert list(client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH]
    ca = x509.load_pem_x509_certificate(open(creds.ca_cert, "rb").read())
    client.verify_directly_issued_by(ca)
    server.verify_directly_issued_by(ca)
    in_300_days = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=300)
    assert server.not_valid_after_utc > in_300_days
    # No certificate logs in as an etcd user (etcd takes a client certificate's CN as the user name).
    cns = {c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value for c in (server, client)}
    assert cns == {"kernflow server", "kernflow client"} and not cns & set(cluster_credentials.ETCD_USERS)
    assert len({creds.etcd_password(u) for u in cluster_credentials.ETCD_USERS}) == 3
    token = open(creds.token_file).read().strip()
    assert len(token) >= 40 and token.isascii() and " " not in token
    with pytest.raises(errors.AlreadyExistsError, match="exist already"):
        cluster_credentials.generate(str(d), ["localhost"])   # never reads back files made by others


def test_host_names_and_loopback():
    assert cluster_credentials.host_names("127.0.0.1") == ["127.0.0.1", "localhost", "::1"]
    names = cluster_credentials.host_names("0.0.0.0")
    assert "0.0.0.0" not in names and os.uname().nodename in names and "localhost" in names
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "node7", "::"))


def test_cluster_up_is_secure_by_default_off_loopback(tmp_path, capsys):
    from types import SimpleNamespace as NS
    from kernflow.client.cluster_cli import _secure
    from kernflow.core.cli import main
    assert not _secure(NS(secure=False, insecure=False, host="127.0.0.1"))
    assert not _secure(NS(secure=False, insecure=False, host="localhost"))
    assert _secure(NS(secure=False, insecure=False, host="0.0.0.0"))
    assert _secure(NS(secure=False, insecure=False, host="10.0.0.7"))
    assert not _secure(NS(secure=False, insecure=True, host="10.0.0.7"))
    assert _secure(NS(secure=True, insecure=False, host="127.0.0.1"))
    with pytest.raises(SystemExit) as e:
        main(["cluster", "up", "--secure", "--insecure", "--state-dir", str(tmp_path)])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert main(["cluster", "up", "--host", "", "--state-dir", str(tmp_path)]) == 2
    assert "--host must name an interface" in capsys.readouterr().err


# ---------------------------------------------------------------------------- client configuration
def test_credentials_from_the_environment(creds, tmp_path):
    env = _client_env(creds)
    got = EtcdCredentials.from_env(env)
    assert (got.user, got.password) == ("kernflow-client", creds.etcd_password("kernflow-client"))
    assert (got.ca_file, got.cert_file, got.key_file) == (creds.ca_cert, creds.client_cert, creds.client_key)
    assert creds.etcd_password("kernflow-client") not in repr(got)
    assert EtcdCredentials.from_env({}) == EtcdCredentials()
    with pytest.raises(errors.InvalidArgumentError, match="KERNFLOW_ETCD_PASSWORD_FILE go together"):
        EtcdCredentials.from_env({"KERNFLOW_ETCD_USER": "u"})
    with pytest.raises(errors.InvalidArgumentError, match="KERNFLOW_TLS_CERT and KERNFLOW_TLS_KEY"):
        EtcdCredentials.from_env({"KERNFLOW_TLS_CERT": creds.client_cert})
    loose = tmp_path / "pw"
    loose.write_text("secret\n")
    loose.chmod(0o644)
    with pytest.raises(errors.PermissionDeniedError, match="mode 0644.*chmod 600"):
        EtcdCredentials.from_env({"KERNFLOW_ETCD_USER": "u", "KERNFLOW_ETCD_PASSWORD_FILE": str(loose)})
    loose.chmod(0o600)
    assert EtcdCredentials.from_env({"KERNFLOW_ETCD_USER": "u",
                                     "KERNFLOW_ETCD_PASSWORD_FILE": str(loose)}).password == "secret"
    loose.write_text("\n")
    with pytest.raises(errors.InvalidArgumentError, match="is empty"):
        EtcdCredentials.from_env({"KERNFLOW_ETCD_USER": "u", "KERNFLOW_ETCD_PASSWORD_FILE": str(loose)})
    with pytest.raises(errors.NotFoundError, match="cannot be read"):
        EtcdCredentials.from_env({"KERNFLOW_ETCD_USER": "u",
                                  "KERNFLOW_ETCD_PASSWORD_FILE": str(tmp_path / "missing")})


def test_tls_endpoints_and_targets():
    assert discovery.parse_endpoint("https://10.0.0.1:2379") == "https://10.0.0.1:2379"
    assert discovery.parse_endpoint("etcds://h:1") == "https://h:1"
    assert discovery.parse_endpoint("http://h:1") == "h:1"
    assert discovery.parse_etcd_target("etcds://h:1/prod") == ("https://h:1", "prod")
    assert discovery.parse_etcd_target("etcds://h:1") == ("https://h:1", "local")
    assert discovery.parse_etcd_target("etcd://h:1/prod") == ("h:1", "prod")
    assert discovery.format_etcd_target("https://h:1", "c") == "etcds://h:1/c"
    assert discovery.format_etcd_target("h:1", "c") == "etcd://h:1/c"
    with pytest.raises(errors.InvalidArgumentError, match="etcds://host:port/cluster"):
        discovery.parse_etcd_target("grpcs://h:1/c")


# ---------------------------------------------------------------------------- refusals
def test_secure_etcd_refuses_every_wrong_client_at_once(etcd, creds):
    ep, key = etcd.endpoint, "/kernflow/t/master"
    assert ep == f"https://127.0.0.1:{etcd.client_port}"
    cases = [
        # (credentials, endpoint, error class, message pattern)
        (EtcdCredentials(), ep, errors.UnauthenticatedError,
         "TLS handshake failed.*not signed by a system CA"),
        (EtcdCredentials(ca_file=creds.ca_cert), ep, errors.UnauthenticatedError,
         "requires a client certificate"),
        (EtcdCredentials(None, None, creds.ca_cert, creds.client_cert, creds.client_key), ep,
         errors.UnauthenticatedError, "requires authentication.*KERNFLOW_ETCD_USER"),
        (EtcdCredentials("kernflow-client", "wrong", creds.ca_cert, creds.client_cert, creds.client_key), ep,
         errors.UnauthenticatedError, "refused user 'kernflow-client': wrong user name or password"),
        (EtcdCredentials("nobody", "x", creds.ca_cert, creds.client_cert, creds.client_key), ep,
         errors.UnauthenticatedError, "refused user 'nobody'"),
        (_service(creds), etcd.address, errors.UnavailableError, "dial https://HOST:PORT or use an etcds://"),
    ]
    for cred, endpoint, cls, pattern in cases:
        got, took = _run(endpoint, _get(key), cred)
        assert isinstance(got, cls), (cred, got)
        assert took < FAST_S, (cred, took)
        assert f"etcd at {endpoint}" in got.message and "\n" not in got.message
        assert re.search(pattern, got.message), got.message
    ro = EtcdCredentials.from_env(_client_env(creds))
    got, _ = _run(ep, lambda c: c.put(key.encode(), b"{}"), ro)
    assert isinstance(got, errors.PermissionDeniedError)
    assert "user 'kernflow-client' may not do test op" in got.message
    got, _ = _run(ep, _get("/other/key"), _service(creds))
    assert isinstance(got, errors.PermissionDeniedError)   # the service user owns /kernflow/ only


def test_tls_to_a_plain_etcd_fails_at_once_with_a_hint():
    with start_etcd() as plain:
        got, took = _run("https://" + plain.address, _get("/kernflow/x"), EtcdCredentials())
    assert isinstance(got, errors.UnavailableError) and took < FAST_S
    assert "if etcd does not serve TLS, dial HOST:PORT or use an etcd:// target" in got.message


def test_registration_and_watch_with_wrong_credentials_fail_fast(etcd, creds, cleanup):
    bad = EtcdCredentials("kernflow", "wrong", creds.ca_cert, creds.server_cert, creds.server_key)
    reg = discovery.Registration(etcd.endpoint, discovery.master_key("fast"), {"address": "h:1"},
                                 ttl_s=2, timeout_s=10, credentials=bad)
    t0 = time.monotonic()
    with pytest.raises(errors.UnauthenticatedError, match="could not register /kernflow/fast/master.*"
                                                          "wrong user name or password"):
        reg.start()
    assert time.monotonic() - t0 < FAST_S        # not the 10 s timeout: credentials do not improve
    ro = EtcdCredentials.from_env(_client_env(creds))
    with pytest.raises(errors.PermissionDeniedError, match="may not do"):
        discovery.Registration(etcd.endpoint, discovery.master_key("fast"), {"address": "h:1"},
                               ttl_s=2, credentials=ro).start()
    table = discovery.WorkerTable(etcd.endpoint, "fast", timeout_s=10,
                                  credentials=EtcdCredentials(ca_file=creds.ca_cert))
    t0 = time.monotonic()
    with pytest.raises(errors.UnauthenticatedError, match="could not watch /kernflow/fast/workers/"):
        table.start()
    assert time.monotonic() - t0 < FAST_S


def test_the_http_gateway_is_closed_too(etcd, creds):
    body = json.dumps({"key": base64.b64encode(b"/kernflow/t/master").decode(),
                       "value": base64.b64encode(b'{"address": "evil:1"}').decode()}).encode()
    no_cert = ssl.create_default_context(cafile=creds.ca_cert)
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE"):
        urllib.request.urlopen(urllib.request.Request(etcd.url + "/v3/kv/put", data=body), context=no_cert,
                               timeout=5)
    with_cert = EtcdCredentials(None, None, creds.ca_cert, creds.client_cert, creds.client_key).ssl_context()
    with pytest.raises(urllib.error.HTTPError) as e:    # a certificate alone is no etcd user
        urllib.request.urlopen(urllib.request.Request(etcd.url + "/v3/kv/put", data=body), context=with_cert,
                               timeout=5)
    assert e.value.code in (400, 401, 403)
    got, _ = _run(etcd.endpoint, _get("/kernflow/t/master"), _service(creds))
    assert got is None    # nothing was written


# ---------------------------------------------------------------------------- the right credentials
def test_put_get_watch_and_lease_with_credentials(etcd, creds, cleanup):
    svc = _service(creds)
    conn = EtcdConnection(etcd.endpoint, 5.0, svc)
    reader = EtcdCredentials.from_env(_client_env(creds))
    table = discovery.WorkerTable(etcd.endpoint, "rw", credentials=reader)
    cleanup(table.start())
    key = discovery.worker_key("rw", "worker", 0)

    async def scenario():
        lease = await conn.op("LeaseGrant", lambda c: c.lease(2))
        await conn.op("Put", lambda c: c.put(key.encode(), b'{"address": "h:7"}', lease=lease.id))
        got = await conn.op("Get", lambda c: c.get(key.encode()))
        refreshed = await conn.op("LeaseKeepAlive", lambda c: c.refresh_lease(lease.id))
        return lease, got, refreshed
    lease, got, refreshed = EtcdLoop.get().call(scenario(), 10)
    assert got.value == b'{"address": "h:7"}' and refreshed.TTL > 0
    assert table.wait_until(lambda e: "/job:worker/replica:0/task:0" in e, 5)   # seen by the watch
    assert table.address("/job:worker/task:0") == "h:7"
    EtcdLoop.get().call(conn.op("LeaseRevoke", lambda c: c.revoke_lease(lease.id)), 5)
    assert table.wait_until(lambda e: not e, 5)                                 # the delete too
    EtcdLoop.get().call(conn.reset(), 5)


def test_an_expired_token_is_renewed(etcd, creds):
    conn = EtcdConnection(etcd.endpoint, 5.0, _service(creds))
    loop = EtcdLoop.get()
    assert loop.call(conn.op("Get", _get("/kernflow/none")), 5) is None
    stale = conn._client
    stale.metadata = (("token", "expired.1"),)   # a token etcd forgot (--auth-token-ttl passed)
    assert loop.call(conn.op("Get", _get("/kernflow/none")), 5) is None
    assert conn._client is not stale             # refused once, authenticated again, answered
    loop.call(conn.reset(), 5)


def test_registration_and_discovery_round_trip(etcd, creds, cleanup, monkeypatch):
    for name, value in _client_env(creds).items():
        monkeypatch.setenv(name, value)
    # The master's side: the service user and the server certificate (as `cluster up` starts it).
    svc = _service(creds)
    cleanup(discovery.Registration(etcd.endpoint, discovery.master_key("rt"),
                                   {"address": "127.0.0.1:4444", "target": "grpc://127.0.0.1:4444"},
                                   ttl_s=2, credentials=svc).start())
    cleanup(discovery.Registration(etcd.endpoint, discovery.worker_key("rt", "worker", 0),
                                   {"address": "127.0.0.1:5555"}, ttl_s=2, credentials=svc).start())
    # The client's side: everything from the environment, the target as `cluster up` prints it.
    target = discovery.format_etcd_target(etcd.endpoint, "rt")
    assert target == f"etcds://127.0.0.1:{etcd.client_port}/rt"
    assert discovery.resolve_master_target(target) == "grpc://127.0.0.1:4444"
    view = discovery.list_cluster(etcd.endpoint, "rt")
    assert view["workers"]["/job:worker/replica:0/task:0"]["address"] == "127.0.0.1:5555"
    monkeypatch.delenv("KERNFLOW_ETCD_USER")
    monkeypatch.delenv("KERNFLOW_ETCD_PASSWORD_FILE")
    with pytest.raises(errors.UnauthenticatedError, match="requires authentication"):
        discovery.resolve_master_target(target)


def test_auth_is_enabled_on_loopback_before_etcd_listens_anywhere_else(creds, tmp_path, monkeypatch):
    from kernflow.client import etcd_server
    events = []
    launch, enable = etcd_server._launch, etcd_server.enable_auth

    def record_launch(exe, name, data_dir, listen, *args):
        events.append(("listen", listen))
        return launch(exe, name, data_dir, listen, *args)

    def record_enable(url, *args, **kw):
        events.append(("auth enable", url))
        return enable(url, *args, **kw)
    monkeypatch.setattr(etcd_server, "_launch", record_launch)
    monkeypatch.setattr(etcd_server, "enable_auth", record_enable)
    server = start_etcd(host="0.0.0.0", advertise="127.0.0.1", data_dir=str(tmp_path / "data"),
                        tls=EtcdTLS(creds.server_cert, creds.server_key, creds.ca_cert), auth=_auth(creds))
    try:
        assert [e[0] for e in events] == ["listen", "auth enable", "listen"], events
        assert events[0][1].startswith("https://127.0.0.1:") and events[1][1] == events[0][1]
        assert events[2][1] == f"https://0.0.0.0:{server.client_port}"
        assert server.endpoint == f"https://127.0.0.1:{server.client_port}"
        anon, took = _run(server.endpoint, _get("/kernflow/x"),
                          EtcdCredentials(None, None, creds.ca_cert, creds.client_cert, creds.client_key))
        assert isinstance(anon, errors.UnauthenticatedError) and took < FAST_S
        assert _run(server.endpoint, _get("/kernflow/x"), _service(creds))[0] is None
    finally:
        server.stop(remove_data=True)


def test_users_survive_a_restart_on_the_same_data_dir(creds, tmp_path):
    tls = EtcdTLS(creds.server_cert, creds.server_key, creds.ca_cert)
    data = str(tmp_path / "data")
    first = start_etcd(data_dir=data, tls=tls, auth=_auth(creds))
    port = first.client_port
    put, _ = _run(first.endpoint, lambda c: c.put(b"/kernflow/r/x", b"1"), _service(creds))
    assert not isinstance(put, errors.OpError), put
    first.stop(remove_data=False)
    again = start_etcd(data_dir=data, client_port=port, tls=tls)   # what the supervisor does
    try:
        assert _run(again.endpoint, _get("/kernflow/r/x"), _service(creds))[0].value == b"1"
        anon, _ = _run(again.endpoint, _get("/kernflow/r/x"),
                       EtcdCredentials(None, None, creds.ca_cert, creds.client_cert, creds.client_key))
        assert isinstance(anon, errors.UnauthenticatedError)      # authentication is still on
    finally:
        again.stop(remove_data=True)

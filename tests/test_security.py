"""Authentication and TLS of a whole cluster (issue 18, point 3): the cluster token on every method
of the master and worker services, TLS and mutual TLS with throwaway certificates, the same-host
channel's offer, and the `kernflow master` / `kernflow worker` commands with their security flags.

Settings unit tests (environment, files, metadata) are in packages/client/tests/test_security.py.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import subprocess
import sys
import time

import grpc
import numpy as np
import pytest
from cryptography import x509   # (requirements-dev.txt)
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from google.protobuf import message_factory

import kernflow.core as kf
from kernflow.client import local_channel, security
from kernflow.client.grpc_session import grpc_session_factory
from kernflow.client.master_client import GrpcMasterClient
from kernflow.client.protobuf import master_pb2, worker_pb2
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.core.testing.processes import ChildProcess
from kernflow.master.master import Master
from kernflow.master.server import MasterServer
from kernflow.worker.server import WorkerServer
from packages.client.tests.test_security import ENV_VARS, clean  # noqa: F401 - `clean`: a fixture

TOKEN = "test-cluster-token-0123456789abcdef"
MASTER_SERVICE = master_pb2.DESCRIPTOR.services_by_name["MasterService"]
WORKER_SERVICE = worker_pb2.DESCRIPTOR.services_by_name["WorkerService"]


# ---------------------------------------------------------------------------- throwaway certificates
def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path, cert, key):
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = path.with_suffix(".key")
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chmod(key_path, 0o600)
    return str(path.with_suffix(".pem")), str(key_path)


def _builder(subject, issuer, public_key):
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1)))


def _ca(directory, cn):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(_name(cn), _name(cn), key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key, _write(directory / cn, cert, key)[0]


def _leaf(directory, ca, cn, dns=(), ips=()):
    """A certificate for both ends of a connection (serverAuth and clientAuth), signed by `ca`."""
    ca_cert, ca_key, _ = ca
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (_builder(_name(cn), ca_cert.subject, key.public_key())
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return _write(directory / cn, cert, key)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A cluster CA and its node certificate (localhost, 127.0.0.1), a certificate naming only
    ``kernflow.test``, and another CA with its own node certificate."""
    d = tmp_path_factory.mktemp("pki")
    ca, other_ca = _ca(d, "cluster-ca"), _ca(d, "other-ca")
    return {"ca": ca[2], "node": _leaf(d, ca, "node", dns=["localhost"], ips=["127.0.0.1"]),
            "named": _leaf(d, ca, "named", dns=["kernflow.test"]),
            "other_ca": other_ca[2],
            "other": _leaf(d, other_ca, "other", dns=["localhost"], ips=["127.0.0.1"])}


def _tls(pki, which="node", ca="ca"):
    cert, key = pki[which]
    return {"tls_cert": cert, "tls_key": key, "tls_ca": pki[ca]}


# ---------------------------------------------------------------------------- clusters in this process
# (`clean`: no KERNFLOW_TLS_*/KERNFLOW_TOKEN* in the environment, the process insecure before and after)
@contextlib.contextmanager
def _cluster(n_workers=2):
    """Worker servers and a MasterServer over them, built with this process's security now."""
    clients = {}

    def resolve(task):
        return clients[task]
    workers = []
    master = server = None
    try:
        for i in range(n_workers):
            workers.append(WorkerServer("worker", i, port=0, resolver=resolve))
            clients[f"/job:worker/replica:0/task:{i}"] = GrpcWorkerClient(workers[-1].address,
                                                                          f"/job:worker/replica:0/task:{i}")
        master = Master(resolve, tasks=list(clients), health_check_interval_s=0.5, rpc_timeout_s=5.0)
        server = MasterServer(master, port=0)
        yield server, workers
    finally:
        if server is not None:
            server.stop(0)
        if master is not None:
            master.close()
        for w in workers:
            w.stop(0)


def _model(device):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 3], name="x")
        with kf.device(device):
            w = kf.Variable(np.full((3, 2), 0.5, np.float32), name="w")
            y = kf.matmul(x, w)
        loss = kf.reduce_mean(kf.square(y - 1.0))
        train = kf.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = kf.global_variables_initializer()
    return g, x, w, loss, train, init


def _train_step(target, device="/job:worker/task:1"):
    """One training step on `target`; returns (loss before, loss after, the trained weights)."""
    g, x, w, loss, train, init = _model(device)
    xv = np.ones((4, 3), np.float32)
    with kf.Session(target, graph=g) as sess:
        sess.run(init)
        before, _ = sess.run([loss, train], {x: xv})
        return before, sess.run(loss, {x: xv}), sess.run(w)


def _raw_call(channel, service, method, metadata):
    """Calls `method` with a default request through a bare channel, whatever its streaming kind."""
    path = f"/{service.full_name}/{method.name}"
    request_class = message_factory.GetMessageClass(method.input_type)
    kw = {"request_serializer": request_class.SerializeToString, "response_deserializer": None}
    request = request_class()
    if method.client_streaming and method.server_streaming:
        return list(channel.stream_stream(path, **kw)(iter([request]), timeout=10, metadata=metadata))
    if method.client_streaming:
        return channel.stream_unary(path, **kw)(iter([request]), timeout=10, metadata=metadata)
    if method.server_streaming:
        return list(channel.unary_stream(path, **kw)(request, timeout=10, metadata=metadata))
    return channel.unary_unary(path, **kw)(request, timeout=10, metadata=metadata)


def _refused_methods(address, service, metadata, credentials=None):
    """{method: status code} of every method of `service` at `address` called with `metadata`."""
    codes = {}
    with (grpc.insecure_channel(address) if credentials is None else
          grpc.secure_channel(address, credentials)) as channel:
        for method in service.methods:
            try:
                _raw_call(channel, service, method, metadata)
                codes[method.name] = grpc.StatusCode.OK
            except grpc.RpcError as e:
                codes[method.name] = e.code()
                assert e.code() != grpc.StatusCode.UNAUTHENTICATED or e.details() == security.REJECTED
    return codes


# ---------------------------------------------------------------------------- the token
def test_every_master_and_worker_method_refuses_a_caller_without_the_cluster_token(clean):
    security.configure(token=TOKEN)
    with _cluster() as (server, workers):
        before, after, trained = _train_step(server.target)      # this process has the token
        assert after < before
        for metadata in (None, (("authorization", "Bearer not-the-token"),)):
            for address, service in ((server.address, MASTER_SERVICE), (workers[1].address, WORKER_SERVICE)):
                codes = _refused_methods(address, service, metadata)
                assert codes == {m.name: grpc.StatusCode.UNAUTHENTICATED for m in service.methods}, address
        # Nothing got through: Reset (an empty request wipes every container) did not run, so a
        # new session still reads the trained variable.
        g = kf.Graph()
        with g.as_default(), kf.device("/job:worker/task:1"):
            w = kf.Variable(np.zeros((3, 2), np.float32), name="w")
        with kf.Session(server.target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(w), trained)
        # The right token through a bare channel reaches the servicers (an empty request is
        # then the servicer's own error, or an answer).
        ok = _refused_methods(workers[0].address, WORKER_SERVICE, (("authorization", f"Bearer {TOKEN}"),))
        assert grpc.StatusCode.UNAUTHENTICATED not in ok.values() and ok["GetStatus"] == grpc.StatusCode.OK


def test_a_process_with_another_token_gets_unauthenticated_error(clean):
    security.configure(token=TOKEN)
    with _cluster(1) as (server, workers):
        security.configure(token="a-different-token")
        with pytest.raises(errors.UnauthenticatedError, match="missing or wrong cluster token"):
            _train_step(server.target)
        with pytest.raises(errors.UnauthenticatedError,
                           match=f"from ListDevices on master at {server.address}"):
            GrpcMasterClient(server.address).list_devices()


def test_a_client_without_the_token_never_gets_the_same_host_offer(clean):
    clean.delenv(local_channel.LOCAL_CHANNEL_ENV, raising=False)
    clean.delenv("KERNFLOW_TRANSPORT", raising=False)
    assert local_channel.enabled()
    security.configure(token=TOKEN)
    with _cluster(1) as (_, workers):
        address = workers[0].address
        security.configure()    # (forgets every same-host channel too)
        with pytest.raises(grpc.RpcError) as e:
            with grpc.insecure_channel(address) as ch:
                ch.unary_unary(f"/{WORKER_SERVICE.full_name}/GetStatus",
                               request_serializer=worker_pb2.GetStatusRequest.SerializeToString,
                               response_deserializer=worker_pb2.GetStatusResponse.FromString)(
                    worker_pb2.GetStatusRequest(), timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        client = GrpcWorkerClient(address)
        with pytest.raises(errors.UnauthenticatedError):
            client.get_status()
        assert local_channel.channel_for(address, client._grpc_status) is None   # negotiation refused too
        local_channel.forget()
        security.configure(token=TOKEN)
        client = GrpcWorkerClient(address)
        assert isinstance(local_channel.channel_for(address, client._grpc_status), local_channel.LocalChannel)
        local_channel.forget()
        status = client.get_status()
        assert status.local_channel.path and status.local_channel.token
        assert isinstance(local_channel.channel_for(address), local_channel.LocalChannel)


# ---------------------------------------------------------------------------- TLS
def test_a_tls_cluster_with_a_token_trains_and_grpcs_targets_work(clean, pki):
    clean.setenv(local_channel.LOCAL_CHANNEL_ENV, "0")   # every call over gRPC (RunGraphStream...)
    security.configure(token=TOKEN, **_tls(pki))
    with _cluster() as (server, _):
        before, after, _ = _train_step(server.target)   # grpc:// in a TLS process: TLS
        assert after < before
        g = kf.Graph()
        with g.as_default():
            out = kf.constant([1.0, 2.0]) * 3.0
        session = grpc_session_factory(f"grpcs://{server.address}", g)
        try:
            np.testing.assert_array_equal(session.run([], [], [out.name], [])[0], [3.0, 6.0])
        finally:
            session.close()
        # TLS with a token: a caller that got through TLS still needs the token.
        creds = security.current().channel_credentials()
        codes = _refused_methods(server.address, MASTER_SERVICE, None, creds)
        assert set(codes.values()) == {grpc.StatusCode.UNAUTHENTICATED}


def test_an_insecure_client_fails_fast_against_a_tls_server(clean, pki):
    security.configure(**_tls(pki))
    with _cluster(1) as (server, _):
        security.configure()
        t0 = time.monotonic()
        with pytest.raises(errors.UnavailableError,
                           match=f"ListDevices on master at {server.address} is unavailable"):
            GrpcMasterClient(server.address).list_devices(timeout=20)
        assert time.monotonic() - t0 < 10


def test_mutual_tls_refuses_clients_without_a_certificate_of_the_cluster_ca(clean, pki):
    security.configure(**_tls(pki))
    with _cluster(1) as (server, workers):
        assert GrpcWorkerClient(workers[0].address).get_status().job == "worker"
        for client in (_tls(pki, "other", ca="ca"),                # a certificate of another CA
                       {"tls_ca": pki["ca"]}):                     # no client certificate at all
            security.configure(**client)
            t0 = time.monotonic()
            with pytest.raises(errors.UnavailableError):
                GrpcMasterClient(server.address).list_devices(timeout=20)
            assert time.monotonic() - t0 < 10
        security.configure(**_tls(pki, "node", ca="other_ca"))   # the server's certificate is not trusted
        with pytest.raises(errors.UnavailableError):
            GrpcWorkerClient(workers[0].address).get_status(timeout=20)


def test_a_server_name_override_checks_the_certificate_for_that_name(clean, pki):
    security.configure(**_tls(pki, "named"))    # names kernflow.test only; dialled as 127.0.0.1
    with _cluster(1) as (_, workers):
        address = workers[0].address
        security.configure(**_tls(pki, "node"))
        with pytest.raises(errors.UnavailableError):
            GrpcWorkerClient(address).get_status(timeout=20)
        clean.setenv(security.TLS_SERVER_NAME_ENV, "kernflow.test")
        security.configure(**_tls(pki, "node"))
        assert GrpcWorkerClient(address).get_status().task == 0


def test_tls_settings_that_cannot_work_are_refused_when_configured(clean, pki):
    with pytest.raises(errors.InvalidArgumentError, match="are not a certificate and its key"):
        security.load(tls_cert=pki["node"][0], tls_key=pki["other"][1], tls_ca=pki["ca"])
    with pytest.raises(errors.InvalidArgumentError, match="tls_ca is not a PEM certificate"):
        security.load(tls_ca=pki["node"][1])
    security.configure(tls_ca=pki["ca"])          # a client may trust a CA without a certificate...
    with pytest.raises(errors.FailedPreconditionError, match="no certificate to serve with"):
        WorkerServer("worker", 0, port=0)          # ... but cannot serve TLS


# ---------------------------------------------------------------------------- the commands
def _cli(*args):
    return [sys.executable, "-m", "kernflow.core.cli", *args]


def test_kernflow_master_and_worker_with_tls_and_a_token_file(clean, pki, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    os.chmod(token_file, 0o600)
    cert, key = pki["node"]
    flags = ["--tls-cert", cert, "--tls-key", key, "--tls-ca", pki["ca"], "--token-file", str(token_file)]
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["PYTHONUNBUFFERED"] = "1"
    kids = []
    try:
        kids.append(ChildProcess("worker", _cli("worker", "--port", "0", *flags), env=env))
        address = kids[0].expect("listening on", 60).rsplit(" ", 1)[1]
        assert "mutual TLS, cluster token on every call" in kids[0].expect("on every call", 10)
        spec = json.dumps({"worker": [address]})
        kids.append(ChildProcess("master", _cli("master", "--port", "0", "--cluster-spec", spec, *flags),
                                 env=env))
        target = kids[1].expect("kernflow master serving", 60).split()[3]
        # The client: the same CA, certificate and token, from the environment.
        for var, value in ((security.TLS_CERT_ENV, cert), (security.TLS_KEY_ENV, key),
                           (security.TLS_CA_ENV, pki["ca"]), (security.TOKEN_FILE_ENV, str(token_file))):
            clean.setenv(var, value)
        security.configure()
        before, after, _ = _train_step(target, "/job:worker/task:0")
        assert after < before
        # TLS without the token: refused by the master and by the worker.
        creds = security.current().channel_credentials()
        assert set(_refused_methods(target.split("//")[1], MASTER_SERVICE, None, creds).values()) == \
            {grpc.StatusCode.UNAUTHENTICATED}
        assert _refused_methods(address, WORKER_SERVICE, None, creds)["GetStatus"] == \
            grpc.StatusCode.UNAUTHENTICATED
    finally:
        for k in kids:
            k.kill()


@pytest.mark.parametrize("command", ["master", "worker"])
def test_a_bad_security_flag_exits_with_one_line(tmp_path, command):
    missing = tmp_path / "missing.pem"
    proc = subprocess.run(_cli(command, "--cluster-spec", '{"worker": ["127.0.0.1:1"]}',
                               "--tls-ca", str(missing)), capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k not in ENV_VARS})
    assert proc.returncode == 2
    assert proc.stderr == f"kernflow {command}: --tls-ca: no such file: {missing}\n"

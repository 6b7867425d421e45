"""`kernflow.client.security`: the settings (environment, files, flags), the token on the wire and
its check in `channels.add_servicer`'s handlers, ``grpcs://`` targets. TLS with real certificates
and whole clusters are in the top-level tests/test_security.py."""

from __future__ import annotations

import argparse
import os

import grpc
import pytest

from kernflow.client import channels, security
from kernflow.client.grpc_session import parse_target
from kernflow.client.protobuf import worker_pb2
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from packages.client.tests.conftest import FakeWorker

ENV_VARS = (security.TLS_CERT_ENV, security.TLS_KEY_ENV, security.TLS_CA_ENV, security.TLS_SERVER_NAME_ENV,
            security.TOKEN_ENV, security.TOKEN_FILE_ENV)
WORKER_SERVICE = worker_pb2.DESCRIPTOR.services_by_name["WorkerService"]
TOKEN = "s3cret-cluster-token"


@pytest.fixture
def clean(monkeypatch):
    """No KERNFLOW_TLS_*/KERNFLOW_TOKEN* in the environment; the process insecure before and after."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    security.configure()
    yield monkeypatch
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    security.configure()


def _token_file(tmp_path, text=TOKEN + "\n", mode=0o600):
    path = tmp_path / "token"
    path.write_text(text)
    os.chmod(path, mode)
    return path


# ---------------------------------------------------------------------------- settings
def test_nothing_configured_is_insecure_and_sends_no_metadata(clean):
    sec = security.current()
    assert not sec.tls and sec.token is None
    assert sec.server_credentials() is None and sec.channel_credentials() is None
    assert channels.outgoing_metadata() is None and channels.auth_metadata() is None


def test_the_token_comes_from_the_environment_or_a_file(clean, tmp_path):
    clean.setenv(security.TOKEN_ENV, TOKEN)
    assert security.load().token == TOKEN
    clean.delenv(security.TOKEN_ENV)
    clean.setenv(security.TOKEN_FILE_ENV, str(_token_file(tmp_path)))
    assert security.configure().token == TOKEN   # (the file's newline is not part of it)
    assert channels.outgoing_metadata() == (("authorization", f"Bearer {TOKEN}"),)


def test_a_token_file_others_may_read_is_refused_like_ssh_does(clean, tmp_path):
    path = _token_file(tmp_path, mode=0o640)
    with pytest.raises(errors.PermissionDeniedError) as e:
        security.load(token_file=path)
    assert e.value.message == (f"token_file: permissions 0640 for {path} are too open (group or others "
                               f"may read the cluster token): chmod 600 {path}")


def test_files_that_cannot_be_read_name_the_setting_and_the_path(clean, tmp_path):
    missing = tmp_path / "nope.pem"
    clean.setenv(security.TLS_CA_ENV, str(missing))
    with pytest.raises(errors.NotFoundError, match=f"^KERNFLOW_TLS_CA: no such file: {missing}$"):
        security.load()
    with pytest.raises(errors.NotFoundError, match=f"^--token-file: no such file: {missing}$"):
        security.load(token_file=missing, names={"token_file": "--token-file"})
    empty = _token_file(tmp_path, text="\n")
    with pytest.raises(errors.InvalidArgumentError, match="is empty"):
        security.load(token_file=empty)
    with pytest.raises(errors.InvalidArgumentError,
                       match=f"^token_file: cannot read {tmp_path}: Is a directory$"):
        security.load(token_file=tmp_path)


def test_settings_that_contradict_each_other_are_refused(clean, tmp_path):
    with pytest.raises(errors.InvalidArgumentError, match="tls_cert is given without tls_key"):
        security.Security(tls_cert=b"-----BEGIN CERTIFICATE-----\n")
    with pytest.raises(errors.InvalidArgumentError, match="tls_ca is not a PEM certificate"):
        security.Security(tls_ca=b"not a certificate")
    with pytest.raises(errors.InvalidArgumentError, match="printable ASCII without spaces"):
        security.Security(token="two words")
    with pytest.raises(errors.InvalidArgumentError, match="not both"):
        security.load(token=TOKEN, token_file=_token_file(tmp_path))
    clean.setenv(security.TOKEN_ENV, TOKEN)
    clean.setenv(security.TOKEN_FILE_ENV, str(_token_file(tmp_path)))
    with pytest.raises(errors.InvalidArgumentError, match="both KERNFLOW_TOKEN and KERNFLOW_TOKEN_FILE"):
        security.load()


def test_a_failed_configure_keeps_the_previous_settings(clean, tmp_path):
    security.configure(token=TOKEN)
    with pytest.raises(errors.NotFoundError):
        security.configure(tls_ca=tmp_path / "missing.pem")
    assert security.current().token == TOKEN


def test_the_token_never_shows_in_repr(clean):
    sec = security.configure(token=TOKEN)
    assert TOKEN not in repr(sec) and "token=set" in repr(sec)
    assert sec.describe() == "cluster token"


def test_command_line_options_name_themselves_in_errors(clean, tmp_path):
    parser = argparse.ArgumentParser()
    security.add_arguments(parser)
    args = parser.parse_args(["--tls-cert", str(tmp_path / "c.pem"), "--tls-key", str(tmp_path / "k.pem")])
    with pytest.raises(errors.NotFoundError, match=r"^--tls-cert: no such file: .*c\.pem$"):
        security.configure_from_args(args)
    args = parser.parse_args(["--token-file", str(_token_file(tmp_path))])
    assert security.configure_from_args(args).token == TOKEN


# ---------------------------------------------------------------------------- metadata
def test_outgoing_metadata_carries_token_and_trace_context(clean, monkeypatch):
    security.configure(token=TOKEN)
    trace = (("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),)
    monkeypatch.setattr(channels, "tracing_active", lambda: True)
    monkeypatch.setattr(channels, "trace_metadata", lambda: trace)
    assert channels.outgoing_metadata() == trace + (("authorization", f"Bearer {TOKEN}"),)
    assert channels.auth_metadata() == (("authorization", f"Bearer {TOKEN}"),)


def test_configure_closes_the_cached_channels(clean):
    before = channels.get_channel("127.0.0.1:1")
    assert channels.get_channel("127.0.0.1:1") is before
    security.configure(token=TOKEN)
    assert channels.get_channel("127.0.0.1:1") is not before
    after = channels.get_channel("127.0.0.1:1")
    security.configure(token=TOKEN)   # the same settings: nothing closed
    assert channels.get_channel("127.0.0.1:1") is after


# ---------------------------------------------------------------------------- the server's check
def _serve(start_server, servicer):
    return start_server(lambda s, server: channels.add_servicer(server, WORKER_SERVICE, s), servicer)


def _raw_get_status(address, metadata=None):
    with grpc.insecure_channel(address) as ch:
        call = ch.unary_unary(f"/{WORKER_SERVICE.full_name}/GetStatus",
                              request_serializer=worker_pb2.GetStatusRequest.SerializeToString,
                              response_deserializer=worker_pb2.GetStatusResponse.FromString)
        return call(worker_pb2.GetStatusRequest(), timeout=5, metadata=metadata)


@pytest.mark.parametrize("metadata", [None, (("authorization", "Bearer wrong"),),
                                      (("authorization", TOKEN),), (("x-token", f"Bearer {TOKEN}"),),
                                      (("authorization", f"bearer {TOKEN}"),)],
                         ids=["none", "wrong", "no-bearer", "other-header", "lowercase-bearer"])
def test_a_server_with_a_token_refuses_calls_without_it_before_its_servicer_runs(clean, start_server,
                                                                                  metadata):
    security.configure(token=TOKEN)
    srv = _serve(start_server, FakeWorker())
    with pytest.raises(grpc.RpcError) as e:
        _raw_get_status(srv.address, metadata)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert e.value.details() == security.REJECTED
    assert srv.servicer.calls == []
    assert _raw_get_status(srv.address, (("authorization", f"Bearer {TOKEN}"),)).task == 1
    assert srv.servicer.calls == ["GetStatus"]


def test_a_client_with_the_token_gets_through_and_one_without_gets_unauthenticated_error(clean,
                                                                                       start_server):
    security.configure(token=TOKEN)
    srv = _serve(start_server, FakeWorker())
    assert GrpcWorkerClient(srv.address).get_status().job == "worker"
    security.configure(token="another-token")    # (the server keeps the token it was built with)
    with pytest.raises(errors.UnauthenticatedError) as e:
        GrpcWorkerClient(srv.address).get_status()
    assert e.value.message == f"{security.REJECTED} (from GetStatus on worker at {srv.address})"
    security.configure()
    with pytest.raises(errors.UnauthenticatedError):
        GrpcWorkerClient(srv.address).cleanup_all()
    assert srv.servicer.calls == ["GetStatus"]


def test_a_server_built_without_a_token_checks_none(clean, start_server):
    srv = _serve(start_server, FakeWorker())
    security.configure(token=TOKEN)    # clients now send one; the server ignores it
    assert GrpcWorkerClient(srv.address).get_status().task == 1
    assert _raw_get_status(srv.address).task == 1


def test_token_matches_takes_the_first_authorization_entry_only(clean):
    expected = f"Bearer {TOKEN}".encode()
    assert security.token_matches((("a", "b"), ("authorization", f"Bearer {TOKEN}")), expected)
    assert not security.token_matches((("authorization", "Bearer x"), ("authorization", f"Bearer {TOKEN}")),
                                      expected)
    assert not security.token_matches((("authorization", b"Bearer " + TOKEN.encode()),), expected)
    assert not security.token_matches((("authorization", "Bearer é"),), expected)
    assert not security.token_matches(None, expected)


# ---------------------------------------------------------------------------- targets
def test_grpcs_targets_need_tls_configured(clean):
    assert parse_target("grpc://localhost:2222") == "localhost:2222"
    with pytest.raises(errors.FailedPreconditionError) as e:
        parse_target("grpcs://localhost:2222")
    assert "asks for TLS, but this process has none configured: set KERNFLOW_TLS_CA" in e.value.message
    with pytest.raises(errors.InvalidArgumentError, match="e.g. 'grpcs://localhost:2222'"):
        parse_target("grpcs://localhost")
    with pytest.raises(errors.InvalidArgumentError, match="expected 'grpc://host:port' or 'grpcs://"):
        parse_target("http://localhost:1")

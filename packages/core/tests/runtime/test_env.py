"""EnvVar: a hot-path environment read that still sees every change made through os.environ."""

import os

from kernflow.core.runtime.env import EnvVar


def test_env_var_follows_set_change_and_delete(monkeypatch):
    monkeypatch.delenv("KERNFLOW_TEST_ENV_VAR", raising=False)
    v = EnvVar("KERNFLOW_TEST_ENV_VAR")
    assert v.get() == "" and v.get("dflt") == "dflt"
    monkeypatch.setenv("KERNFLOW_TEST_ENV_VAR", "grpc")
    assert v.get() == "grpc"
    monkeypatch.setenv("KERNFLOW_TEST_ENV_VAR", "grpc,local")
    assert v.get() == "grpc,local"
    os.environ["KERNFLOW_TEST_ENV_VAR"] = "grpc"         # the same value as two reads ago
    assert v.get() == "grpc"
    monkeypatch.delenv("KERNFLOW_TEST_ENV_VAR")
    assert v.get("x") == "x"


def test_env_var_reads_non_ascii_values(monkeypatch):
    monkeypatch.setenv("KERNFLOW_TEST_ENV_VAR", "h\u00f4te")
    assert EnvVar("KERNFLOW_TEST_ENV_VAR").get() == "h\u00f4te"

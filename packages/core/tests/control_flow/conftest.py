"""Fixtures of the control-flow tests: each test builds its ops in a fresh default graph, and runs
twice: with simple while loops compiled into loop nodes (runtime/loops.py, the default) and with every
loop on the frames executor (runtime/control_flow_executor.py)."""

import pytest

import kernflow.core as kf
from kernflow.core.runtime import loops


@pytest.fixture(autouse=True, params=[True, False], ids=["compiled", "frames"])
def g(request, monkeypatch):
    monkeypatch.setattr(loops, "ENABLED", request.param)
    graph = kf.Graph()
    with graph.as_default():
        yield graph

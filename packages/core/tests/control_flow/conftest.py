"""Fixtures of the control-flow tests: each test builds its ops in a fresh default graph."""

import pytest

import kernflow.core as kf


@pytest.fixture(autouse=True)
def g():
    graph = kf.Graph()
    with graph.as_default():
        yield graph

"""Fixtures of the training tests: a tiny linear model with a global step, in its own graph."""

import types

import numpy as np
import pytest

import kernflow.core as kf


def _build_model():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder_with_default(np.ones((4, 2), np.float32), [None, 2], name="x")
        y = kf.constant(np.full((4, 1), 2.0, np.float32), name="y")
        w = kf.Variable(np.zeros((2, 1), np.float32), name="w")
        loss = kf.reduce_mean(kf.square(kf.matmul(x, w) - y), name="loss")
        global_step = kf.train.get_or_create_global_step()
        train_op = kf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
    return types.SimpleNamespace(graph=g, x=x, w=w, loss=loss, global_step=global_step,
                                 train_op=train_op)


@pytest.fixture
def make_model():
    """``make_model()`` builds a fresh graph: x (fed or default ones), w, loss, global_step,
    train_op (increments the global step)."""
    return _build_model


@pytest.fixture
def model():
    """One tiny model (see `make_model`), its graph the default graph during the test."""
    m = _build_model()
    with m.graph.as_default():
        yield m


@pytest.fixture(params=["read", "fetch"])
def step_reading(request, monkeypatch):
    """Runs a test both ways the global-step hooks learn the step: "read" (the embedded session
    reads the variable after each step, nothing fetched) and "fetch" (TF's way, the read tensor
    fetched in every step: what a session without `_variable_reader` gets)."""
    if request.param == "fetch":
        from kernflow.core.train import training_util
        monkeypatch.setattr(training_util, "global_step_reader", lambda session, graph=None: None)
    return request.param

"""The master's spans: one "Master.RunStep" per step, one "RunGraph" child per task."""

import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import kernflow.core as kf

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider():
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        p = TracerProvider()
        trace.set_tracer_provider(p)
        current = p
    current.add_span_processor(SimpleSpanProcessor(_exporter))
    yield


def test_run_step_span_has_a_run_graph_child_per_task(make_cluster):
    c = make_cluster()
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:1"):
            y = x * 2.0
        z = y + 1.0
    s = c.session(g)
    _exporter.clear()
    np.testing.assert_array_equal(s.run(z, {x: [1.0, 2.0]}), [3.0, 5.0])
    spans = _exporter.get_finished_spans()
    (step,) = [sp for sp in spans if sp.name == "Master.RunStep"]
    runs = [sp for sp in spans if sp.name == "RunGraph"]
    assert sorted(sp.attributes["kernflow.task"] for sp in runs) == [
        "/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"]
    assert all(sp.parent.span_id == step.context.span_id for sp in runs)
    assert step.attributes["kernflow.fetch_count"] == 1

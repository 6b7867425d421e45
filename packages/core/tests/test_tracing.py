"""One OpenTelemetry span per Session.run, with the step id and fetch count (API in the library,
the SDK only here in the test)."""

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


def test_one_span_per_run_with_step_and_fetch_count():
    _exporter.clear()
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [])
        y = x + 1.0
        z = y + 1.0
        with kf.Session() as s:
            s.run(y, {x: 1.0})
            s.run([y, z, z.op], {x: 1.0})
    spans = [sp for sp in _exporter.get_finished_spans() if sp.name == "Session.run"]
    assert len(spans) == 2
    assert spans[0].attributes["kernflow.fetch_count"] == 1
    assert spans[1].attributes["kernflow.fetch_count"] == 3
    assert spans[1].attributes["kernflow.step_id"] > spans[0].attributes["kernflow.step_id"]


def test_failed_run_records_the_error():
    _exporter.clear()
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [])
        with kf.Session() as s:
            with pytest.raises(kf.errors.InvalidArgumentError):
                s.run(x + 1.0)
    (span,) = [sp for sp in _exporter.get_finished_spans() if sp.name == "Session.run"]
    assert not span.status.is_ok
    assert any(e.name == "exception" for e in span.events)

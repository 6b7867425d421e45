"""Tracing through the OpenTelemetry API only (a no-op until an application installs the SDK)."""

from __future__ import annotations

import contextlib
import itertools

from opentelemetry import trace

__all__ = ["tracer", "session_run_span", "set_step_attrs"]

tracer = trace.get_tracer("kernflow.core")
_step_counter = itertools.count(1)


@contextlib.contextmanager
def session_run_span(num_fetches: int):
    """One span per `Session.run`, with the step id and the fetch count as attributes."""
    step = next(_step_counter)
    with tracer.start_as_current_span("Session.run", record_exception=True) as span:
        if span.is_recording():
            span.set_attribute("kernflow.step_id", step)
            span.set_attribute("kernflow.fetch_count", num_fetches)
            yield span
        else:
            yield None


def set_step_attrs(span, num_tensors: int, num_targets: int) -> None:
    span.set_attribute("kernflow.fetch_tensors", num_tensors)
    span.set_attribute("kernflow.targets", num_targets)

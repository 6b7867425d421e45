"""Reading kernflow's metrics in tests: an in-memory SDK reader installed for kernflow only.

OpenTelemetry's global MeterProvider can be set once per process, so tests do not set it: they
install a fresh provider for kernflow's instruments (`kernflow.core.telemetry.set_meter_provider`)
and read it back::

    with MetricsRecorder() as rec:
        sess.run(y)
        assert rec.value("kernflow.session.steps", {"kernflow.session.kind": "embedded"}) == 1

Needs ``opentelemetry-sdk`` (a test dependency; the library itself uses the API only).
"""

from __future__ import annotations

import time

from kernflow.core import telemetry

__all__ = ["MetricsRecorder"]


class MetricsRecorder:
    """Installs an SDK MeterProvider with an ``InMemoryMetricReader`` for kernflow while active."""

    def __init__(self):
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def __enter__(self) -> MetricsRecorder:
        telemetry.set_meter_provider(self.provider)
        return self

    def __exit__(self, *exc) -> None:
        telemetry.set_meter_provider(None)
        self.provider.shutdown()

    def points(self, name: str) -> list:
        """The data points of metric `name` collected now (an empty list when it has none)."""
        data = self.reader.get_metrics_data()
        out = []
        for rm in (data.resource_metrics if data is not None else ()):
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == name:
                        out.extend(m.data.data_points)
        return out

    def matching(self, name: str, attributes: dict | None = None) -> list:
        """The points of `name` whose attributes include every item of `attributes`."""
        want = (attributes or {}).items()
        return [p for p in self.points(name) if all(p.attributes.get(k) == v for k, v in want)]

    def value(self, name: str, attributes: dict | None = None) -> float:
        """The sum of the matching points' values (counters, gauges); histograms: their counts."""
        return sum(p.count if hasattr(p, "bucket_counts") else p.value
                   for p in self.matching(name, attributes))

    def wait_value(self, name: str, attributes: dict | None = None, at_least: float = 1,
                   timeout: float = 5.0) -> float:
        """`value`, once it reaches `at_least` or `timeout` seconds passed (a server records an
        RPC's metrics on its own thread, after the reply went out)."""
        deadline = time.monotonic() + timeout
        while (v := self.value(name, attributes)) < at_least and time.monotonic() < deadline:
            time.sleep(0.01)
        return v

    def names(self) -> set[str]:
        """The names of every metric with data points."""
        data = self.reader.get_metrics_data()
        return {m.name for rm in (data.resource_metrics if data is not None else ())
                for sm in rm.scope_metrics for m in sm.metrics if m.data.data_points}

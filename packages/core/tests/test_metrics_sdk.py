"""The CLI's metrics set-up (`kernflow.core.metrics_sdk`): specs, clear errors, a Prometheus scrape
endpoint serving kernflow's metrics, compact console lines. The global MeterProvider is never set
here (it can be set once per process): providers are built and installed for kernflow only, except in
the subprocess that checks `configure_metrics` itself."""

import io
import os
import subprocess
import sys
import urllib.request

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import metrics_sdk, telemetry
from kernflow.core.metrics_sdk import MetricsConfigError, parse_spec


@pytest.mark.parametrize("spec, want", [
    ("", ("none", ())), ("none", ("none", ())), ("NONE", ("none", ())),
    ("console", ("console", (10.0,))), ("console:2.5", ("console", (2.5,))),
    ("prometheus:9464", ("prometheus", ("127.0.0.1", 9464))),
    ("prometheus:0.0.0.0:9000", ("prometheus", ("0.0.0.0", 9000))),
    ("otlp", ("otlp", ())),
])
def test_parse_spec(spec, want):
    assert parse_spec(spec) == want


@pytest.mark.parametrize("spec, words", [
    ("statsd", "expected console"), ("prometheus", "port number"), ("prometheus:http", "port number"),
    ("prometheus:70000", "port number"), ("console:-1", "positive number"), ("otlp:x", "expected console"),
])
def test_bad_specs_say_what_is_accepted(spec, words):
    with pytest.raises(MetricsConfigError, match=words):
        parse_spec(spec)
    with pytest.raises(MetricsConfigError):
        metrics_sdk.configure_metrics(spec, "test")


def test_none_configures_nothing(monkeypatch):
    monkeypatch.delenv(metrics_sdk.METRICS_ENV, raising=False)
    assert metrics_sdk.configure_metrics("", "test") is None
    assert metrics_sdk.configure_metrics("none", "test") is None
    monkeypatch.setenv(metrics_sdk.METRICS_ENV, "bogus")
    with pytest.raises(MetricsConfigError, match="bogus"):
        metrics_sdk.configure_metrics(None, "test")


def _steps(n):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [1])
        y = x * 2.0
    with kf.Session(graph=g) as s:
        for _ in range(n):
            s.run(y, {x: np.ones(1, np.float32)})


def test_prometheus_endpoint_serves_kernflow_metrics():
    provider, applied = metrics_sdk.build_meter_provider("prometheus:0", "kernflow-test",
                                                         {"kernflow.task": "/job:test/task:0"})
    port = int(applied.split(":")[1])
    assert port > 0
    telemetry.set_meter_provider(provider)
    try:
        _steps(4)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        telemetry.set_meter_provider(None)
        provider.shutdown()
    assert 'kernflow_session_steps_total{kernflow_session_kind="embedded"' in text
    line = next(ln for ln in text.splitlines() if ln.startswith("kernflow_session_steps_total"))
    assert float(line.rsplit(" ", 1)[1]) == 4
    assert "kernflow_session_step_duration_seconds_count" in text
    assert 'service_name="kernflow-test"' in text   # the resource, as target_info
    with pytest.raises(OSError):   # shut down: the endpoint is gone
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_prometheus_port_in_use_is_a_clear_error():
    provider, applied = metrics_sdk.build_meter_provider("prometheus:0", "test")
    try:
        with pytest.raises(MetricsConfigError, match="cannot serve"):
            metrics_sdk.build_meter_provider(applied, "test")
    finally:
        provider.shutdown()


def test_missing_exporter_packages_are_named(monkeypatch):
    for mod in ("opentelemetry.exporter.prometheus", "opentelemetry.exporter.otlp.proto.grpc.metric_exporter",
                "opentelemetry.exporter.otlp.proto.http.metric_exporter"):
        monkeypatch.setitem(sys.modules, mod, None)   # import raises ImportError
    with pytest.raises(MetricsConfigError, match=r"kernflow-core\[metrics\]"):
        metrics_sdk.build_meter_provider("prometheus:0", "test")
    with pytest.raises(MetricsConfigError, match="OTLP exporter"):
        metrics_sdk.build_meter_provider("otlp", "test")


def test_console_lines_are_compact():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.resources import Resource
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create({"service.name": "svc"}))
    telemetry.set_meter_provider(provider)
    try:
        _steps(2)
        text = metrics_sdk.format_compact(reader.get_metrics_data())
    finally:
        telemetry.set_meter_provider(None)
        provider.shutdown()
    lines = text.splitlines()
    assert lines[0].startswith("# metrics svc ")
    assert "kernflow.session.steps{kernflow.session.kind=embedded} 2" in lines
    hist = next(ln for ln in lines if ln.startswith("kernflow.session.step.duration{"))
    assert " count=2 sum=" in hist and hist.endswith(" s")


def test_configure_metrics_installs_the_global_provider():
    # In a subprocess: the global MeterProvider can be set once per process.
    code = (
        "import sys, numpy as np, kernflow.core as kf\n"
        "from kernflow.core import metrics_sdk, telemetry\n"
        "assert not telemetry.metrics_active()\n"
        "assert metrics_sdk.configure_metrics(None, 'kernflow-test') == 'console:0.2'\n"
        "assert metrics_sdk.configure_metrics('prometheus:0', 'x') == 'console:0.2'  # once only\n"
        "assert telemetry.metrics_active()\n"
        "x = kf.placeholder(kf.float32, [1]); y = x + 1\n"
        "with kf.Session() as s: s.run(y, {x: np.ones(1, np.float32)})\n")
    env = dict(os.environ, KERNFLOW_METRICS="console:0.2")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "kernflow.session.steps{kernflow.session.kind=embedded} 1" in r.stderr   # at exit, at least
    assert r.stdout == ""


def test_console_exporter_writes_to_stderr_not_stdout(monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    provider, applied = metrics_sdk.build_meter_provider("console:60", "svc")
    assert applied == "console:60"
    telemetry.set_meter_provider(provider)
    try:
        _steps(1)
        provider.force_flush()
    finally:
        telemetry.set_meter_provider(None)
        provider.shutdown()
    assert "kernflow.session.steps{kernflow.session.kind=embedded} 1" in err.getvalue()

"""OpenTelemetry metrics SDK set-up for kernflow's command-line entry points (never imported by the library).

Library code records metrics through `opentelemetry-api` only (`kernflow.core.telemetry`), which is a
no-op until an application installs an SDK MeterProvider. The ``kernflow`` command does that from its
``--metrics`` flag (or the environment), one spec per process:

    KERNFLOW_METRICS=console[:SECONDS]      every SECONDS (default 10) one compact line per data
                                            point on stderr: ``name{attr=value,...} value``
    KERNFLOW_METRICS=prometheus:[HOST:]PORT a Prometheus scrape endpoint at
                                            http://HOST:PORT/metrics (HOST defaults to 127.0.0.1;
                                            PORT 0 picks a free port, which the return value names)
    KERNFLOW_METRICS=otlp                   OTLP (gRPC, else HTTP) to OTEL_EXPORTER_OTLP_ENDPOINT
                                            every OTEL_METRIC_EXPORT_INTERVAL ms (default 60000)
    KERNFLOW_METRICS=none                   (or unset) no SDK: metrics stay a no-op

The SDK (``opentelemetry-sdk``), the Prometheus exporter (``opentelemetry-exporter-prometheus``,
``prometheus-client``) and the OTLP exporter are optional dependencies (``pip install
'kernflow-core[metrics]'``), imported only when metrics are asked for. An application that embeds
kernflow calls `configure_metrics` (or sets up the SDK its own way), or builds a provider with
`build_meter_provider` and hands it to `kernflow.core.telemetry.set_meter_provider`.
"""

from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["METRICS_ENV", "MetricsConfigError", "configure_metrics", "build_meter_provider",
           "parse_spec", "format_compact"]

METRICS_ENV = "KERNFLOW_METRICS"
DEFAULT_CONSOLE_INTERVAL_S = 10.0
DEFAULT_PROMETHEUS_HOST = "127.0.0.1"
_OFF = ("", "none", "off", "0")
_INSTALL = "pip install 'kernflow-core[metrics]'"
_FORMS = "console[:SECONDS], prometheus:[HOST:]PORT, otlp or none"

_lock = threading.Lock()
_configured: str | None = None


class MetricsConfigError(RuntimeError):
    """Metrics were asked for but cannot be set up (bad spec, SDK or exporter not installed, port taken)."""


def parse_spec(spec: str) -> tuple[str, tuple]:
    """Splits a metrics spec into its kind and arguments.

    Returns:
        ("none", ()), ("console", (seconds,)), ("prometheus", (host, port)) or ("otlp", ()).

    Raises:
        MetricsConfigError: for anything else.
    """
    s = (spec or "").strip()
    kind, _, arg = s.partition(":")
    kind = kind.lower()
    if s.lower() in _OFF:
        return "none", ()
    if kind == "console":
        return "console", (_seconds(spec, arg),)
    if kind == "prometheus":
        return "prometheus", _host_port(spec, arg)
    if kind == "otlp" and not arg:
        return "otlp", ()
    raise MetricsConfigError(f"bad metrics spec {spec!r}: expected {_FORMS}")


def _seconds(spec: str, arg: str) -> float:
    if not arg:
        return DEFAULT_CONSOLE_INTERVAL_S
    try:
        seconds = float(arg)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise MetricsConfigError(f"bad metrics spec {spec!r}: the console interval must be a positive "
                                 f"number of seconds, e.g. console:5")
    return seconds


def _host_port(spec: str, arg: str) -> tuple[str, int]:
    host, _, port = arg.rpartition(":")
    host = host.strip("[]") or DEFAULT_PROMETHEUS_HOST
    if not port.isdigit() or int(port) > 65535:
        raise MetricsConfigError(f"bad metrics spec {spec!r}: expected prometheus:PORT or "
                                 f"prometheus:HOST:PORT with a port number, e.g. prometheus:9464")
    return host, int(port)


# ---------------------------------------------------------------------------- entry point
def configure_metrics(spec: str | None, service_name: str,
                      resource_attributes: dict | None = None) -> str | None:
    """Installs the global SDK MeterProvider that `spec` asks for (once per process).

    Args:
        spec: see the module docstring; None or "" reads ``$KERNFLOW_METRICS`` (unset: off).
        service_name: the ``service.name`` resource attribute ("kernflow-worker", ...).
        resource_attributes: further resource attributes (``process.pid`` is always added).

    Returns:
        The spec applied (for ``prometheus:0``, with the port picked), or None when metrics stay
        off. A second call returns the first one's result and changes nothing.

    Raises:
        MetricsConfigError: a bad spec, a missing package, or a port that cannot be bound.
    """
    global _configured
    if not spec:
        spec = os.environ.get(METRICS_ENV, "")
    kind, _ = parse_spec(spec)
    if kind == "none":
        return None
    with _lock:
        if _configured is not None:
            return _configured
        provider, applied = build_meter_provider(spec, service_name, resource_attributes)
        from opentelemetry import metrics
        metrics.set_meter_provider(provider)
        _configured = applied
        return applied


def build_meter_provider(spec: str, service_name: str, resource_attributes: dict | None = None):
    """Builds (without installing it) an SDK MeterProvider with the reader `spec` asks for.

    Returns:
        ``(provider, applied spec)``.

    Raises:
        MetricsConfigError: as `configure_metrics`; also for "none".
    """
    kind, args = parse_spec(spec)
    if kind == "none":
        raise MetricsConfigError("metrics spec 'none' has no reader to build")
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
    except ImportError as e:
        raise MetricsConfigError(f"metrics {spec!r} need the OpenTelemetry SDK: {_INSTALL} ({e})") from None
    reader, applied = _READERS[kind](spec, *args)
    attrs = {"service.name": service_name, "process.pid": os.getpid(), **(resource_attributes or {})}
    return MeterProvider(metric_readers=[reader], resource=Resource.create(attrs)), applied


# ---------------------------------------------------------------------------- readers
def _console_reader(spec: str, seconds: float):
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
    exporter = ConsoleMetricExporter(out=sys.stderr, formatter=format_compact)
    return PeriodicExportingMetricReader(exporter, export_interval_millis=seconds * 1000.0), spec


def _prometheus_reader(spec: str, host: str, port: int):
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, start_http_server
    except ImportError as e:
        raise MetricsConfigError(f"metrics {spec!r} need the Prometheus exporter: {_INSTALL} "
                                 f"(opentelemetry-exporter-prometheus, prometheus-client) ({e})") from None
    registry = CollectorRegistry(auto_describe=True)
    try:
        httpd, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as e:
        raise MetricsConfigError(f"metrics {spec!r}: cannot serve http://{host}:{port}/metrics: "
                                 f"{e}") from None
    reader = _serving_prometheus_reader(PrometheusMetricReader, registry, httpd)
    bound = httpd.server_port
    where = str(bound) if host == DEFAULT_PROMETHEUS_HOST else f"{host}:{bound}"
    return reader, f"prometheus:{where}"


def _serving_prometheus_reader(base, registry, httpd):
    """A `PrometheusMetricReader` on `registry` that stops its HTTP server when shut down."""
    class ServingPrometheusMetricReader(base):
        def __init__(self):
            super().__init__(registry=registry)
            self.httpd = httpd

        def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
            super().shutdown(timeout_millis=timeout_millis, **kwargs)
            self.httpd.shutdown()
            self.httpd.server_close()
    return ServingPrometheusMetricReader()


def _otlp_reader(spec: str):
    try:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    except ImportError:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        except ImportError:
            raise MetricsConfigError(
                f"metrics 'otlp' need an OTLP exporter: {_INSTALL} (or opentelemetry-exporter-otlp-"
                f"proto-grpc / -proto-http); or use console or prometheus:PORT") from None
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    return PeriodicExportingMetricReader(OTLPMetricExporter()), spec


_READERS = {"console": _console_reader, "prometheus": _prometheus_reader, "otlp": _otlp_reader}


# ---------------------------------------------------------------------------- compact console lines
def format_compact(metrics_data) -> str:
    """One line per data point: ``name{attr=value,...} value`` (histograms: count, sum, mean).

    The block starts with a ``# metrics <service> <time>`` line; nothing at all when no point.
    """
    lines = []
    service = ""
    for rm in metrics_data.resource_metrics:
        service = rm.resource.attributes.get("service.name", service)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                lines.extend(_point_line(m.name, m.unit, p) for p in m.data.data_points)
    if not lines:
        return ""
    stamp = time.strftime("%H:%M:%S")
    return f"# metrics {service} {stamp}\n" + "\n".join(lines) + "\n"


def _point_line(name: str, unit: str, point) -> str:
    attrs = ",".join(f"{k}={v}" for k, v in sorted((point.attributes or {}).items()))
    head = f"{name}{{{attrs}}}" if attrs else name
    unit = f" {unit}" if unit and not unit.startswith("{") else ""
    if hasattr(point, "bucket_counts"):
        mean = point.sum / point.count if point.count else 0.0
        return f"{head} count={point.count} sum={point.sum:.6g}{unit} mean={mean:.6g}{unit}"
    return f"{head} {point.value:g}{unit}"

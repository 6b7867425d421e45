"""OpenTelemetry SDK set-up for kernflow's command-line entry points (never imported by the library).

Library code traces through `opentelemetry-api` only (`kernflow.core.tracing`), which is a no-op until
an application installs an SDK tracer provider. The ``kernflow`` command does that from the
environment (or its ``--trace`` flag), so every process of a cluster started with the CLI exports its
spans, and the W3C trace context carried in gRPC metadata joins them into one trace per
`Session.run`:

    KERNFLOW_TRACE=console   spans as JSON on stderr (stdout stays for the commands' own output)
    KERNFLOW_TRACE=otlp      OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4317);
                             needs ``pip install opentelemetry-exporter-otlp-proto-grpc``
    KERNFLOW_TRACE=file:PATH one JSON object per finished span and line, appended to PATH (``{pid}``
                             in PATH becomes the process id); handy for tests and offline analysis
    KERNFLOW_TRACE=none      (or unset) no SDK: tracing stays a no-op

The SDK (``opentelemetry-sdk``) is an optional dependency and is imported only when tracing is asked
for. An application that embeds kernflow calls `configure` (or sets up the SDK its own way).
"""

from __future__ import annotations

import json
import os
import sys
import threading

__all__ = ["TRACE_ENV", "configure_from_env", "configure", "JsonLinesSpanExporter", "span_to_dict",
           "TracingConfigError"]

TRACE_ENV = "KERNFLOW_TRACE"
_lock = threading.Lock()
_configured: str | None = None


class TracingConfigError(RuntimeError):
    """Tracing was asked for but cannot be set up (bad mode, SDK or exporter not installed)."""


def configure_from_env(service_name: str = "kernflow", mode: str | None = None, env=None) -> str | None:
    """Installs a tracer provider as `mode` (else ``$KERNFLOW_TRACE``) asks; see the module docstring.

    Args:
        service_name: the ``service.name`` resource attribute of every span of this process.
        mode: "console", "otlp", "file:PATH" or "none"; None reads ``KERNFLOW_TRACE``.
        env: the environment to read (default `os.environ`).

    Returns:
        The mode applied, or None when tracing stays off.

    Raises:
        TracingConfigError: for an unknown mode, or when the SDK or the OTLP exporter is missing.
    """
    env = os.environ if env is None else env
    if mode is None:
        mode = env.get(TRACE_ENV, "")
    mode = mode.strip()
    if mode.lower() in ("", "none", "off", "0"):
        return None
    return configure(mode, service_name=service_name, env=env)


def configure(mode: str, service_name: str = "kernflow", env=None) -> str:
    """Installs the SDK tracer provider with one exporter (once per process; later calls are no-ops).

    Args:
        mode: "console", "otlp" or "file:PATH".
        service_name: the ``service.name`` resource attribute.
        env: the environment (for ``OTEL_EXPORTER_OTLP_ENDPOINT``); default `os.environ`.

    Returns:
        `mode`.

    Raises:
        TracingConfigError: see `configure_from_env`.
    """
    global _configured
    env = os.environ if env is None else env
    with _lock:
        if _configured is not None:
            return _configured
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
        except ImportError as e:
            raise TracingConfigError(f"{TRACE_ENV}={mode} needs the OpenTelemetry SDK: pip install "
                                     f"opentelemetry-sdk ({e})") from None
        if mode == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter
            processor = SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr))
        elif mode == "otlp":
            processor = BatchSpanProcessor(_otlp_exporter(env))
        elif mode.startswith("file:") and len(mode) > len("file:"):
            processor = SimpleSpanProcessor(JsonLinesSpanExporter(mode[len("file:"):]))
        else:
            raise TracingConfigError(f"unknown {TRACE_ENV} value {mode!r}: expected console, otlp, "
                                     f"file:PATH or none")
        provider = TracerProvider(resource=Resource.create({"service.name": service_name,
                                                            "process.pid": os.getpid()}))
        provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
        _configured = mode
        return mode


def _otlp_exporter(env):
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    except ImportError:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingConfigError(
                f"{TRACE_ENV}=otlp needs an OTLP exporter: pip install "
                f"opentelemetry-exporter-otlp-proto-grpc (or -proto-http); or use "
                f"{TRACE_ENV}=console or file:PATH") from None
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()


def span_to_dict(span) -> dict:
    """A finished SDK span as a flat JSON-able dict (ids as 32/16 hex digits, times in ns)."""
    ctx = span.get_span_context()
    parent = span.parent
    return {
        "name": span.name,
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(parent.span_id, "016x") if parent is not None else None,
        "parent_is_remote": bool(parent.is_remote) if parent is not None else None,
        "kind": span.kind.name,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": span.status.status_code.name,
        "attributes": {k: _jsonable(v) for k, v in (span.attributes or {}).items()},
        "service": (span.resource.attributes or {}).get("service.name") if span.resource else None,
        "pid": os.getpid(),
    }


def _jsonable(v):
    return list(v) if isinstance(v, tuple) else v


class JsonLinesSpanExporter:
    """A `SpanExporter` appending one JSON object per span and line to a file.

    Every line is written with a single ``write`` on a file opened with ``O_APPEND``, so several
    processes can share one file. ``{pid}`` in `path` is replaced by the process id.
    """

    def __init__(self, path: str):
        self.path = path.replace("{pid}", str(os.getpid()))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult
        data = "".join(json.dumps(span_to_dict(s), sort_keys=True) + "\n" for s in spans).encode()
        with self._lock:
            if self._fd is None:
                return SpanExportResult.FAILURE
            os.write(self._fd, data)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

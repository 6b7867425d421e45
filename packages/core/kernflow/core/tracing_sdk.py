"""OpenTelemetry SDK set-up for kernflow's command-line entry points (never imported by the library).

Library code traces through `opentelemetry-api` only (`kernflow.core.tracing`), which is a no-op until
an application installs an SDK tracer provider. The ``kernflow`` command does that from its
``--trace`` flag (or the environment), so every process of a cluster started with the CLI exports its
spans, and the W3C trace context carried in gRPC metadata joins them into one trace per
`Session.run`:

    KERNFLOW_TRACE=console   one line per finished span on stderr (stdout stays for the commands'
                             own output): name, service, duration, ids, attributes
    KERNFLOW_TRACE=otlp      OTLP/gRPC to OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4317);
                             needs ``pip install 'kernflow-core[trace]'``
    KERNFLOW_TRACE=file:PATH one OTLP/JSON ``ExportTraceServiceRequest`` per line (the Collector's
                             file-exporter format), appended to PATH; ``{pid}`` in PATH becomes the
                             process id and ``{task}`` the process's short name ("worker-1",
                             "master"); a PATH ending in ``/`` is a directory that gets one file per
                             process. ``kernflow trace export`` turns such files into Chrome trace
                             JSON (Perfetto) or one OTLP/JSON request (Jaeger, any OTLP receiver)
    KERNFLOW_TRACE=none      (or unset) no SDK: tracing stays a no-op

The SDK (``opentelemetry-sdk``) and the OTLP encoders are optional dependencies (the ``trace`` extra)
and are imported only when tracing is asked for. An application that embeds kernflow calls
`configure` (or sets up the SDK its own way).
"""

from __future__ import annotations

import json
import os
import sys
import threading

__all__ = ["TRACE_ENV", "configure_from_env", "configure", "check_mode", "OtlpJsonFileSpanExporter",
           "ConsoleLineSpanExporter", "TracingConfigError"]

TRACE_ENV = "KERNFLOW_TRACE"
_lock = threading.Lock()
_configured: str | None = None


class TracingConfigError(RuntimeError):
    """Tracing was asked for but cannot be set up (bad mode, SDK or exporter not installed)."""


def check_mode(mode: str) -> str:
    """Validates a tracing mode without importing the SDK; returns it stripped.

    Raises:
        TracingConfigError: not console, otlp, none (off, 0, empty) or file:PATH.
    """
    mode = mode.strip()
    if mode.lower() in _OFF or mode in ("console", "otlp"):
        return mode
    if mode.startswith("file:") and len(mode) > len("file:"):
        return mode
    raise TracingConfigError(f"unknown {TRACE_ENV} value {mode!r}: expected console, otlp, "
                             f"file:PATH or none")


_OFF = ("", "none", "off", "0")


def configure_from_env(service_name: str = "kernflow", mode: str | None = None, env=None,
                       resource_attributes: dict | None = None,
                       process_name: str | None = None) -> str | None:
    """Installs a tracer provider as `mode` (else ``$KERNFLOW_TRACE``) asks; see the module docstring.

    Args:
        service_name: the ``service.name`` resource attribute of every span of this process.
        mode: "console", "otlp", "file:PATH" or "none"; None reads ``KERNFLOW_TRACE``.
        env: the environment to read (default `os.environ`).
        resource_attributes: further resource attributes (``kernflow.task``, ...).
        process_name: what ``{task}`` in a ``file:`` path becomes (default: `service_name`).

    Returns:
        The mode applied, or None when tracing stays off.

    Raises:
        TracingConfigError: for an unknown mode, or when the SDK or the OTLP exporter is missing.
    """
    env = os.environ if env is None else env
    if mode is None:
        mode = env.get(TRACE_ENV, "")
    mode = check_mode(mode)
    if mode.lower() in _OFF:
        return None
    return configure(mode, service_name=service_name, env=env, resource_attributes=resource_attributes,
                     process_name=process_name)


def configure(mode: str, service_name: str = "kernflow", env=None, resource_attributes: dict | None = None,
              process_name: str | None = None) -> str:
    """Installs the SDK tracer provider with one exporter (once per process; later calls are no-ops).

    Args:
        mode: "console", "otlp" or "file:PATH".
        service_name: the ``service.name`` resource attribute.
        env: the environment (for ``OTEL_EXPORTER_OTLP_ENDPOINT``); default `os.environ`.
        resource_attributes: further resource attributes; ``process.pid`` is always added.
        process_name: what ``{task}`` in a ``file:`` path becomes (default: `service_name`).

    Returns:
        `mode`.

    Raises:
        TracingConfigError: see `configure_from_env`.
    """
    global _configured
    env = os.environ if env is None else env
    mode = check_mode(mode)
    with _lock:
        if _configured is not None:
            return _configured
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
        except ImportError as e:
            raise TracingConfigError(f"{TRACE_ENV}={mode} needs the OpenTelemetry SDK: pip install "
                                     f"'kernflow-core[trace]' ({e})") from None
        processor = _processor(mode, env, process_name or service_name)
        attrs = {"service.name": service_name, "process.pid": os.getpid(), **(resource_attributes or {})}
        provider = TracerProvider(resource=Resource.create(attrs))
        provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
        _configured = mode
        return mode


def _processor(mode: str, env, process_name: str):
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    if mode == "console":
        return SimpleSpanProcessor(ConsoleLineSpanExporter(sys.stderr))
    if mode == "otlp":
        return BatchSpanProcessor(_otlp_exporter(env))
    if mode.startswith("file:"):
        return SimpleSpanProcessor(OtlpJsonFileSpanExporter(mode[len("file:"):], process_name))
    raise TracingConfigError(f"unknown {TRACE_ENV} value {mode!r}: expected console, otlp, "
                             f"file:PATH or none")


def _otlp_exporter(env):
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    except ImportError:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingConfigError(
                f"{TRACE_ENV}=otlp needs an OTLP exporter: pip install 'kernflow-core[trace]' "
                f"(opentelemetry-exporter-otlp-proto-grpc, or -proto-http); or use "
                f"{TRACE_ENV}=console or file:PATH") from None
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()


def _file_path(path: str, process_name: str) -> str:
    """Expands ``{pid}`` and ``{task}``; a directory (``DIR/``) gets ``DIR/<task>-<pid>.otlp.jsonl``."""
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        path = os.path.join(path, "{task}-{pid}.otlp.jsonl")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in process_name)
    path = os.path.expanduser(path.replace("{pid}", str(os.getpid())).replace("{task}", safe))
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def _otlp_json_line(spans) -> bytes:
    """`spans` as one OTLP/JSON ``ExportTraceServiceRequest`` line, encoded as the OTLP exporters do."""
    from google.protobuf import json_format
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from kernflow.core.trace_export import normalize_request
    doc = json_format.MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return (json.dumps(normalize_request(doc), separators=(",", ":")) + "\n").encode()


class OtlpJsonFileSpanExporter:
    """A `SpanExporter` appending one OTLP/JSON ``ExportTraceServiceRequest`` per export and line.

    The request is the one the OTLP exporters send (``encode_spans`` of
    opentelemetry-exporter-otlp-proto-common), in the OTLP/JSON encoding: hex ids, integer enums.
    Every line is written with a single ``write`` on a file opened with ``O_APPEND``, so several
    processes can share one file (``kernflow trace export`` reads them all back).

    Args:
        path: the file; ``{pid}`` and ``{task}`` are expanded, a trailing ``/`` makes it a directory.
        process_name: what ``{task}`` becomes.

    Raises:
        TracingConfigError: the OTLP encoder is not installed, or the file cannot be opened.
    """

    def __init__(self, path: str, process_name: str = "kernflow"):
        try:
            import opentelemetry.exporter.otlp.proto.common.trace_encoder  # noqa: F401
        except ImportError as e:
            raise TracingConfigError(f"{TRACE_ENV}=file:PATH needs the OTLP encoder: pip install "
                                     f"'kernflow-core[trace]' ({e})") from None
        self.path = _file_path(path, process_name)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            raise TracingConfigError(f"{TRACE_ENV}=file:{path}: cannot open {self.path}: "
                                     f"{e.strerror}") from None
        self._lock = threading.Lock()

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult
        data = _otlp_json_line(spans)
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


class ConsoleLineSpanExporter:
    """A `SpanExporter` writing one line per finished span, e.g.::

        span Worker.RunGraph 3.214 ms kernflow-worker[/job:worker/replica:0/task:1] \\
            trace=4bf92f3577b34da6a3ce929d0e0e4736 span=00f067aa0ba902b7 parent=53995c3f42cd8ad8 \\
            kernflow.step_id=7 kernflow.task=/job:worker/replica:0/task:1

    (on one line). An error status follows the duration (``ERROR: message``).
    """

    MAX_VALUE = 80

    def __init__(self, out=None):
        self._out = out if out is not None else sys.stderr
        self._lock = threading.Lock()

    def export(self, spans):
        from opentelemetry.sdk.trace.export import SpanExportResult
        text = "".join(self.format(s) + "\n" for s in spans)
        with self._lock:
            self._out.write(text)
            self._out.flush()
        return SpanExportResult.SUCCESS

    @classmethod
    def format(cls, span) -> str:
        """The line of one finished SDK span."""
        ctx, parent = span.get_span_context(), span.parent
        res = (span.resource.attributes if span.resource is not None else None) or {}
        who = res.get("service.name", "unknown_service")
        if res.get("kernflow.task"):
            who += f"[{res['kernflow.task']}]"
        parts = [f"span {span.name}", f"{((span.end_time or 0) - (span.start_time or 0)) / 1e6:.3f} ms"]
        if span.status.status_code.name == "ERROR":
            parts.append(f"ERROR: {span.status.description}" if span.status.description else "ERROR")
        parts += [who, f"trace={ctx.trace_id:032x}", f"span={ctx.span_id:016x}"]
        if parent is not None:
            parts.append(f"parent={parent.span_id:016x}" + (" (remote)" if parent.is_remote else ""))
        parts += [f"{k}={cls._value(v)}" for k, v in (span.attributes or {}).items()]
        return " ".join(parts)

    @classmethod
    def _value(cls, v) -> str:
        text = ",".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)
        text = text.replace("\n", " ")
        return text if len(text) <= cls.MAX_VALUE else text[:cls.MAX_VALUE - 3] + "..."

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

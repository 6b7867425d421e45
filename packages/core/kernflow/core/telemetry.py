"""Metrics through the OpenTelemetry API only (a no-op until an application installs an SDK).

kernflow's instruments are defined once, here, on the meter ``kernflow``:

======================================  ==========  ==========  =============================================
instrument                              unit        kind        attributes
======================================  ==========  ==========  =============================================
kernflow.session.steps                  {step}      obs. count  kernflow.session.kind, [error.type]
kernflow.session.step.duration          s           histogram   kernflow.session.kind, [error.type]
kernflow.rpc.client.duration            s           histogram   rpc.service, rpc.method, rpc.grpc.status_code
kernflow.rpc.client.sent / .received    By          counter     rpc.service, rpc.method
kernflow.rpc.server.duration            s           histogram   rpc.service, rpc.method, rpc.grpc.status_code
kernflow.rpc.server.sent / .received    By          counter     rpc.service, rpc.method
kernflow.queue.size                     {element}   obs. gauge  kernflow.queue.name, kernflow.queue.kind
kernflow.accumulator.dropped_gradients  {gradient}  counter     kernflow.accumulator.name
kernflow.checkpoint.duration            s           histogram   kernflow.checkpoint.operation, [error.type]
======================================  ==========  ==========  =============================================

``kernflow.session.kind`` is "embedded" (``kf.Session()``) or "remote" (``grpc://``, ``etcd://``);
``kernflow.checkpoint.operation`` is "save" or "restore"; ``[error.type]`` is there for failures only;
obs. gauge / count: an observable gauge / counter (read when a reader collects).

Cost: until a MeterProvider is installed (globally, or for kernflow with `set_meter_provider`),
`metrics_active` is False and the runtime records nothing per step: checking costs a fraction of a
microsecond, not the few microseconds that building attributes and calling no-op instruments
would. Queue sizes are observed only when a reader collects, so queue operations never pay.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref

from opentelemetry import metrics

__all__ = ["METER_NAME", "Instruments", "instruments", "metrics_active", "set_meter_provider",
           "step_start", "record_step", "session_attributes", "observe_queue", "gradient_dropped",
           "checkpoint_timer", "SESSION_KIND", "EMBEDDED", "REMOTE"]

METER_NAME = "kernflow"
SESSION_KIND = "kernflow.session.kind"
EMBEDDED, REMOTE = "embedded", "remote"

# Seconds: from a 10 us embedded step to a long remote step or a large checkpoint.
LATENCY_BUCKETS_S = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05,
                     0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
CHECKPOINT_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                        60.0, 120.0, 300.0, 600.0)


class Instruments:
    """kernflow's instruments, made from one meter (see the module docstring for the table)."""

    def __init__(self, meter: metrics.Meter):
        # Steps are counted here and observed when a reader collects: an SDK counter's add() costs
        # ~9 us, more than an embedded step; the duration histogram is the one record per step.
        self._step_lock = threading.Lock()
        self._step_counts: dict[tuple[str, str], int] = {}
        self.steps = meter.create_observable_counter(
            "kernflow.session.steps", callbacks=[self._observe_steps], unit="{step}",
            description="Session.run calls (steps) finished")
        self.step_duration = meter.create_histogram(
            "kernflow.session.step.duration", unit="s", description="Wall time of Session.run",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S)
        self._rpc(meter, "client", "calls this process made")
        self._rpc(meter, "server", "calls this process served")
        self.queue_size = meter.create_observable_gauge(
            "kernflow.queue.size", callbacks=[_observe_queues], unit="{element}",
            description="Elements held by each live queue (FIFOQueue, RandomShuffleQueue...)")
        self.dropped_gradients = meter.create_counter(
            "kernflow.accumulator.dropped_gradients", unit="{gradient}",
            description="Stale gradients (local step below the global step) an accumulator dropped")
        self.checkpoint_duration = meter.create_histogram(
            "kernflow.checkpoint.duration", unit="s", description="Wall time of Saver.save / restore",
            explicit_bucket_boundaries_advisory=CHECKPOINT_BUCKETS_S)

    def count_step(self, kind: str, error_type: str = "") -> None:
        """Counts one finished step of a session of `kind` (failed with `error_type`, if given)."""
        key = (kind, error_type)
        with self._step_lock:
            self._step_counts[key] = self._step_counts.get(key, 0) + 1

    def _observe_steps(self, options):
        with self._step_lock:
            counts = list(self._step_counts.items())
        return [metrics.Observation(n, {SESSION_KIND: kind, **({"error.type": e} if e else {})})
                for (kind, e), n in counts]

    def _rpc(self, meter: metrics.Meter, side: str, what: str) -> None:
        setattr(self, f"rpc_{side}_duration", meter.create_histogram(
            f"kernflow.rpc.{side}.duration", unit="s", description=f"Duration of the unary gRPC {what}",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS_S))
        setattr(self, f"rpc_{side}_sent", meter.create_counter(
            f"kernflow.rpc.{side}.sent", unit="By",
            description=f"Serialized message bytes sent in the gRPC {what}"))
        setattr(self, f"rpc_{side}_received", meter.create_counter(
            f"kernflow.rpc.{side}.received", unit="By",
            description=f"Serialized message bytes received in the gRPC {what}"))


# ---------------------------------------------------------------------------- which provider
_lock = threading.Lock()
_provider = None            # set by `set_meter_provider`; None: the global provider
_instruments: Instruments | None = None
_ENV_PROVIDER = "OTEL_PYTHON_METER_PROVIDER" in os.environ


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("kernflow-core")
    except Exception:  # noqa: BLE001 - a source tree without installed metadata
        return ""


def set_meter_provider(provider) -> None:
    """Records kernflow's metrics through `provider` rather than the global MeterProvider.

    OpenTelemetry's global provider can be set once per process; this one can change (tests, or an
    application that keeps kernflow's metrics apart). None goes back to the global provider.

    Args:
        provider: an SDK ``MeterProvider`` (anything with ``get_meter``), or None.
    """
    global _provider, _instruments
    with _lock:
        _provider = provider
        _instruments = None


def instruments() -> Instruments:
    """The instruments of the current provider, made on first use.

    Made from the global API before an SDK is installed, they are OpenTelemetry's proxies, which
    start recording once an application sets the global provider.
    """
    inst = _instruments
    if inst is not None:
        return inst
    return _make_instruments()


def _make_instruments() -> Instruments:
    global _instruments
    with _lock:
        if _instruments is None:
            p = _provider
            meter = (p.get_meter(METER_NAME, _version()) if p is not None
                     else metrics.get_meter(METER_NAME, _version()))
            _instruments = Instruments(meter)
        return _instruments


# `metrics.get_meter_provider()` looks OTEL_PYTHON_METER_PROVIDER up in os.environ on every call
# until a provider is set; the runtime asks on every step, so this reads the API's global directly
# (falling back to the public call if that global ever goes away).
try:
    from opentelemetry.metrics import _internal as _api
except ImportError:  # pragma: no cover - a future API without the module
    _api = None


def _global_provider():
    p = getattr(_api, "_METER_PROVIDER", None) if _api is not None else None
    if p is None and (_ENV_PROVIDER or _api is None):
        p = metrics.get_meter_provider()
    return p


def _metrics_active_checked() -> bool:
    if _provider is not None:
        return True
    p = _global_provider()
    return p is not None and not isinstance(p, metrics.NoOpMeterProvider) and \
        type(p).__name__ != "_ProxyMeterProvider"


def _metrics_active_fast() -> bool:
    if _provider is None and _api._METER_PROVIDER is None:   # no provider at all (the usual case)
        return False
    return _metrics_active_checked()


_FAST = _api is not None and hasattr(_api, "_METER_PROVIDER") and not _ENV_PROVIDER
metrics_active = _metrics_active_fast if _FAST else _metrics_active_checked
metrics_active.__doc__ = """True when a MeterProvider that records is installed (for kernflow, or globally).

Until then the API's instruments record nothing, so the runtime checks this (a fraction of a
microsecond) before it reads clocks or builds attributes.
"""


# ---------------------------------------------------------------------------- steps
_perf_counter = time.perf_counter
_session_attrs = {k: {SESSION_KIND: k} for k in (EMBEDDED, REMOTE)}


def session_attributes(kind: str) -> dict:
    """The (shared, read-only) attributes of a session's steps: ``{"kernflow.session.kind": kind}``."""
    attrs = _session_attrs.get(kind)
    return attrs if attrs is not None else {SESSION_KIND: kind}


def _step_start_checked() -> float | None:
    return _perf_counter() if _metrics_active_checked() else None


def _step_start_fast() -> float | None:   # `_metrics_active_fast` inlined: one call less per step
    if _provider is None and _api._METER_PROVIDER is None:
        return None
    return _perf_counter() if _metrics_active_checked() else None


step_start = _step_start_fast if _FAST else _step_start_checked
step_start.__doc__ = """A step's start time (``time.perf_counter()``), or None when metrics are off.

Pass it to `record_step` when not None; the check is the only cost of an unmetered step.
"""


def record_step(attrs: dict, start: float, error: BaseException | None = None) -> None:
    """Counts one step and records its duration since `start` (from `step_start`).

    Args:
        attrs: `session_attributes` of the session.
        start: what `step_start` returned.
        error: the exception the step raised, if any (recorded as ``error.type``).
    """
    seconds = _perf_counter() - start
    inst = instruments()
    if error is None:
        inst.count_step(attrs[SESSION_KIND])
    else:
        etype = type(error).__name__
        inst.count_step(attrs[SESSION_KIND], etype)
        attrs = {**attrs, "error.type": etype}
    inst.step_duration.record(seconds, attrs)


# ---------------------------------------------------------------------------- queues
_queues: weakref.WeakSet = weakref.WeakSet()


def observe_queue(queue):
    """Reports `queue`'s size in ``kernflow.queue.size`` for as long as it lives; returns it.

    Args:
        queue: an object with ``name``, ``kind`` and ``size()`` (a queue resource).
    """
    _queues.add(queue)
    return queue


def _observe_queues(options):
    out = []
    for q in list(_queues):
        try:
            size = q.size()
        except Exception:  # noqa: BLE001 - a queue torn down while observed: skip it this time
            continue
        out.append(metrics.Observation(size, {"kernflow.queue.name": str(q.name),
                                              "kernflow.queue.kind": str(q.kind)}))
    return out


# ---------------------------------------------------------------------------- training
def gradient_dropped(accumulator_name: str, count: int = 1) -> None:
    """Counts stale gradients an accumulator dropped (``kernflow.accumulator.dropped_gradients``)."""
    if metrics_active():
        instruments().dropped_gradients.add(count, {"kernflow.accumulator.name": accumulator_name})


_NOT_TIMED = contextlib.nullcontext()


def checkpoint_timer(operation: str):
    """A context manager recording the duration of a checkpoint `operation` ("save", "restore").

    A shared no-op while metrics are off.
    """
    if not metrics_active():
        return _NOT_TIMED
    return _timed_checkpoint(operation)


@contextlib.contextmanager
def _timed_checkpoint(operation: str):
    attrs = {"kernflow.checkpoint.operation": operation}
    start = _perf_counter()
    try:
        yield
    except BaseException as e:
        attrs["error.type"] = type(e).__name__
        raise
    finally:
        instruments().checkpoint_duration.record(_perf_counter() - start, attrs)

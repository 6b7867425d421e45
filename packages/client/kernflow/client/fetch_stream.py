"""Large fetches on the client: RunStepStream (the master relays) and RunStepPull (the client pulls).

A step expected to fetch at least `grpc_session.STREAM_FETCH_BYTES` leaves every fetched value in
the rendezvous of the task that produced it. With **RunStepPull** (the default) the master answers
each fetch waiting on a task it reaches over gRPC with a `FetchLocation`, and the client pulls the
value from that worker itself with RecvTensor: one gRPC hop instead of two (worker -> master ->
client). Pulls run on a small thread pool while the calling thread keeps reading the master's
stream, so several tasks' fetches come concurrently and the master's error (say, a task died) is
seen while a pull still waits. A pull goes through the transport chosen for that worker
(`kernflow.core.runtime.transport`: "shm" when the worker runs on this host and shares its /dev/shm,
else "grpc", whose chunks arrive as raw bytes, are split without copying (`codec.split_content`) and
written once into the result array). With **RunStepStream** (when ``KERNFLOW_DIRECT_FETCH=0`` turns
direct pulls off) the master relays every chunk.

**Reachability and identity.** A location carries the address at which the *master* reaches the
task, which need not work from here (another network, a loopback address of the master's machine).
Before the first pull from an address the client asks the worker there for GetStatus (a
`PROBE_TIMEOUT_S` deadline) and checks that it is the task the location names, with the sending
device and its incarnation taken from the rendezvous key, so another process listening at the same
address (a local cluster of the client's own, a restarted task) is never pulled from. The same
GetStatus negotiates the transport (`kernflow.client.transports`). A loopback address is tried only
when the master's address is loopback too. The answer is remembered per (address, task, device,
incarnation, ``KERNFLOW_TRANSPORT``): a verified worker for `VERIFIED_TTL_S` or until a pull from it
fails, a failed check for `UNREACHABLE_TTL_S`, after which it is checked again in the background
(only the very first check of an address is on a step's path). A fetch on a task the client
cannot reach is relayed by the master on the same call (``relay``) once the step is done, so
reaching it costs no second step.

**Errors.** The master's error is the step's root cause and wins; a pull's error is raised when the
step itself succeeded (e.g. the producing worker died after the step, during the pull). Any failure
cancels the call and the pulls still running, and the master then frees the step's state.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import logging
import threading
import time

from opentelemetry import trace as _otel

from kernflow.core.framework import errors
from kernflow.core.runtime import transport as _transport
from kernflow.core.runtime.cancellation import CancellationManager
from kernflow.core.runtime.env import EnvVar
from kernflow.client import channels
from kernflow.client import codec
from kernflow.client import transports
from kernflow.client.worker_client import GrpcWorkerClient

__all__ = ["ENV_VAR", "PROBE_TIMEOUT_S", "VERIFIED_TTL_S", "UNREACHABLE_TTL_S", "enabled", "read_stream",
           "pull_step", "Unreachable", "check_reachable", "forget_reachability"]

_log = logging.getLogger(__name__)
_tracer = _otel.get_tracer("kernflow.client")

ENV_VAR = "KERNFLOW_DIRECT_FETCH"   # "0" (or false/no/off): the master relays every fetch
PROBE_TIMEOUT_S = 2.0
VERIFIED_TTL_S = 300.0
UNREACHABLE_TTL_S = 30.0
# A pull of a step without a timeout: as long as the master would wait for it (a day).
_NO_DEADLINE_S = 24 * 3600.0
_RUN_GRACE_S = 1.0
_MAX_POOL = 8
_MAX_REMEMBERED = 4096


_DIRECT_FETCH_VAR = EnvVar(ENV_VAR)


def enabled() -> bool:
    """Whether clients pull large fetches themselves (``KERNFLOW_DIRECT_FETCH``, default on)."""
    return _DIRECT_FETCH_VAR.get("1").strip().lower() not in ("0", "false", "no", "off")


# ---------------------------------------------------------------------------- assembly
class _Chunks:
    """The consecutive chunks of one fetch in a stream of ``(message, content)`` pairs."""

    def __init__(self, it, first):
        self._it = it
        self.index = first[0].fetch_index
        self.next = first          # the first item after this fetch's chunks, once iterated

    def __iter__(self):
        item = self.next
        while True:
            yield item
            item = next(self._it, None)
            if item is None or item[0].done or item[0].fetch_index != self.index:
                self.next = item
                return


def _value(chunks, name: str):
    value, is_dead = codec.assemble_recv_chunks(chunks)
    return _live(value, is_dead, name)


def _live(value, is_dead: bool, name: str):
    if is_dead:
        raise errors.InvalidArgumentError(None, None, f"Fetched tensor {name} was not computed "
                                          f"(it is on an untaken branch of a conditional)")
    return value


def _claim(i: int, fetches, seen: set, address: str) -> None:
    if not 0 <= i < len(fetches) or i in seen:
        raise errors.InternalError(None, None, f"master at {address} streamed fetch {i} out of order "
                                   f"({len(fetches)} fetches)")
    seen.add(i)


def _check_all(fetches, seen: set, address: str) -> None:
    if len(seen) != len(fetches):
        missing = [fetches[i] for i in range(len(fetches)) if i not in seen]
        raise errors.InternalError(None, None, f"master at {address} did not return {missing}")


def _metadata(done):
    return done.metadata if done.HasField("metadata") else None


def read_stream(responses, fetches, address: str):
    """Assembles the fetched values of a RunStepStream; returns (values, RunMetadata or None).

    Args:
        responses: ``(RunStepStreamResponse, content)`` pairs (`GrpcMasterClient.run_step_stream`).
        fetches: the fetched tensor names.
        address: the master's, for error messages.
    """
    it = iter(responses)
    out = [None] * len(fetches)
    seen: set = set()
    item = next(it, None)
    while item is not None and not item[0].done:
        chunks = _Chunks(it, item)
        _claim(chunks.index, fetches, seen, address)
        out[chunks.index] = _value(chunks, fetches[chunks.index])
        item = chunks.next
    if item is None:
        raise errors.DataLossError(None, None, f"RunStepStream from master at {address} ended early")
    _check_all(fetches, seen, address)
    for _ in it:   # let the call finish cleanly
        pass
    return out, _metadata(item[0])


# ---------------------------------------------------------------------------- reachability
class Unreachable(Exception):
    """The client cannot, or must not, pull from a location's address (the master relays instead)."""


# key -> (ok, valid until, the transport's name when ok, else why not)
_checked: dict[tuple, tuple[bool, float, str]] = {}
_checked_lock = threading.Lock()


def _host(address: str) -> str:
    return address.rpartition(":")[0].strip("[]").lower()


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "ip6-localhost", "::1", "0.0.0.0", "::") or host.startswith("127.")


def _sender(location) -> tuple[str, str]:
    """(sending device, its incarnation in hex) from the location's rendezvous key."""
    fields = location.rendezvous_key.split(";")
    return (fields[0], fields[1]) if len(fields) == 5 else ("", "")


def _key(location, master_address: str) -> tuple:
    device, incarnation = _sender(location)
    return (location.address, location.task, device, incarnation, _is_loopback(_host(master_address)),
            _transport.env_setting())


def check_reachable(location, master_address: str) -> _transport.Transport:
    """Returns the transport to pull `location`'s value through; raises `Unreachable` when the
    client may not pull from that worker.

    The GetStatus check is made once per (address, task, sending device, incarnation) and
    remembered; a failed one is repeated in the background once it expired (see the module
    docstring).
    """
    device, incarnation = _sender(location)
    key = _key(location, master_address)
    now = time.monotonic()
    hit = _checked.get(key)
    if hit is None or (hit[0] and now >= hit[1]):
        hit = _check(key, location, device, incarnation, master_address)
    elif not hit[0] and now >= hit[1]:
        # Checked again off the step's path (a firewalled address would cost every step that
        # asks a whole PROBE_TIMEOUT_S); until it answers, the master relays.
        with _checked_lock:
            _checked[key] = (False, now + PROBE_TIMEOUT_S + UNREACHABLE_TTL_S, hit[2])
        _executor().submit(_check, key, location, device, incarnation, master_address)
    if not hit[0]:
        raise Unreachable(hit[2])
    return _transport.get(hit[2]) if hit[2] else _transport.default()


def _check(key, location, device: str, incarnation: str, master_address: str):
    ok, why = _probe(location, device, incarnation, master_address)
    hit = (ok, time.monotonic() + (VERIFIED_TTL_S if ok else UNREACHABLE_TTL_S), why)
    with _checked_lock:
        if len(_checked) >= _MAX_REMEMBERED:
            _checked.clear()
        _checked[key] = hit
    if not ok:
        _log.info("fetches from %s at %s are relayed by the master: %s", location.task,
                  location.address, why)
    return hit


def forget_reachability() -> None:
    """Forgets every remembered check (tests; a client whose network changed)."""
    with _checked_lock:
        _checked.clear()


def _forget(location, master_address: str) -> None:
    """Forgets the check of `location`'s worker (a pull from it failed): the next pull checks again,
    and negotiates its transport again."""
    with _checked_lock:
        _checked.pop(_key(location, master_address), None)


def _probe(location, device: str, incarnation: str, master_address: str) -> tuple[bool, str]:
    """Asks the worker at the location for GetStatus: (True, the name of the transport to pull
    through) when it is the location's task and incarnation, else (False, why not)."""
    if _is_loopback(_host(location.address)) and not _is_loopback(_host(master_address)):
        return False, f"{location.address} is a loopback address on the master's machine"
    try:
        with transports.status_request() as (req, probes):
            st = GrpcWorkerClient(location.address, location.task).get_status(req, timeout=PROBE_TIMEOUT_S)
            chosen = transports.choose(st, probes).name
    except errors.OpError as e:
        return False, f"GetStatus failed: {e.message}"
    except Exception as e:  # noqa: BLE001 - a malformed address, ...: relay
        return False, f"GetStatus failed: {type(e).__name__}: {e}"
    task = f"/job:{st.job}/replica:0/task:{st.task}"
    if task != location.task:
        return False, f"the worker at {location.address} is {task}, not {location.task}"
    if device and not any(d.name == device and format(d.incarnation, "x") == incarnation
                          for d in st.device_attributes):
        return False, (f"the worker at {location.address} has no device {device} of incarnation "
                       f"{incarnation} (it restarted, or is another process)")
    return True, chosen


# ---------------------------------------------------------------------------- RunStepPull
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(_MAX_POOL, thread_name_prefix="kernflow-fetch")
    return _pool


class _Pull:
    """One fetch pulled from the worker at its location, on a pool thread; `cancel` from any thread."""

    def __init__(self, location, timeout_s: float, master_address: str):
        self.location = location
        self.timeout_s = timeout_s
        self.master_address = master_address
        self._cancellation = CancellationManager()
        self.future = _executor().submit(contextvars.copy_context().run, self._run)

    def _run(self):
        """Returns (array, is_dead); raises `Unreachable` (nothing was pulled) or an OpError."""
        loc = self.location
        transport = check_reachable(loc, self.master_address)
        if not channels.tracing_active():
            return self._recv(transport)
        with _tracer.start_as_current_span("RecvTensor", kind=_otel.SpanKind.CLIENT) as span:
            span.set_attribute("kernflow.task", loc.task)
            span.set_attribute("kernflow.step_id", loc.step_id)
            span.set_attribute("kernflow.rendezvous_key", loc.rendezvous_key)
            span.set_attribute("kernflow.direct", True)
            span.set_attribute("kernflow.transport", transport.name)
            value, is_dead = self._recv(transport)
            span.set_attribute("kernflow.bytes", 0 if value is None else int(value.nbytes))
            return value, is_dead

    def _recv(self, transport):
        loc = self.location
        peer = GrpcWorkerClient(loc.address, loc.task)
        try:
            return transport.recv(peer, loc.step_id, loc.rendezvous_key, self.timeout_s, self._cancellation)
        except errors.OpError:
            if not self._cancellation.is_cancelled:
                _forget(loc, self.master_address)
            raise

    def cancel(self) -> None:
        self._cancellation.cancel(errors.CancelledError(
            None, None, f"pull of {self.location.rendezvous_key!r} cancelled"))
        self.future.cancel()


def pull_step(master, request, fetches, address: str):
    """Runs one step with RunStepPull; returns (values, RunMetadata or None).

    Args:
        master: the `GrpcMasterClient`.
        request: the `RunStepRequest`.
        fetches: the fetched tensor names (``request.fetch``).
        address: the master's, for error messages and the loopback rule.

    Raises:
        The master's error for the step; otherwise a pull's (the fetch's task failed mid-pull...).
    """
    timeout_ms = request.options.timeout_in_ms
    pull_timeout_s = timeout_ms / 1000.0 + _RUN_GRACE_S if timeout_ms > 0 else _NO_DEADLINE_S
    call = master.run_step_pull(request)
    pulls: dict[int, _Pull] = {}
    out = [None] * len(fetches)
    seen: set = set()
    complete = False
    try:
        it = iter(call)
        item = next(it, None)
        while item is not None and not item[0].done:
            msg = item[0]
            _claim(msg.fetch_index, fetches, seen, address)
            if msg.HasField("location"):   # pulled from its worker while the stream goes on
                pulls[msg.fetch_index] = _Pull(msg.location, pull_timeout_s, address)
                item = next(it, None)
                continue
            chunks = _Chunks(it, item)
            out[chunks.index] = _value(chunks, fetches[chunks.index])
            item = chunks.next
        if item is None:
            raise errors.DataLossError(None, None, f"RunStepPull from master at {address} ended early")
        _check_all(fetches, seen, address)
        done = item[0]
        relays = []
        for i, p in pulls.items():
            try:
                value, is_dead = p.future.result()
            except Unreachable:
                relays.append(i)
                continue
            out[i] = _live(value, is_dead, fetches[i])
        for i in relays:   # all asked for at once: each relayed fetch then ends where the next begins
            call.relay(i)
        call.close()
        item = next(it, None)
        for i in relays:
            if item is None or item[0].done or item[0].fetch_index != i:
                raise errors.DataLossError(None, None, f"RunStepPull from master at {address} did not "
                                           f"relay fetch {fetches[i]!r}")
            chunks = _Chunks(it, item)
            out[i] = _value(chunks, fetches[i])
            item = chunks.next
        if item is not None:
            raise errors.InternalError(None, None, f"master at {address} sent more than was asked for")
        complete = True
        return out, _metadata(done)
    finally:
        if not complete:
            call.cancel()
            for p in pulls.values():
                p.cancel()

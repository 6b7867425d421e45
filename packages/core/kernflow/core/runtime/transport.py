"""Transports: how a tensor produced on one task reaches the task (or client) that receives it.

A value that a `_Send` stored in its step's rendezvous on the *producer* task is pulled by the
*consumer* (a `_Recv` on another worker, or a client taking a large fetch straight from the worker)
through a transport. Transports are plugins: each is registered by name, with a factory and a
priority, through the hook `kernflow_register_transports` (``registry.register(name, factory,
priority=...)``); kernflow-client registers its "grpc" and "shm" transports there like any third
party would. A process makes one instance of each (`transports`).

**Selection** (`select`, the one place the rule is written). For each producer task, the consumer
picks once the first transport, highest priority first (ties by name), that

1. this process has and may use (``KERNFLOW_TRANSPORT``, below),
2. the producer serves (its GetStatus lists it, with the transport's answer to the consumer's probe),
3. runs between the two tasks' hosts: a `Transport.same_host_only` one (shm) only when both report
   the same `host_id`, and
4. whose `Probe` accepts the producer's answer (shm: the producer read back a file the consumer
   wrote in its /dev/shm, which proves a shared /dev/shm, and runs as the same user).

Otherwise it is "grpc" (`DEFAULT_TRANSPORT`), which every task serves. Built-in priorities: shm 100,
grpc 0. The consumer remembers the choice per peer and negotiates again after a failed transfer
(`kernflow.client.transports.PeerTransports`, and the direct-fetch path's reachability check).

**The producer's side.** A transport that needs the producer's help gets it through RecvTensor: the
consumer's call names the transport and carries its request, the producer's worker hands the value
to that transport's `Transport.serve`, and sends its small answer instead of the tensor's bytes -
or, when `serve` declines (a string or small tensor for shm), the tensor in-band as for "grpc". A
transport therefore carries only what it is good at and the consumer always gets the value.

``KERNFLOW_TRANSPORT=grpc`` (or a comma-separated list of names) limits the transports a process
chooses and offers to those listed ("grpc" is always allowed): benchmarks and tests force gRPC with
it. ``KERNFLOW_HOST_ID`` replaces `host_id` (tests simulate tasks on different hosts with it).
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import threading
from collections.abc import Mapping, Sequence

from kernflow.core.framework import errors
from kernflow.core.runtime.env import EnvVar

__all__ = ["Transport", "Probe", "DEFAULT_TRANSPORT", "TRANSPORT_ENV", "HOST_ID_ENV", "transports",
           "allowed", "get", "default", "select", "open_probes", "needs_negotiation", "env_setting", "named_in",
           "host_id"]

_log = logging.getLogger(__name__)

DEFAULT_TRANSPORT = "grpc"
TRANSPORT_ENV = "KERNFLOW_TRANSPORT"
HOST_ID_ENV = "KERNFLOW_HOST_ID"


class Probe:
    """A consumer's challenge to a producer for one transport, alive while they negotiate.

    Args:
        challenge: the bytes sent to the producer in GetStatus (`Transport.offer` gets them).

    The default accepts any answer; a transport that must verify the producer subclasses it.
    """

    def __init__(self, challenge: bytes = b""):
        self.challenge = challenge

    def accepts(self, params: bytes) -> bool:
        """Whether the producer's offer (its answer to `challenge`) lets this process use the transport."""
        return True

    def close(self) -> None:
        """Releases what the challenge needed (shm: removes its probe file). Called once, always."""


class Transport:
    """One way of moving a rendezvous value from its producer task to a consumer.

    Both halves live in one object: a process is a consumer (`probe`, `recv`) and, when it runs a
    worker, a producer (`offer`, `serve`). Methods are called from many threads at once.

    Attributes:
        name: the registered name (set by `transports`).
        same_host_only: the transport works only between processes of one host (see `select`).
    """

    name = ""
    same_host_only = False

    # ------------------------------------------------------------------ negotiation
    def probe(self) -> Probe:
        """Consumer: the challenge to send a producer before choosing this transport for it."""
        return Probe()

    def offer(self, challenge: bytes) -> bytes | None:
        """Producer, in GetStatus: the answer to a consumer's `challenge` (b"" when it sent none).

        Returns:
            The offer's parameters (what the consumer's `Probe.accepts` checks), or None when this
            task does not serve the transport (to that consumer).
        """
        return b""

    # ------------------------------------------------------------------ transfers
    def recv(self, peer, step_id: int, key: str, timeout: float | None, cancellation=None):
        """Consumer: pulls the value of rendezvous `key` of step `step_id` from the producer.

        Args:
            peer: the producer task's worker client (a `GrpcWorkerClient`, or anything with its
                ``recv_tensor_raw`` / ``recv_tensor`` and ``get_status`` methods, such as an
                in-process `Worker`).
            step_id, key: what to pull.
            timeout: seconds the whole transfer may take; None: no deadline.
            cancellation: a `CancellationManager` whose cancel must end the transfer at once (the
                step's, on a worker), or None.

        Returns:
            (value, is_dead): a host numpy array (or a value already in the receiving device's
            memory), None when dead.

        Raises:
            The TF error classes: UnavailableError when the producer is gone, DeadlineExceededError
            when `timeout` passed, the producer's own error (AbortedError for an aborted step...),
            DataLossError for a malformed answer.
        """
        raise NotImplementedError(f"transport {self.name!r} cannot receive")

    def serve(self, step_id: int, key: str, value, is_dead: bool, request: bytes, cancellation):
        """Producer: carries `value` to the consumer that asked through RecvTensor with `request`.

        Args:
            step_id, key: what the consumer pulls.
            value, is_dead: the value the step's `_Send` stored (a numpy array, a device array, a
                `codec.WireSnapshot`...); None when dead.
            request: the consumer's `RecvTensorRequest.transport_request`.
            cancellation: the step's `CancellationManager`: what the transport holds for the step
                must be released when it is cancelled (the step ended or was aborted).

        Returns:
            The answer sent to the consumer (`RecvTensorResponse.transport_payload`); or an iterable
            of answers, sent one message each as they are produced (shm reports its progress that
            way; a generator is closed if the consumer goes away); or None to send the value
            in-band instead.

        Raises:
            A TF error class, which ends the consumer's RecvTensor with it.
        """
        return None

    def close(self) -> None:
        """Releases what the transport holds in this process (at exit; `reset_for_tests`)."""

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}>"


# ---------------------------------------------------------------------------- this process's transports
_lock = threading.Lock()
_instances: list[Transport] = []
_built_from = None   # the registries `_instances` were made from


def transports() -> list[Transport]:
    """This process's instance of every registered transport, highest priority first.

    Raises:
        NotFoundError: if no "grpc" transport is registered (install kernflow-client).
    """
    from kernflow.core.plugins import manager
    regs = manager.registries()
    if _built_from is regs:
        return _instances
    return _build(regs)


def _build(regs) -> list[Transport]:
    global _instances, _built_from
    with _lock:
        if _built_from is regs:
            return _instances
        made = []
        for name, factory in regs.transports.by_priority():
            t = factory()
            t.name = name
            made.append(t)
        if not any(t.name == DEFAULT_TRANSPORT for t in made):
            raise errors.NotFoundError(None, None, f"no {DEFAULT_TRANSPORT!r} transport is registered "
                                       f"(transports: {', '.join(t.name for t in made) or 'none'}); "
                                       f"install kernflow-client")
        old, _instances, _built_from = _instances, made, regs
    for t in old:   # (the registries were rebuilt: tests)
        t.close()
    return made


_TRANSPORT_VAR = EnvVar(TRANSPORT_ENV)


def env_setting() -> str:
    """The raw ``KERNFLOW_TRANSPORT`` value ("" when unset): part of every cached choice's key."""
    return _TRANSPORT_VAR.get().strip()


@functools.lru_cache(maxsize=64)
def named_in(setting: str) -> frozenset:
    """The transport names a ``KERNFLOW_TRANSPORT`` value lists (parsed once per distinct value:
    it is asked on every call to a worker)."""
    return frozenset(n.strip() for n in setting.split(",") if n.strip())


def allowed() -> list[Transport]:
    """The transports this process may choose and offer now, highest priority first.

    All of them, or with ``KERNFLOW_TRANSPORT=a,b`` those named (and always "grpc").
    """
    every = transports()
    setting = env_setting()
    if not setting:
        return every
    names = named_in(setting) | {DEFAULT_TRANSPORT}
    unknown = names - {t.name for t in every}
    if unknown:
        _log.warning("%s names unknown transports %s (registered: %s)", TRANSPORT_ENV, sorted(unknown),
                     ", ".join(t.name for t in every))
    return [t for t in every if t.name in names]


def get(name: str) -> Transport:
    """This process's transport called `name`.

    Raises:
        NotFoundError: listing the registered transports.
    """
    for t in transports():
        if t.name == name:
            return t
    raise errors.NotFoundError(None, None, f"no transport named {name!r}; registered: "
                               f"{', '.join(repr(t.name) for t in transports())}")


def default() -> Transport:
    """The "grpc" transport: what two tasks use when nothing better reaches."""
    return get(DEFAULT_TRANSPORT)


def needs_negotiation() -> bool:
    """Whether a peer must be asked at all: False when "grpc" is the only transport allowed here."""
    return any(t.name != DEFAULT_TRANSPORT for t in allowed())


def open_probes() -> dict[str, Probe]:
    """A `Probe` of every allowed transport but "grpc", by name; the caller closes each.

    A transport whose `probe` fails is left out (and so never chosen), with the error logged.
    """
    probes: dict[str, Probe] = {}
    try:
        for t in allowed():
            if t.name == DEFAULT_TRANSPORT:
                continue
            try:
                probes[t.name] = t.probe()
            except Exception:  # noqa: BLE001 - one broken transport must not stop the others
                _log.exception("transport %r failed to make its probe; not chosen", t.name)
    except BaseException:
        for p in probes.values():
            p.close()
        raise
    return probes


def select(peer_host_id: str, offers: Mapping[str, bytes], probes: Mapping[str, Probe],
           candidates: Sequence[Transport] | None = None) -> Transport:
    """Chooses the transport from this process to a producer (the rule of the module docstring).

    Args:
        peer_host_id: the producer's `host_id` (GetStatus), "" when unknown.
        offers: name -> parameters of each transport the producer serves (GetStatus).
        probes: the probes this process sent it (`open_probes`), by name: a transport without
            one (its probe failed) is not chosen ("grpc" needs none).
        candidates: the transports to consider, highest priority first (default: `allowed()`).

    Returns:
        The first candidate both ends serve that reaches the peer, else the "grpc" transport.
    """
    local = host_id()
    for t in candidates if candidates is not None else allowed():
        params = offers.get(t.name)
        if params is None:
            continue
        if t.same_host_only and (not peer_host_id or peer_host_id != local):
            continue
        if t.name != DEFAULT_TRANSPORT and not _accepts(t, probes.get(t.name), params):
            continue
        return t
    return default()


def _accepts(t: Transport, probe: Probe | None, params: bytes) -> bool:
    if probe is None:   # (its probe failed, or the caller made none)
        return False
    try:
        return bool(probe.accepts(params))
    except Exception:  # noqa: BLE001 - a broken transport is not chosen
        _log.exception("transport %r failed to check an offer; not chosen", t.name)
        return False


def reset_for_tests() -> None:
    """Closes and forgets this process's transports (made again from the registries on next use)."""
    global _instances, _built_from
    with _lock:
        old, _instances, _built_from = _instances, [], None
    for t in old:
        t.close()


# ---------------------------------------------------------------------------- the host
_machine_id: str | None = None


def host_id() -> str:
    """Names the host (kernel instance) this process runs on.

    ``KERNFLOW_HOST_ID`` when set; else "boot:" and the kernel's boot id (random per boot: equal
    only for processes under one running kernel, whichever container they are in), else "machine:"
    and /etc/machine-id, else a random id of this process (equal to no other process's). Equal ids
    do not prove a shared /dev/shm (containers of one host may each have their own): that is what
    the shm transport's probe checks.
    """
    override = os.environ.get(HOST_ID_ENV, "").strip()
    if override:
        return override
    global _machine_id
    if _machine_id is None:
        _machine_id = _read_machine_id()
    return _machine_id


def _read_machine_id() -> str:
    for prefix, path in (("boot", "/proc/sys/kernel/random/boot_id"), ("machine", "/etc/machine-id"),
                         ("machine", "/var/lib/dbus/machine-id")):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read(128).strip()
        except (OSError, ValueError):
            continue
        if text:
            return f"{prefix}:{text}"
    return f"process:{os.getpid()}:{secrets.token_hex(16)}"

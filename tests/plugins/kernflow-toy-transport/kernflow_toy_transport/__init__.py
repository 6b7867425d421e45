"""A third-party kernflow transport: "toy-inproc" hands tensors between tasks of one process in memory.

Shipped as any outside package would (one entry-point line in pyproject.toml and one hook), and
deliberately not installed in the development environment: tests register it on a plugin manager of
their own (`tests/test_transports.py`), so no other test's tasks choose it.

It shows every part of the interface (`kernflow.core.runtime.transport.Transport`):

- negotiation: the consumer's probe and the producer's offer carry a token of the process, so the
  transport is chosen only when both tasks run in this very process;
- the producer's side: `serve` parks the value in a process-wide table under a fresh ticket and answers
  with the ticket (RecvTensor carries only that);
- the consumer's side: `recv` makes the RecvTensor call (`kernflow.client.transports.recv_call`) and
  takes the value from the table, or assembles it when the producer answered in-band.
"""

import secrets
import threading

from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2
from kernflow.client.transports import recv_call
from kernflow.core.framework import errors
from kernflow.core.plugins import hookimpl
from kernflow.core.runtime.transport import Probe, Transport

__all__ = ["InProcessTransport", "NAME", "PROCESS_TOKEN"]

NAME = "toy-inproc"
PROCESS_TOKEN = secrets.token_hex(16).encode("ascii")

_lock = threading.Lock()
_parked: dict[bytes, tuple] = {}    # ticket -> (value, is_dead)


class _SameProcess(Probe):
    def accepts(self, params: bytes) -> bool:
        return params == PROCESS_TOKEN


class InProcessTransport(Transport):
    """Tensors between tasks of one process, by reference. `served` and `received` count transfers."""

    def __init__(self):
        self.served = 0
        self.received = 0

    def probe(self) -> Probe:
        return _SameProcess()

    def offer(self, challenge: bytes) -> bytes:
        return PROCESS_TOKEN

    def serve(self, step_id, key, value, is_dead, request, cancellation):
        ticket = secrets.token_hex(8).encode("ascii")
        value = None if is_dead else codec.to_host_array(value).copy()
        token = cancellation.register(lambda err: _parked.pop(ticket, None))
        if token is None:
            raise cancellation.error
        with _lock:
            _parked[ticket] = (value, is_dead)
            self.served += 1
        return ticket

    def recv(self, peer, step_id, key, timeout, cancellation=None):
        req = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=key, transport=self.name)
        with recv_call(peer, req, timeout, cancellation) as responses:
            items = list(responses)
        if not items or not items[0][0].transport_payload:
            return codec.assemble_recv_chunks(items)
        with _lock:
            parked = _parked.pop(items[0][0].transport_payload, None)
            self.received += 1
        if parked is None:
            raise errors.UnavailableError(None, None, f"{NAME}: the value of {key!r} is gone "
                                                      f"(its step ended)")
        return parked


@hookimpl
def kernflow_register_transports(registry):
    registry.register(NAME, InProcessTransport, priority=200)

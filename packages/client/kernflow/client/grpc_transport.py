"""The "grpc" transport: the tensor's bytes in-band, in the RecvTensor stream itself.

Every task serves it and every consumer can use it, so it is what two tasks use when nothing better
reaches (`kernflow.core.runtime.transport.DEFAULT_TRANSPORT`). The producer's worker sends 1 MiB
chunks it serialized itself (`codec.encode_recv_chunks`: the payload copied once, not at all for a
variable's snapshot); the consumer splits each chunk without copying (`codec.split_content`) and
writes it once into the preallocated result (`codec.assemble_recv_chunks`).
"""

from __future__ import annotations

from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2
from kernflow.client.transports import recv_call
from kernflow.core.runtime.transport import Transport

__all__ = ["GrpcTransport"]


class GrpcTransport(Transport):
    """RecvTensor with the tensor in-band; reaches every task."""

    def recv(self, peer, step_id: int, key: str, timeout: float | None, cancellation=None):
        """See `Transport.recv`: one RecvTensor call, assembled as the chunks arrive."""
        req = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=key)
        with recv_call(peer, req, timeout, cancellation) as responses:
            return codec.assemble_recv_chunks(responses)

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
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_codec
from kernflow.core.runtime.transport import Transport

__all__ = ["GrpcTransport"]


class GrpcTransport(Transport):
    """RecvTensor with the tensor in-band; reaches every task."""

    def recv(self, peer, step_id: int, key: str, timeout: float | None, cancellation=None):
        """See `Transport.recv`: one RecvTensor call, assembled as the chunks arrive."""
        req = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=key)
        with recv_call(peer, req, timeout, cancellation) as responses:
            return codec.assemble_recv_chunks(responses)

    def recv_many(self, peer, step_id: int, keys, timeout: float | None, cancellation=None):
        """Pulls several keys of one step from one producer in one RecvTensor call.

        Yields ``(index into keys, value, is_dead)`` as each value arrives (in the order the producer
        sent them: a value is usable while later ones are still being produced).

        Raises:
            As `recv`; DataLossError when the stream ends before every key's value came.
        """
        req = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=keys[0],
                                           more_rendezvous_keys=keys[1:])
        seen = set()
        with recv_call(peer, req, timeout, cancellation) as responses:
            for i, items in split_values(responses, len(keys)):
                if i in seen:
                    raise errors.DataLossError(None, None, f"RecvTensor sent the value of {keys[i]!r} twice")
                seen.add(i)
                value, is_dead = codec.assemble_recv_chunks(items)
                yield i, value, is_dead
        if len(seen) != len(keys):
            missing = [k for i, k in enumerate(keys) if i not in seen]
            raise errors.DataLossError(None, None, f"RecvTensor ended before the values of {missing}")


def split_values(responses, n: int):
    """Splits a several-key RecvTensor stream of ``(message, content)`` pairs into ``(index, pairs)``
    per value: a value starts at a message with `key_number` (1 + its key's index) and is yielded as
    soon as its last byte (or string) is in, never waiting for the next value (which may be produced
    only after this one is used: a step's weights before the control edges back from its update)."""
    it = iter(responses)
    for item in it:
        first = item[0]
        k = first.key_number
        if not 0 < k <= n:
            raise errors.DataLossError(None, None, f"RecvTensor of {n} keys: a value starts without a "
                                       f"valid key_number ({k})")
        items = [item]
        if first.is_dead:
            yield k - 1, items
            continue
        strings = first.dtype == _STRING
        want = tensor_codec.num_elements(tensor_codec.shape_of(first.shape)) if strings else int(first.total_bytes)
        have = len(first.string_val) if strings else len(item[1])
        while have < want:
            nxt = next(it, None)
            if nxt is None:
                break          # (assembling reports the missing bytes)
            if nxt[0].key_number:
                raise errors.DataLossError(None, None, f"RecvTensor: the value of key {k - 1} ended "
                                           f"after {have} of {want} {'strings' if strings else 'bytes'}")
            items.append(nxt)
            have += len(nxt[0].string_val) if strings else len(nxt[1])
        yield k - 1, items


_STRING = _dtypes.string.as_datatype_enum

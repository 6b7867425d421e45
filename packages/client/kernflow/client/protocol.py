"""The wire protocol's version: one number that every peer advertises and its caller checks.

The client, master and worker packages ship in lockstep, so a peer speaking another protocol is
refused with a clear error instead of being served through fallbacks. A worker advertises its
version in GetStatusResponse (the master checks it when it waits for a task in CreateSession and
whenever it gathers devices); the master advertises its own in CreateSessionResponse (the client
checks it). Bump `PROTOCOL_VERSION` with any change a peer of the previous version would get wrong.
"""

from __future__ import annotations

from kernflow.core.framework import errors

__all__ = ["CLIENT_DEVICE", "DERIVED", "PROTOCOL_VERSION", "check_peer"]

# Version 2: values cross tasks by push (PushTensors), not by the receiver's RecvTensor.
PROTOCOL_VERSION = 2

# The receiving end of the fetches a master (or its client) pulls from the task that made them
# (RunStepStream, RunStepPull): a device of no task, so a `_Send` to it keeps its value for
# RecvTensor instead of pushing it anywhere.
CLIENT_DEVICE = "/job:kernflow_master/replica:0/task:0/device:CPU:0"

# Starts the message of an error a task got from another task whose part of the step failed (TF's
# marker of a derived status): the master reports the root error, not such copies of it.
DERIVED = "[_Derived_]"


def check_peer(peer_version: int, peer: str) -> None:
    """Raises unless the peer speaks this process's protocol (`PROTOCOL_VERSION`).

    Args:
        peer_version: the version the peer advertised (0: it has no version field at all).
        peer: names the peer for the message, e.g. "task /job:ps/replica:0/task:0".

    Raises:
        FailedPreconditionError: naming the peer and both versions.
    """
    if peer_version != PROTOCOL_VERSION:
        theirs = peer_version or "0 (it sent none)"
        raise errors.FailedPreconditionError(
            None, None, f"{peer} speaks kernflow protocol version {theirs}, this process speaks version "
            f"{PROTOCOL_VERSION}: run the same kernflow release on every task")

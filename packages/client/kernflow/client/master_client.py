"""`GrpcMasterClient`: the master's six RPCs over gRPC, with deadlines and TF error classes.

Methods take and return `master_pb2` messages, like the in-process `kernflow.master.master.Master`.
Every call but RunStep has a deadline (`default_timeout_s` unless `timeout` is given); RunStep waits
for the caller's `timeout`, or the request's `options.timeout_in_ms` plus a grace period, or without
a deadline when the step has none (a step may block on a queue for as long as the user wants).
"""

from __future__ import annotations

import queue

import grpc

from kernflow.core.framework import errors
from kernflow.client import channels
from kernflow.client import codec
from kernflow.client import local_channel
from kernflow.client.protobuf import master_pb2
from kernflow.client.protobuf import master_pb2_grpc
from kernflow.client.protobuf import worker_pb2_grpc
from kernflow.client.rpc_errors import StreamCall, error_from_rpc, invoke
from kernflow.client.tensor_requests import nest, response_parser, serialize

__all__ = ["GrpcMasterClient", "PullCall", "DEFAULT_TIMEOUT_S", "CLOSE_TIMEOUT_S", "RUN_GRACE_S"]

DEFAULT_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 10.0
LIST_DEVICES_TIMEOUT_S = 10.0
# RunStep's deadline exceeds the step's own timeout by this much, so that the master's error
# (naming what the step was waiting for) arrives before gRPC's bare DEADLINE_EXCEEDED.
RUN_GRACE_S = 1.0


class GrpcMasterClient:
    """Calls a master over a shared gRPC channel.

    Args:
        address: "host:port" of the master's gRPC server.
        default_timeout_s: the deadline of every call but RunStep.
    """

    def __init__(self, address: str, default_timeout_s: float = DEFAULT_TIMEOUT_S):
        self.address = address
        self.default_timeout_s = float(default_timeout_s)
        channels.get_channel(address)

    @property
    def _stub(self) -> master_pb2_grpc.MasterServiceStub:
        return channels.get_stub(self.address, master_pb2_grpc.MasterServiceStub)

    def __repr__(self):
        return f"GrpcMasterClient({self.address!r})"

    def _call(self, method: str, request, timeout):
        return invoke(self._stub, method, request, timeout,
                      lambda: f"{method} on master at {self.address}", channels.outgoing_metadata())

    def _timeout(self, timeout):
        return self.default_timeout_s if timeout is None else timeout

    def create_session(self, request: master_pb2.CreateSessionRequest,
                       timeout: float | None = None) -> master_pb2.CreateSessionResponse:
        """Creates a session holding `request.graph_def`; returns its handle and graph version."""
        return self._call("CreateSession", request, self._timeout(timeout))

    def extend_session(self, request: master_pb2.ExtendSessionRequest,
                       timeout: float | None = None) -> master_pb2.ExtendSessionResponse:
        """Adds the nodes created since `request.current_graph_version` to a session's graph."""
        return self._call("ExtendSession", request, self._timeout(timeout))

    def run_step(self, request: master_pb2.RunStepRequest,
                 timeout: float | None = None) -> master_pb2.RunStepResponse:
        """Runs one step; None `timeout` means the request's timeout plus grace, else no deadline.

        Returns:
            The `RunStepResponse`; a `tensor_requests.SplitMessage` of it when it holds a large
            value, whose bytes stay in the received buffer (`tensor_requests.decode(resp, "tensor")`).
        """
        if timeout is None and request.options.timeout_in_ms > 0:
            timeout = request.options.timeout_in_ms / 1000.0 + RUN_GRACE_S
        what = self._run_step_what
        local = local_channel.route(self.address, request, self._worker_status)
        if local is not None:   # a task server on this host: over its socket, not gRPC
            return _RUN_STEP_RESPONSE(local[0].unary("RunStep", local[1], timeout, what,
                                                     channels.outgoing_metadata()))
        return invoke(channels.get_stub(self.address, _RawStreamStub), "RunStep", request, timeout,
                      what, channels.outgoing_metadata())

    def _run_step_what(self) -> str:
        return f"RunStep on master at {self.address}"

    def _worker_status(self, request, timeout):
        """GetStatus of the worker service at this address, over gRPC: how the same-host channel of
        a task server (master and worker on one port) is negotiated. A master alone has no worker
        service; the failed negotiation then leaves RunStep on gRPC for a while
        (`local_channel.FAILED_TTL_S`)."""
        return invoke(channels.get_stub(self.address, worker_pb2_grpc.WorkerServiceStub), "GetStatus", request,
                      timeout, f"GetStatus at {self.address}", channels.outgoing_metadata())

    def run_step_stream(self, request: master_pb2.RunStepRequest, timeout: float | None = None):
        """Runs one step, the fetched values streaming back in chunks (large fetches).

        Deadline as `run_step`. Returns an iterator of ``(RunStepStreamResponse, content)`` pairs:
        the message without its ``content``, which is a memoryview of the received bytes
        (`codec.split_content`: the payload is not copied until it is assembled). The chunks of
        each fetch come in turn, then a message with ``done``. Errors, also midway, are raised as
        TF error classes; dropping the iterator early cancels the call (and the step).
        """
        if timeout is None and request.options.timeout_in_ms > 0:
            timeout = request.options.timeout_in_ms / 1000.0 + RUN_GRACE_S
        what = f"RunStepStream on master at {self.address}"
        try:
            stub = channels.get_stub(self.address, _RawStreamStub)
            call = stub.RunStepStream(request, timeout=timeout, metadata=channels.outgoing_metadata())
        except grpc.RpcError as e:
            raise error_from_rpc(e, what) from None
        except ValueError as e:  # closed channel
            raise errors.UnavailableError(None, None, f"{what} is unavailable: {e}") from None
        return _split(StreamCall(call, what))

    def run_step_pull(self, request: master_pb2.RunStepRequest, timeout: float | None = None) -> "PullCall":
        """Starts a RunStepPull: a step whose remotely produced fetches the caller pulls itself.

        Deadline as `run_step`. Returns a `PullCall`: iterating it gives the master's messages as
        ``(RunStepStreamResponse, content)`` pairs (locations, chunks of the fetches the master
        streams, ``done``, then chunks of relayed fetches); `relay` asks for a located fetch, and
        `close` ends the caller's side (the master then frees the step's state).
        """
        if timeout is None and request.options.timeout_in_ms > 0:
            timeout = request.options.timeout_in_ms / 1000.0 + RUN_GRACE_S
        what = f"RunStepPull on master at {self.address}"
        outbox: queue.SimpleQueue = queue.SimpleQueue()
        try:
            stub = channels.get_stub(self.address, _RawStreamStub)
            call = stub.RunStepPull(_requests(nest(master_pb2.RunStepPullRequest(), "step", request),
                                              outbox),
                                    timeout=timeout, metadata=channels.outgoing_metadata())
        except grpc.RpcError as e:
            raise error_from_rpc(e, what) from None
        except ValueError as e:  # closed channel
            raise errors.UnavailableError(None, None, f"{what} is unavailable: {e}") from None
        return PullCall(call, outbox, what)

    def close_session(self, request: master_pb2.CloseSessionRequest,
                      timeout: float | None = None) -> master_pb2.CloseSessionResponse:
        """Closes a session (its partitions are deregistered, its state freed)."""
        return self._call("CloseSession", request, CLOSE_TIMEOUT_S if timeout is None else timeout)

    def list_devices(self, request: master_pb2.ListDevicesRequest | None = None,
                     timeout: float | None = None) -> master_pb2.ListDevicesResponse:
        """Lists the devices of the cluster (the master's own and every worker's)."""
        return self._call("ListDevices", request or master_pb2.ListDevicesRequest(),
                          LIST_DEVICES_TIMEOUT_S if timeout is None else timeout)

    def reset(self, request: master_pb2.ResetRequest | None = None,
              timeout: float | None = None) -> master_pb2.ResetResponse:
        """Clears resource containers on every worker (all when the request names none)."""
        return self._call("Reset", request or master_pb2.ResetRequest(), self._timeout(timeout))

    def close(self) -> None:
        """Nothing to release: the channel is shared per address (see `channels.close_all`)."""



# RunStep's responses keep the fetched values' bytes where they were received (`tensor_requests.split`).
_RUN_STEP_RESPONSE = response_parser(master_pb2.RunStepResponse, ("tensor",))


class _RawStreamStub:
    """RunStep, RunStepStream and RunStepPull on a channel: their requests may be `SplitMessage`s
    (`tensor_requests.serialize`), RunStep's response is split (`_RUN_STEP_RESPONSE`), the streams'
    responses are left as bytes (cached by `channels.get_stub`)."""

    def __init__(self, channel):
        self.RunStep = channel.unary_unary(
            "/kernflow.client.protobuf.MasterService/RunStep",
            request_serializer=serialize, response_deserializer=_RUN_STEP_RESPONSE)
        self.RunStepStream = channel.unary_stream(
            "/kernflow.client.protobuf.MasterService/RunStepStream",
            request_serializer=serialize, response_deserializer=None)
        self.RunStepPull = channel.stream_stream(
            "/kernflow.client.protobuf.MasterService/RunStepPull",
            request_serializer=serialize, response_deserializer=None)


_CLOSE = None


def _requests(first, outbox: queue.SimpleQueue):
    """A RunStepPull's request stream: `first`, then what `PullCall` puts in `outbox` until `_CLOSE`."""
    yield first
    while True:
        item = outbox.get()
        if item is _CLOSE:
            return
        yield item


class PullCall:
    """A RunStepPull in flight (`GrpcMasterClient.run_step_pull`).

    Iterate it once for the master's messages; errors (also midway) are raised as TF error classes.
    The caller's side of the call is closed when iteration ends, however it ends, so the thread
    gRPC uses to send the requests never waits forever.
    """

    def __init__(self, call, outbox: queue.SimpleQueue, what: str):
        self._call = call
        self._outbox = outbox
        self._what = what

    def __iter__(self):
        try:
            yield from _split(StreamCall(self._call, self._what))
        finally:
            self._outbox.put(_CLOSE)

    def relay(self, index: int) -> None:
        """Asks the master to pull located fetch `index` and stream it on this call."""
        self._outbox.put(master_pb2.RunStepPullRequest(relay=index))

    def close(self) -> None:
        """Ends the caller's side: every value has arrived (the master then frees the step)."""
        self._outbox.put(_CLOSE)

    def cancel(self) -> None:
        """Cancels the call (and so the step, if it still runs)."""
        self._outbox.put(_CLOSE)
        self._call.cancel()


def _split(raw):
    for buf in raw:
        yield codec.split_content(buf, master_pb2.RunStepStreamResponse)

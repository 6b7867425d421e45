"""`GrpcWorkerClient`: the worker interface (`kernflow.worker.worker.Worker`'s methods) over gRPC.

Every method takes and returns the `worker_pb2` messages, exactly like the in-process `Worker`, so
the master (and workers pulling tensors from each other) can hold either; like the `Worker`'s,
a RunGraph response holding a large value is a `tensor_requests.SplitMessage` (the value's bytes
left where they were received: read them with `tensor_requests.decode(resp, "recv")`).

Each call has a deadline: `timeout` if given, else the method's default (5 s for GetStatus,
`default_timeout_s` for the management calls). RunGraph and RecvTensor wait as long as the step may
run: the caller's `timeout` (RunGraph falls back to the request's `timeout_in_ms` plus a grace
period), and no deadline when the step has none (the master's health checks and the channel's
keepalive end such calls when a peer dies). Failures are raised as TF error classes naming the
worker (`rpc_errors.error_from_rpc`).

Every call carries `channels.outgoing_metadata()` (the cluster token, the trace context), also on the
same-host channel (whose own token, handed out only to callers with the cluster token, admits it).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from kernflow.core.framework import errors
from kernflow.client import channels
from kernflow.client import graph_stream
from kernflow.client import limits
from kernflow.client import local_channel
from kernflow.client.protobuf import worker_pb2
from kernflow.client.protobuf import worker_pb2_grpc
from kernflow.client.rpc_errors import StreamCall, error_from_rpc, invoke
from kernflow.client.tensor_requests import SplitMessage, response_parser, serialize

__all__ = ["GrpcWorkerClient", "DEFAULT_TIMEOUT_S", "GET_STATUS_TIMEOUT_S", "RUN_GRACE_S"]

DEFAULT_TIMEOUT_S = 60.0
GET_STATUS_TIMEOUT_S = 5.0
# Extra time a RunGraph deadline allows beyond the step's own timeout, so the worker's own
# DeadlineExceededError (which names the op it was waiting on) arrives before gRPC's.
RUN_GRACE_S = 1.0


class GrpcWorkerClient:
    """Calls one worker task over a shared gRPC channel.

    Args:
        address: "host:port" of the worker's gRPC server.
        task_name: the task, for error messages, e.g. "/job:worker/replica:0/task:1".
        default_timeout_s: the deadline of the management calls (RegisterGraph, CleanupGraph...).
    """

    def __init__(self, address: str, task_name: str = "", default_timeout_s: float = DEFAULT_TIMEOUT_S):
        self.address = address
        self.task_name = task_name
        self.default_timeout_s = float(default_timeout_s)
        channels.get_channel(address)  # opens the connection lazily; fails fast on a malformed address

    @property
    def _stub(self) -> worker_pb2_grpc.WorkerServiceStub:
        return channels.get_stub(self.address, _Stub)

    def __repr__(self):
        return f"GrpcWorkerClient({self.address!r}, {self.task_name!r})"

    def _what(self, method: str) -> str:
        who = f"worker {self.task_name} at {self.address}" if self.task_name else f"worker at {self.address}"
        return f"{method} on {who}"

    def _over_local(self, request, negotiate: bool):
        """(the same-host channel, the serialized request) when the call goes that way, else None
        (`local_channel.route`)."""
        return local_channel.route(self.address, request, self._grpc_status if negotiate else None)

    def _call(self, method: str, request, timeout, negotiate: bool = False):
        local = self._over_local(request, negotiate)
        if local is not None:
            return _PARSERS[method](local[0].unary(method, local[1], timeout, lambda: self._what(method),
                                                   channels.outgoing_metadata()))
        resp = invoke(self._stub, method, request, timeout, lambda: self._what(method),
                      channels.outgoing_metadata())
        if method == "GetStatus":
            local_channel.note_status(self.address, resp)   # (opens the same-host channel, if offered)
        return resp

    # ------------------------------------------------------------------ management
    def get_status(self, request: worker_pb2.GetStatusRequest | None = None,
                   timeout: float | None = None) -> worker_pb2.GetStatusResponse:
        """Returns the worker's devices, job and task (a cheap health check: 5 s by default)."""
        return self._call("GetStatus", request or worker_pb2.GetStatusRequest(),
                          GET_STATUS_TIMEOUT_S if timeout is None else timeout)

    def _grpc_status(self, request, timeout):
        """GetStatus over gRPC (how the same-host channel is negotiated: only a caller with the
        cluster token, when there is one, gets the offer)."""
        return invoke(self._stub, "GetStatus", request, timeout, lambda: self._what("GetStatus"),
                      channels.outgoing_metadata())

    def register_graph(self, request: worker_pb2.RegisterGraphRequest,
                       timeout: float | None = None) -> worker_pb2.RegisterGraphResponse:
        """Registers a partition; returns its graph handle."""
        return self._call("RegisterGraph", request, self._timeout(timeout))

    def deregister_graph(self, request: worker_pb2.DeregisterGraphRequest,
                         timeout: float | None = None) -> worker_pb2.DeregisterGraphResponse:
        """Forgets a registered partition."""
        return self._call("DeregisterGraph", request, self._timeout(timeout))

    def cleanup_graph(self, request: worker_pb2.CleanupGraphRequest,
                      timeout: float | None = None) -> worker_pb2.CleanupGraphResponse:
        """Frees a step's state on the worker."""
        return self._call("CleanupGraph", request, self._timeout(timeout))

    def abort_step(self, request: worker_pb2.AbortStepRequest,
                   timeout: float | None = None) -> worker_pb2.AbortStepResponse:
        """Aborts a running step on the worker."""
        return self._call("AbortStep", request, self._timeout(timeout))

    def cleanup_all(self, request: worker_pb2.CleanupAllRequest | None = None,
                    timeout: float | None = None) -> worker_pb2.CleanupAllResponse:
        """Clears resource containers on the worker (all when the request names none)."""
        return self._call("CleanupAll", request or worker_pb2.CleanupAllRequest(), self._timeout(timeout))

    def _timeout(self, timeout):
        return self.default_timeout_s if timeout is None else timeout

    # ------------------------------------------------------------------ steps
    def run_graph(self, request: worker_pb2.RunGraphRequest,
                  timeout: float | None = None) -> worker_pb2.RunGraphResponse:
        """Runs a registered partition once.

        Args:
            request: the partition, step id, _Arg values and _Retval keys.
            timeout: seconds; None means the request's `timeout_in_ms` plus `RUN_GRACE_S`, or no
                deadline when that is 0 (a step may legitimately block, e.g. on a queue).
        """
        self._check_run_graph(request)
        return self._call("RunGraph", request, _run_timeout(request, timeout, None), negotiate=True)

    def _check_run_graph(self, request) -> None:
        if isinstance(request, SplitMessage):   # (a client's feeds, forwarded by the master)
            limits.check_request(request, self._what("RunGraph"), headroom=0)

    def run_graph_async(self, request: worker_pb2.RunGraphRequest, timeout, on_done):
        """RunGraph over the same-host channel with no thread waiting for the answer (the master's
        `TaskStep`): ``on_done(response, None)`` or ``on_done(None, error)`` is called on the
        channel's reader thread. Returns a function that cancels the call, or None when there is no
        same-host channel to this worker (or the request is too large for one frame): then call
        `run_graph`.

        Raises:
            As `run_graph`, for what fails before anything is sent.
        """
        local = self._over_local(request, negotiate=True)
        if local is None:
            return None
        self._check_run_graph(request)   # (checked here only: None above leads to run_graph)
        return local[0].unary_async("RunGraph", local[1], _run_timeout(request, timeout, None),
                                    lambda: self._what("RunGraph"), _RUN_GRAPH_RESPONSE, on_done,
                                    channels.outgoing_metadata())

    def run_graph_streamed(self, request: worker_pb2.RunGraphRequest,
                           timeout: float | None = None) -> worker_pb2.RunGraphResponse:
        """RunGraph of a small step over a pooled RunGraphStream call (`graph_stream`).

        Raises:
            graph_stream.NotInline: nothing ran (the worker answered `not_inline`: the graph does
                not run inline there): call `run_graph`.
            Otherwise as `run_graph` (`timeout` as there, 24 h when the step has none).
        """
        if local_channel.channel_for(self.address, self._grpc_status) is not None:
            return self.run_graph(request, timeout)   # (a unary call costs less there than a stream)
        return graph_stream.run_graph(self.address, request, _run_timeout(request, timeout, 24 * 3600.0),
                                      lambda: self._what("RunGraph"))

    def push_tensors(self, request: worker_pb2.PushTensorsRequest, timeout: float | None = None,
                     on_error=None):
        """Sends a producer's values for the worker's _Recvs (`kernflow.worker.rendezvous`).

        With `on_error`, nothing waits for the worker: over the same-host channel the request goes
        one-way (sent when this returns: None is returned); over gRPC the call runs in the
        background, a failure is passed to ``on_error(error)`` (on a gRPC thread), and the call is
        returned (its ``wait(timeout)`` raises the call's error as a TF error class). Without it,
        the call is a plain unary one.

        Raises:
            UnavailableError (and the other TF error classes of a failed call): what fails before
            anything is sent, or, without `on_error`, the call's error.
        """
        local = self._over_local(request, negotiate=True)
        if on_error is None:
            if local is not None:
                return worker_pb2.PushTensorsResponse.FromString(local[0].unary(
                    "PushTensors", local[1], self._timeout(timeout), lambda: self._what("PushTensors"),
                    channels.outgoing_metadata()))
            return invoke(self._stub, "PushTensors", request, self._timeout(timeout),
                          lambda: self._what("PushTensors"), channels.outgoing_metadata())
        if local is not None:
            local[0].oneway("PushTensors", local[1], channels.outgoing_metadata())
            return None
        try:
            future = self._stub.PushTensors.future(request, timeout=self._timeout(timeout),
                                                   metadata=channels.outgoing_metadata())
        except ValueError as e:  # closed channel
            raise errors.UnavailableError(None, None, f"{self._what('PushTensors')} is unavailable: {e}") from None

        call = _PendingPush(future, self._what("PushTensors"))
        future.add_done_callback(lambda f: call.failed(on_error))
        return call

    def recv_tensor(self, request: worker_pb2.RecvTensorRequest,
                    timeout: float | None = None) -> Iterator[worker_pb2.RecvTensorResponse]:
        """Streams the chunks of a tensor a _Send on this worker produced.

        Returns:
            An iterator of RecvTensorResponse (give it to `codec.assemble_recv_chunks`). Errors,
            including ones in the middle of the stream, are raised as TF error classes; dropping
            the iterator early cancels the call.
        """
        what = self._what(f"RecvTensor({request.rendezvous_key!r}, step {request.step_id})")
        try:
            call = self._stub.RecvTensor(request, timeout=timeout, metadata=channels.outgoing_metadata())
        except grpc.RpcError as e:
            raise error_from_rpc(e, what) from None
        except ValueError as e:  # closed channel
            raise errors.UnavailableError(None, None, f"{what} is unavailable: {e}") from None
        return StreamCall(call, what)

    def recv_tensor_raw(self, request: worker_pb2.RecvTensorRequest,
                        timeout: float | None = None) -> Iterator[bytes]:
        """`recv_tensor`, but yields each RecvTensorResponse as the bytes received (not parsed).

        For receivers that forward the chunks or split them with `codec.split_content`, which
        saves the two copies of the payload that parsing and reading ``content`` would make.
        """
        what = self._what(f"RecvTensor({request.rendezvous_key!r}, step {request.step_id})")
        local = local_channel.channel_for(self.address, self._grpc_status)
        if local is not None:
            return local.stream("RecvTensor", request.SerializeToString(), timeout, what,
                                channels.outgoing_metadata())
        try:
            stub = channels.get_stub(self.address, _RawRecvStub)
            call = stub.RecvTensor(request, timeout=timeout, metadata=channels.outgoing_metadata())
        except grpc.RpcError as e:
            raise error_from_rpc(e, what) from None
        except ValueError as e:  # closed channel
            raise errors.UnavailableError(None, None, f"{what} is unavailable: {e}") from None
        return StreamCall(call, what)

    def close(self) -> None:
        """Nothing to release: the channel is shared per address (see `channels.close_all`)."""


class _PendingPush:
    """A PushTensors call over gRPC that nothing waits for yet (`GrpcWorkerClient.push_tensors`)."""

    def __init__(self, future, what: str):
        self._future, self._what = future, what

    def _error(self):
        err = self._future.exception()
        if err is None:
            return None
        return error_from_rpc(err, self._what) if isinstance(err, grpc.RpcError) else err

    def failed(self, on_error) -> None:
        err = self._error()
        if err is not None:
            on_error(err)

    def wait(self, timeout: float | None = None) -> None:
        """Returns once the worker took the values.

        Raises:
            The call's error as a TF error class; DeadlineExceededError after `timeout` seconds.
        """
        try:
            self._future.result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise errors.DeadlineExceededError(None, None, f"{self._what} did not finish within "
                                               f"{timeout:g} s") from None
        except Exception:  # noqa: BLE001 - the call's error, as a TF error class
            err = self._error()
            if err is None:
                raise
            raise err from None


def _run_timeout(request: worker_pb2.RunGraphRequest, timeout: float | None, default):
    """A RunGraph call's deadline: `timeout`, else the step's own timeout plus `RUN_GRACE_S`, else
    `default`."""
    if timeout is not None:
        return timeout
    return request.timeout_in_ms / 1000.0 + RUN_GRACE_S if request.timeout_in_ms > 0 else default


# RunGraph's responses keep their values' bytes where they were received (`tensor_requests.split`):
# read them with `tensor_requests.decode(resp, "recv")`, or forward them (the master's RunStep).
_RUN_GRAPH_RESPONSE = response_parser(worker_pb2.RunGraphResponse, ("recv",))
# The response parser of each unary method (how the same-host channel's answers are parsed).
_PARSERS = {m.name: getattr(worker_pb2, m.output_type.name).FromString
            for m in worker_pb2.DESCRIPTOR.services_by_name["WorkerService"].methods}
_PARSERS["RunGraph"] = _RUN_GRAPH_RESPONSE


class _Stub(worker_pb2_grpc.WorkerServiceStub):
    """The generated stub, but RunGraph's request may be a `SplitMessage` and its response is split
    (`_RUN_GRAPH_RESPONSE`) (cached per address by `channels.get_stub`)."""

    def __init__(self, channel):
        super().__init__(channel)
        self.RunGraph = channel.unary_unary(
            "/kernflow.client.protobuf.WorkerService/RunGraph",
            request_serializer=serialize, response_deserializer=_RUN_GRAPH_RESPONSE)


class _RawRecvStub:
    """RecvTensor on a channel, its responses left as bytes (cached per address by `channels.get_stub`)."""

    def __init__(self, channel):
        self.RecvTensor = channel.unary_stream(
            "/kernflow.client.protobuf.WorkerService/RecvTensor",
            request_serializer=worker_pb2.RecvTensorRequest.SerializeToString,
            response_deserializer=None)


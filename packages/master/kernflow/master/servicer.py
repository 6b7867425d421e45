"""`MasterServicer`: the gRPC face of a `Master` (one line per RPC, errors become statuses).

Every exception a method raises ends that RPC with the matching status code (`rpc_errors.rpc_method`:
a TF error keeps its code and message, a malformed request is INVALID_ARGUMENT) and the server keeps
serving. The caller's trace context (W3C headers in the call metadata) is the parent of the master's
spans ("Master.RunStep"), so the worker calls made for a step join the caller's trace: current while
RunStep runs, handed explicitly to RunStepStream's and RunStepPull's generators (which must not keep
a context attached across their yields). A step whose caller's call ends before the step does
(cancelled, past its deadline, the client died) is aborted on every task (`Master.watch_caller`).

Fetched values: registered with `add_to_server`, RunStep answers with the bytes of its response
serialized from the buffers the tasks' values arrived in (`tensor_requests.serialize`: one copy of
each value), and RunStepStream and RunStepPull forward the tasks' chunks as they came, tagged with
their fetch; a RunStep response over the message limit is refused first, naming the value
(`limits.check_response`). Registered with the generated ``add_MasterServiceServicer_to_server``,
every response is a protobuf message (`tensor_requests.whole`).
"""

from __future__ import annotations

from kernflow.client import channels
from kernflow.client import limits
from kernflow.client import tensor_requests
from kernflow.client.protobuf import master_pb2
from kernflow.client.protobuf import master_pb2_grpc
from kernflow.client.rpc_errors import rpc_method

__all__ = ["MasterServicer", "add_to_server", "RAW_RESPONSES"]

# Methods whose handlers return (or yield) their responses serialized (see `channels.add_servicer`).
RAW_RESPONSES = ("RunStep", "RunStepStream", "RunStepPull")


def add_to_server(servicer, server) -> None:
    """Registers `servicer` (a `MasterServicer`) on a `grpc.Server`: requests carrying feeds parsed
    without copying them, fetched values sent without copying them but once (`RAW_RESPONSES`)."""
    servicer.raw_responses = True
    channels.add_servicer(server, master_pb2.DESCRIPTOR.services_by_name["MasterService"], servicer,
                          raw_responses=RAW_RESPONSES, split_requests=True)


class MasterServicer(master_pb2_grpc.MasterServiceServicer):
    """Serves one `Master` (or any object with its methods) over gRPC."""

    def __init__(self, master, budget=None):
        self._master = master
        # The steps, which may block (a dequeue), take a slot (`channels.CallBudget`); the other
        # calls always find a thread.
        self._budget = budget if budget is not None else channels.CallBudget(128)
        # Set by `add_to_server`: the step methods' responses leave as bytes.
        self.raw_responses = False

    @rpc_method
    def CreateSession(self, request, context):
        # Waits for the session's tasks at most as long as the caller waits for the answer.
        return self._master.create_session(request, deadline_s=context.time_remaining(),
                                           cancelled=lambda: not context.is_active())

    @rpc_method
    def ExtendSession(self, request, context):
        return self._master.extend_session(request)

    @rpc_method
    def RunStep(self, request, context):
        with self._budget.slot("RunStep"), channels.attach_incoming_context(context):
            resp = self._master.run_step(request, on_cancel=context.add_callback)
        if type(request) is tensor_requests.SplitMessage:
            request.release()   # (the feeds' received bytes: freed before the response is made)
        if type(resp) is not tensor_requests.SplitMessage:   # (a small step's)
            return resp.SerializeToString() if self.raw_responses else resp
        limits.check_response(resp, "RunStep on the master")
        return resp.SerializeToString() if self.raw_responses else tensor_requests.whole(resp)

    @rpc_method
    def RunStepStream(self, request, context):
        kw = self._stream_options(context)
        yield from self._budget.held("RunStepStream", lambda: self._master.run_step_stream(
            request, on_cancel=context.add_callback, **kw))

    @rpc_method
    def RunStepPull(self, request_iterator, context):
        kw = self._stream_options(context)
        yield from self._budget.held("RunStepPull", lambda: self._master.run_step_pull(
            request_iterator, on_cancel=context.add_callback, **kw))

    def _stream_options(self, context) -> dict:
        """The streaming step methods' keyword arguments: the caller's trace context, raw responses."""
        parent = channels.incoming_context(context)
        kw = {} if parent is None else {"trace_context": parent}
        if self.raw_responses:
            kw["raw"] = True
        return kw

    @rpc_method
    def CloseSession(self, request, context):
        return self._master.close_session(request)

    @rpc_method
    def ListDevices(self, request, context):
        return self._master.list_devices(request)

    @rpc_method
    def Reset(self, request, context):
        return self._master.reset(request)

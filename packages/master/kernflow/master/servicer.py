"""`MasterServicer`: the gRPC face of a `Master` (one line per RPC, errors become statuses).

Every exception a method raises ends that RPC with the matching status code (`rpc_errors.rpc_method`:
a TF error keeps its code and message, a malformed request is INVALID_ARGUMENT) and the server keeps
serving. The caller's trace context (W3C headers in the call metadata) is the parent of the master's
spans ("Master.RunStep"), so the worker calls made for a step join the caller's trace: current while
RunStep runs, handed explicitly to RunStepStream's and RunStepPull's generators (which must not keep
a context attached across their yields). A step whose caller's call ends before the step does
(cancelled, past its deadline, the client died) is aborted on every task (`Master.watch_caller`).
"""

from __future__ import annotations

from kernflow.client import channels
from kernflow.client.protobuf import master_pb2_grpc
from kernflow.client.rpc_errors import rpc_method

__all__ = ["MasterServicer"]


class MasterServicer(master_pb2_grpc.MasterServiceServicer):
    """Serves one `Master` (or any object with its methods) over gRPC."""

    def __init__(self, master, budget=None):
        self._master = master
        # The steps, which may block (a dequeue), take a slot (`channels.CallBudget`); the other
        # calls always find a thread.
        self._budget = budget if budget is not None else channels.CallBudget(128)

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
            return self._master.run_step(request, on_cancel=context.add_callback)

    @rpc_method
    def RunStepStream(self, request, context):
        parent = channels.incoming_context(context)
        kw = {} if parent is None else {"trace_context": parent}
        yield from self._budget.held("RunStepStream", lambda: self._master.run_step_stream(
            request, on_cancel=context.add_callback, **kw))

    @rpc_method
    def RunStepPull(self, request_iterator, context):
        parent = channels.incoming_context(context)
        kw = {} if parent is None else {"trace_context": parent}
        yield from self._budget.held("RunStepPull", lambda: self._master.run_step_pull(
            request_iterator, on_cancel=context.add_callback, **kw))

    @rpc_method
    def CloseSession(self, request, context):
        return self._master.close_session(request)

    @rpc_method
    def ListDevices(self, request, context):
        return self._master.list_devices(request)

    @rpc_method
    def Reset(self, request, context):
        return self._master.reset(request)

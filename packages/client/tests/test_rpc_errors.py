"""The one table between gRPC status codes and TF error classes, in both directions."""

import re

import grpc
import pytest

from kernflow.core.framework import errors
from kernflow.client import rpc_errors

ALL_CLASSES = [errors.CancelledError, errors.UnknownError, errors.InvalidArgumentError,
               errors.DeadlineExceededError, errors.NotFoundError, errors.AlreadyExistsError,
               errors.PermissionDeniedError, errors.ResourceExhaustedError,
               errors.FailedPreconditionError, errors.AbortedError, errors.OutOfRangeError,
               errors.UnimplementedError, errors.InternalError, errors.UnavailableError,
               errors.DataLossError, errors.UnauthenticatedError]


class FakeRpcError(grpc.RpcError, grpc.Call):
    """What a stub raises: an RpcError that is also a Call with code() and details()."""

    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details

    def initial_metadata(self):
        return ()

    def trailing_metadata(self):
        return ()

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def cancel(self):
        return False

    def add_callback(self, callback):
        return False


class Aborted(Exception):
    pass


class FakeContext:
    def __init__(self):
        self.status = None

    def abort(self, code, details):
        self.status = (code, details)
        raise Aborted()

    def code(self):
        return self.status[0] if self.status else None


def test_table_covers_every_status_code():
    assert set(rpc_errors.STATUS_FOR_CODE.values()) == set(grpc.StatusCode)
    for cls in ALL_CLASSES:
        status = rpc_errors.status_for_code(cls.error_code)
        # InvalidArgumentError <-> INVALID_ARGUMENT, UnavailableError <-> UNAVAILABLE, ...
        assert status.name == re.sub(r"(?<!^)([A-Z])", r"_\1", cls.__name__[:-len("Error")]).upper()
        assert rpc_errors.error_class_for_status(status) is cls


@pytest.mark.parametrize("cls", ALL_CLASSES, ids=lambda c: c.__name__)
def test_round_trip_through_a_status(cls):
    ctx = FakeContext()
    with pytest.raises(Aborted):
        rpc_errors.abort_context(ctx, cls(None, None, f"a {cls.__name__} happened"))
    status, details = ctx.status
    assert status.value[0] == cls.error_code
    back = rpc_errors.error_from_rpc(FakeRpcError(status, details), "RunGraph on worker /job:w/task:0 at h:1")
    assert type(back) is cls
    assert f"a {cls.__name__} happened" in back.message
    assert "/job:w/task:0" in back.message and "h:1" in back.message


def test_named_examples():
    StatusCode = grpc.StatusCode
    assert rpc_errors.status_for_code(errors.NOT_FOUND) is StatusCode.NOT_FOUND
    assert rpc_errors.status_for_code(errors.INVALID_ARGUMENT) is StatusCode.INVALID_ARGUMENT
    assert rpc_errors.status_for_code(99) is StatusCode.UNKNOWN
    assert rpc_errors.error_class_for_status(StatusCode.UNAVAILABLE) is errors.UnavailableError
    assert rpc_errors.error_class_for_status(StatusCode.DEADLINE_EXCEEDED) is errors.DeadlineExceededError
    assert rpc_errors.error_class_for_status(None) is errors.UnknownError
    assert rpc_errors.error_class_for_status(StatusCode.OK) is errors.UnknownError


def test_transport_failures_have_clear_messages():
    e = rpc_errors.error_from_rpc(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "failed to connect"),
                                  "worker /job:worker/task:1 at 127.0.0.1:5001")
    assert isinstance(e, errors.UnavailableError)
    assert str(e) == "worker /job:worker/task:1 at 127.0.0.1:5001 is unavailable: failed to connect"
    e = rpc_errors.error_from_rpc(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded"),
                                  "master at m:1")
    assert isinstance(e, errors.DeadlineExceededError) and "did not answer before its deadline" in str(e)


@pytest.mark.parametrize("exc, status", [
    (ValueError("bad shape"), grpc.StatusCode.INVALID_ARGUMENT),
    (TypeError("not a GraphDef"), grpc.StatusCode.INVALID_ARGUMENT),
    (KeyError("x"), grpc.StatusCode.INVALID_ARGUMENT),
    (NotImplementedError("later"), grpc.StatusCode.UNIMPLEMENTED),
    (RuntimeError("boom"), grpc.StatusCode.INTERNAL),
    (FakeRpcError(grpc.StatusCode.UNAVAILABLE, "peer down"), grpc.StatusCode.UNAVAILABLE),
    (errors.OpError(None, None, "zero code", 0), grpc.StatusCode.UNKNOWN),  # never report OK
])
def test_python_exceptions_map_to_statuses(exc, status):
    got, details = rpc_errors.status_for_exception(exc)
    assert got is status and details


def test_internal_details_name_the_exception_type():
    assert rpc_errors.status_for_exception(RuntimeError("boom"))[1] == "RuntimeError: boom"


def test_long_details_are_cut():
    _, details = rpc_errors.status_for_exception(errors.InternalError(None, None, "x" * 100_000))
    assert len(details) < rpc_errors.MAX_DETAILS_CHARS + 100 and details.endswith("more chars]")


def test_rpc_method_decorator_unary_and_streaming():
    class Servicer:
        @rpc_errors.rpc_method
        def Unary(self, request, context):
            if request == "fail":
                raise errors.NotFoundError(None, None, "no such graph")
            return "ok"

        @rpc_errors.rpc_method
        def Stream(self, request, context):
            yield 1
            raise ValueError("bad chunk")

        @rpc_errors.rpc_method
        def SelfAborting(self, request, context):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "nope")

    s = Servicer()
    ctx = FakeContext()
    assert s.Unary("x", ctx) == "ok" and ctx.status is None
    with pytest.raises(Aborted):
        s.Unary("fail", ctx)
    assert ctx.status == (grpc.StatusCode.NOT_FOUND, "no such graph")
    ctx = FakeContext()
    gen = s.Stream("x", ctx)
    assert next(gen) == 1
    with pytest.raises(Aborted):
        next(gen)
    assert ctx.status[0] is grpc.StatusCode.INVALID_ARGUMENT and "bad chunk" in ctx.status[1]
    ctx = FakeContext()
    with pytest.raises(Aborted):
        s.SelfAborting("x", ctx)
    assert ctx.status == (grpc.StatusCode.PERMISSION_DENIED, "nope")


def test_a_stream_whose_caller_went_away_ends_quietly(caplog):
    """Reading the request stream of a cancelled call raises a bare grpc.RpcError: not an error to
    report (nobody is listening) nor to log as an internal failure."""
    class Gone(FakeContext):
        def is_active(self):
            return False

    class Here(FakeContext):
        def is_active(self):
            return True

    class Servicer:
        @rpc_errors.rpc_method
        def Bidi(self, requests, context):
            for r in requests:
                yield r

    def cancelled():
        yield 1
        raise grpc.RpcError()

    ctx = Gone()
    with caplog.at_level("DEBUG"):
        assert list(Servicer().Bidi(cancelled(), ctx)) == [1]
    assert ctx.status is None and "internal error" not in caplog.text
    ctx = Here()      # the same error on a live call is reported
    with pytest.raises(Aborted):
        list(Servicer().Bidi(cancelled(), ctx))
    assert ctx.status[0] is grpc.StatusCode.INTERNAL

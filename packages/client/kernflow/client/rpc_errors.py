"""One table between gRPC status codes and kernflow's TF-style error classes, used both ways.

kernflow's error codes (`kernflow.core.framework.errors`) equal gRPC's status codes by number, so
`grpc.StatusCode.NOT_FOUND` is `NotFoundError` and back. Clients turn a failed call into the matching
`OpError` with `error_from_rpc`, naming the peer; servicers decorate their methods with `rpc_method`
(or call `abort_context`) so that any exception becomes a status with a code and details instead of
an opaque failure, and the server keeps serving.
"""

from __future__ import annotations

import functools
import inspect
import logging

import grpc

from kernflow.core.framework import errors
from kernflow.client import limits

__all__ = ["STATUS_FOR_CODE", "status_for_code", "error_class_for_status", "status_for_exception",
           "error_from_rpc", "error_for_status", "abort_context", "rpc_method", "MAX_DETAILS_CHARS", "StreamCall",
           "invoke"]

_log = logging.getLogger(__name__)

# The table: TF error code (int) -> grpc.StatusCode. The classes follow from the codes through
# `errors.exception_type_from_error_code`, since both numberings are the same.
STATUS_FOR_CODE: dict[int, grpc.StatusCode] = {sc.value[0]: sc for sc in grpc.StatusCode}

# gRPC carries details in a header; very long messages are cut so that the status still fits.
MAX_DETAILS_CHARS = 4000


def status_for_code(code: int) -> grpc.StatusCode:
    """Returns the gRPC status code of a TF error code (UNKNOWN for a number gRPC lacks)."""
    return STATUS_FOR_CODE.get(int(code), grpc.StatusCode.UNKNOWN)


def error_class_for_status(status: grpc.StatusCode | None) -> type[errors.OpError]:
    """Returns the OpError subclass of a gRPC status code (UnknownError for None or OK)."""
    if status is None:
        return errors.UnknownError
    return errors.exception_type_from_error_code(status.value[0])


def status_for_exception(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """Returns the status code and details a servicer should report for `exc`.

    `OpError`s keep their code and message; `ValueError`/`TypeError`/`KeyError` (a request the server
    could not interpret) are INVALID_ARGUMENT, `NotImplementedError` UNIMPLEMENTED, a `grpc.RpcError`
    raised by a nested call keeps its code, and anything else is INTERNAL with the exception's type.
    """
    if isinstance(exc, errors.OpError):
        status, details = status_for_code(exc.error_code), exc.message
    elif isinstance(exc, (ValueError, TypeError, KeyError)):
        status, details = grpc.StatusCode.INVALID_ARGUMENT, f"{type(exc).__name__}: {exc}"
    elif isinstance(exc, NotImplementedError):
        status, details = grpc.StatusCode.UNIMPLEMENTED, f"{type(exc).__name__}: {exc}"
    elif isinstance(exc, grpc.RpcError) and callable(getattr(exc, "code", None)):
        status = exc.code() or grpc.StatusCode.UNKNOWN
        details = (exc.details() if callable(getattr(exc, "details", None)) else None) or str(exc)
    else:
        status, details = grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"
    if status == grpc.StatusCode.OK:  # an error must never be reported as success
        status = grpc.StatusCode.UNKNOWN
    details = str(details)
    if len(details) > MAX_DETAILS_CHARS:
        details = details[:MAX_DETAILS_CHARS] + f"... [{len(details) - MAX_DETAILS_CHARS} more chars]"
    return status, details


HANDLER_KEY = "kernflow-handler-error"


def _from_handler(exc) -> bool:
    md = exc.trailing_metadata() if callable(getattr(exc, "trailing_metadata", None)) else None
    try:
        return any(k == HANDLER_KEY for k, _ in (md or ()))
    except (TypeError, ValueError):
        return False


def error_from_rpc(exc: grpc.RpcError, what: str) -> errors.OpError:
    """Converts a failed gRPC call into the TF error class of its status code.

    Args:
        exc: the `grpc.RpcError` a stub raised (a `grpc.Call` with `code()` and `details()`).
        what: who was called, for the message, e.g. ``"RunGraph on worker /job:worker/task:1 at
            127.0.0.1:5001"``.

    Returns:
        An `OpError` subclass instance (not raised). UNAVAILABLE becomes `UnavailableError` and
        DEADLINE_EXCEEDED `DeadlineExceededError`, with messages that say the peer could not be
        reached or did not answer in time; other codes keep the server's message and name `what`.
    """
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    details = (exc.details() if callable(getattr(exc, "details", None)) else None) or str(exc)
    return error_for_status(code, details, what, _from_handler(exc))


def error_for_status(code: grpc.StatusCode | None, details: str | None, what: str,
                     from_handler: bool = False) -> errors.OpError:
    """`error_from_rpc` of a call that ended with `code` and `details` (any channel's failures).

    Args:
        from_handler: the server's handler reported the status itself (`abort_context`), rather
            than the transport: its message is kept as is, with `what` appended.
    """
    details = details or "no details"
    cls = error_class_for_status(code)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and not from_handler:
        details = limits.explain_grpc_limit(details)   # (gRPC's own message names no variable)
    if from_handler:  # the server's own error (e.g. a worker it could not reach): keep it
        msg = f"{details} (from {what})"
    elif code == grpc.StatusCode.UNAVAILABLE:
        msg = f"{what} is unavailable: {details}"
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        msg = f"{what} did not answer before its deadline: {details}"
    elif code == grpc.StatusCode.CANCELLED:
        msg = f"{what} was cancelled: {details}"
    else:
        msg = f"{details} (from {what})"
    return cls(None, None, msg)


def abort_context(context: grpc.ServicerContext, exc: BaseException):
    """Ends the current RPC with the status matching `exc` (see `status_for_exception`).

    Like `grpc.ServicerContext.abort`, which it calls, this raises and never returns: use it inside
    a servicer method as ``except Exception as e: abort_context(context, e)``.
    """
    status, details = status_for_exception(exc)
    try:  # marks the status as the handler's own, not the transport's (see error_from_rpc)
        context.set_trailing_metadata(((HANDLER_KEY, "1"),))
    except Exception:  # noqa: BLE001 - metadata is best effort; the status still goes out
        pass
    if status == grpc.StatusCode.INTERNAL:
        _log.error("internal error in an RPC handler", exc_info=exc)
    else:
        _log.debug("RPC failed with %s: %s", status.name, details)
    context.abort(status, details)


def rpc_method(fn):
    """Decorator for servicer methods ``fn(self, request, context)``: exceptions become statuses.

    Works for unary methods and for response-streaming methods written as generators (an error
    raised midway ends the stream with the status). The server thread survives every exception.
    """
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def stream(self, request, context):
            try:
                yield from fn(self, request, context)
            except Exception as e:  # noqa: BLE001 - reported to the caller as a status
                if _is_abort(context):
                    raise
                if isinstance(e, grpc.RpcError) and not _active(context):
                    # Reading the caller's request stream failed because the caller cancelled or
                    # went away: nobody is left to tell.
                    _log.debug("%s: the caller went away", fn.__name__)
                    return
                abort_context(context, e)
        return stream

    @functools.wraps(fn)
    def unary(self, request, context):
        try:
            return fn(self, request, context)
        except Exception as e:  # noqa: BLE001 - reported to the caller as a status
            if _is_abort(context):
                raise
            abort_context(context, e)
    return unary


def _active(context) -> bool:
    try:
        return context.is_active()
    except Exception:  # noqa: BLE001 - a test double without is_active
        return True


def _is_abort(context) -> bool:
    """True when the handler itself already aborted the RPC (context.abort raised)."""
    code_fn = getattr(context, "code", None)
    try:
        code = code_fn() if callable(code_fn) else None
    except Exception:  # noqa: BLE001 - older grpc versions lack ServicerContext.code()
        return False
    return code is not None and code != grpc.StatusCode.OK


class StreamCall:
    """Iterates a response-streaming gRPC call, raising its failure as the TF error class naming `what`.

    `cancel` (or `close`) ends the call from any thread, also while another thread waits in `next`;
    a call dropped before its end is cancelled when collected.
    """

    __slots__ = ("_call", "_what")

    def __init__(self, call, what: str):
        self._call = call
        self._what = what

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._call)
        except grpc.RpcError as e:
            raise error_from_rpc(e, self._what) from None

    def cancel(self) -> None:
        """Cancels the call (nothing happens if it already ended)."""
        self._call.cancel()

    close = cancel

    def __del__(self):
        call = getattr(self, "_call", None)
        if call is not None and call.is_active():
            call.cancel()


def invoke(stub, method: str, request, timeout, what, metadata=None):
    """Calls unary `method` of `stub`, turning failures into TF errors that name `what`.

    `what` is a string or a function of no arguments returning one (built only on failure).
    A call on a channel closed by `channels.close_all` (grpc raises ValueError) is UnavailableError.
    """
    try:
        return getattr(stub, method)(request, timeout=timeout, metadata=metadata)
    except grpc.RpcError as e:
        raise error_from_rpc(e, what() if callable(what) else what) from None
    except ValueError as e:  # "Cannot invoke RPC on closed channel!"
        what = what() if callable(what) else what
        raise errors.UnavailableError(None, None, f"{what} is unavailable: {e}") from None

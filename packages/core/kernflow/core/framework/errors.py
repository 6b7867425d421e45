"""Error classes mirroring the TensorFlow 1.x ``tf.errors`` module.

Every error raised by a kernel or session is an :class:`OpError` subclass
carrying a gRPC-style status code, the failing op (if known) and its
``NodeDef`` (if known).
"""

from __future__ import annotations

import contextlib

__all__ = [
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    "OpError", "CancelledError", "UnknownError", "InvalidArgumentError",
    "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
    "PermissionDeniedError", "ResourceExhaustedError",
    "FailedPreconditionError", "AbortedError", "OutOfRangeError",
    "UnimplementedError", "InternalError", "UnavailableError",
    "DataLossError", "UnauthenticatedError",
    "exception_type_from_error_code", "error_code_from_exception_type",
    "make_error", "raise_from_code", "raise_exception_on_not_ok_status",
]

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class _ErrorCode:
    """Descriptor: the class's status code on the class, the instance's own
    code on instances."""

    def __get__(self, obj, objtype=None):
        if obj is None:
            return objtype._class_error_code
        return obj._error_code


class OpError(Exception):
    """Base class for errors raised while building or running a graph.

    Attributes:
        message: The human readable error message.
        op: The operation that failed, or None.
        node_def: The ``NodeDef`` of the failing operation, or None.
        error_code: The integer status code (also readable on the class).
    """

    _class_error_code = UNKNOWN
    error_code = _ErrorCode()

    def __init__(self, node_def, op, message, error_code=None):
        """Creates an OpError.

        Args:
            node_def: The ``NodeDef`` of the failing op, or None.
            op: The failing operation, or None.
            message: The error message.
            error_code: Integer status code; defaults to the code of the
                class (UNKNOWN for ``OpError`` itself).
        """
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        if error_code is None:
            error_code = type(self)._class_error_code
        self._error_code = int(error_code)

    @property
    def message(self):
        """The error message."""
        return self._message

    @property
    def op(self):
        """The operation that failed, or None."""
        return self._op

    @property
    def node_def(self):
        """The ``NodeDef`` of the failing operation, or None."""
        return self._node_def

    def __str__(self):
        return str(self._message)

    def __copy__(self):
        new = type(self).__new__(type(self))
        OpError.__init__(new, self._node_def, self._op, self._message,
                         self._error_code)
        new.__dict__.update({k: v for k, v in self.__dict__.items()
                             if k not in new.__dict__})
        return new

    def __deepcopy__(self, memo):
        return self.__copy__()


def _make_error_class(name, code, doc):
    def __init__(self, node_def, op, message):
        OpError.__init__(self, node_def, op, message, code)

    __init__.__doc__ = (
        "Creates the error.\n\n"
        "        Args:\n"
        "            node_def: The ``NodeDef`` of the failing op, or None.\n"
        "            op: The failing operation, or None.\n"
        "            message: The error message.\n")
    return type(name, (OpError,), {
        "__init__": __init__,
        "__doc__": doc,
        "__module__": __name__,
        "_class_error_code": code,
    })


CancelledError = _make_error_class(
    "CancelledError", CANCELLED, "Raised when an operation is cancelled.")
UnknownError = _make_error_class(
    "UnknownError", UNKNOWN, "Unknown error.")
InvalidArgumentError = _make_error_class(
    "InvalidArgumentError", INVALID_ARGUMENT,
    "Raised when an operation receives an invalid argument.")
DeadlineExceededError = _make_error_class(
    "DeadlineExceededError", DEADLINE_EXCEEDED,
    "Raised when a deadline expires before an operation completes.")
NotFoundError = _make_error_class(
    "NotFoundError", NOT_FOUND,
    "Raised when a requested entity (file, tensor, ...) was not found.")
AlreadyExistsError = _make_error_class(
    "AlreadyExistsError", ALREADY_EXISTS,
    "Raised when an entity that we attempted to create already exists.")
PermissionDeniedError = _make_error_class(
    "PermissionDeniedError", PERMISSION_DENIED,
    "Raised when the caller lacks permission to run an operation.")
ResourceExhaustedError = _make_error_class(
    "ResourceExhaustedError", RESOURCE_EXHAUSTED,
    "Raised when some resource has been exhausted.")
FailedPreconditionError = _make_error_class(
    "FailedPreconditionError", FAILED_PRECONDITION,
    "Raised when the system is not in a state to execute an operation "
    "(e.g. reading an uninitialized variable).")
AbortedError = _make_error_class(
    "AbortedError", ABORTED, "Raised when an operation was aborted.")
OutOfRangeError = _make_error_class(
    "OutOfRangeError", OUT_OF_RANGE,
    "Raised when an operation iterates past the valid input range.")
UnimplementedError = _make_error_class(
    "UnimplementedError", UNIMPLEMENTED,
    "Raised when an operation has not been implemented.")
InternalError = _make_error_class(
    "InternalError", INTERNAL,
    "Raised when the system experiences an internal error.")
UnavailableError = _make_error_class(
    "UnavailableError", UNAVAILABLE,
    "Raised when the runtime is currently unavailable.")
DataLossError = _make_error_class(
    "DataLossError", DATA_LOSS,
    "Raised when unrecoverable data loss or corruption is encountered.")
UnauthenticatedError = _make_error_class(
    "UnauthenticatedError", UNAUTHENTICATED,
    "Raised when the request lacks valid authentication credentials.")

_CODE_TO_EXCEPTION = {
    CANCELLED: CancelledError,
    UNKNOWN: UnknownError,
    INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError,
    NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError,
    PERMISSION_DENIED: PermissionDeniedError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError,
    FAILED_PRECONDITION: FailedPreconditionError,
    ABORTED: AbortedError,
    OUT_OF_RANGE: OutOfRangeError,
    UNIMPLEMENTED: UnimplementedError,
    INTERNAL: InternalError,
    UNAVAILABLE: UnavailableError,
    DATA_LOSS: DataLossError,
    UNAUTHENTICATED: UnauthenticatedError,
}
_EXCEPTION_TO_CODE = {cls: code for code, cls in _CODE_TO_EXCEPTION.items()}


def exception_type_from_error_code(error_code):
    """Returns the OpError subclass for a status code.

    Args:
        error_code: Integer status code.

    Returns:
        The matching ``OpError`` subclass; ``UnknownError`` for codes
        without a dedicated class.
    """
    return _CODE_TO_EXCEPTION.get(error_code, UnknownError)


def error_code_from_exception_type(cls):
    """Returns the status code for an OpError subclass.

    Args:
        cls: An ``OpError`` subclass (subclasses of the standard classes map
            to the code of their nearest standard ancestor).

    Returns:
        The integer status code.

    Raises:
        KeyError: If ``cls`` is not an ``OpError`` subclass.
    """
    if isinstance(cls, type):
        for klass in cls.__mro__:
            if klass in _EXCEPTION_TO_CODE:
                return _EXCEPTION_TO_CODE[klass]
            if klass is OpError:
                return UNKNOWN
    raise KeyError(f"{cls!r} is not an OpError subclass")


def make_error(code, message, node_def=None, op=None):
    """Builds (without raising) the OpError subclass matching ``code``.

    Args:
        code: Integer status code; unknown codes give ``UnknownError``.
        message: Error message.
        node_def: Optional ``NodeDef`` of the failing op.
        op: Optional failing operation.

    Returns:
        An ``OpError`` subclass instance.
    """
    return exception_type_from_error_code(code)(node_def, op, message)


def raise_from_code(code, message, node_def=None, op=None):
    """Raises the OpError subclass matching ``code``.

    Args:
        code: Integer status code; unknown codes give ``UnknownError``.
        message: Error message.
        node_def: Optional ``NodeDef`` of the failing op.
        op: Optional failing operation.

    Raises:
        OpError: Always; the concrete subclass depends on ``code``.
    """
    raise make_error(code, message, node_def, op)


class _Status:
    """A status a `raise_exception_on_not_ok_status` block fills: ``code`` (OK until set) and
    ``message``; ``set(code, message)`` sets both."""

    __slots__ = ("code", "message")

    def __init__(self):
        self.code, self.message = OK, ""

    def set(self, code, message="") -> None:
        self.code, self.message = int(code), str(message)


@contextlib.contextmanager
def raise_exception_on_not_ok_status():
    """TF1's ``tf.errors.raise_exception_on_not_ok_status()``: yields a status for the block to
    fill (TF hands it to C API calls); when the block ends with the status not OK, raises the
    `OpError` subclass of its code with its message.

    Example::

        with kf.errors.raise_exception_on_not_ok_status() as status:
            status.set(kf.errors.NOT_FOUND, "no such file")   # -> NotFoundError
    """
    status = _Status()
    yield status
    if status.code != OK:
        raise_from_code(status.code, status.message)

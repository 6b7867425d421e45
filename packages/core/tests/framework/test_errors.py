"""Tests for kernflow.core.framework.errors."""

import copy

import pytest

from kernflow.core.framework import errors

EXPECTED = [
    ("CancelledError", "CANCELLED", 1),
    ("UnknownError", "UNKNOWN", 2),
    ("InvalidArgumentError", "INVALID_ARGUMENT", 3),
    ("DeadlineExceededError", "DEADLINE_EXCEEDED", 4),
    ("NotFoundError", "NOT_FOUND", 5),
    ("AlreadyExistsError", "ALREADY_EXISTS", 6),
    ("PermissionDeniedError", "PERMISSION_DENIED", 7),
    ("ResourceExhaustedError", "RESOURCE_EXHAUSTED", 8),
    ("FailedPreconditionError", "FAILED_PRECONDITION", 9),
    ("AbortedError", "ABORTED", 10),
    ("OutOfRangeError", "OUT_OF_RANGE", 11),
    ("UnimplementedError", "UNIMPLEMENTED", 12),
    ("InternalError", "INTERNAL", 13),
    ("UnavailableError", "UNAVAILABLE", 14),
    ("DataLossError", "DATA_LOSS", 15),
    ("UnauthenticatedError", "UNAUTHENTICATED", 16),
]


def test_ok_constant():
    assert errors.OK == 0


@pytest.mark.parametrize("cls_name,const_name,code", EXPECTED)
def test_codes_and_mapping(cls_name, const_name, code):
    cls = getattr(errors, cls_name)
    assert getattr(errors, const_name) == code
    assert cls.error_code == code
    assert issubclass(cls, errors.OpError)
    assert errors.exception_type_from_error_code(code) is cls
    assert errors.error_code_from_exception_type(cls) == code
    err = cls(None, None, "boom")
    assert err.error_code == code
    assert err.message == "boom"
    assert err.op is None and err.node_def is None
    assert str(err) == "boom"


def test_op_error_fields():
    node_def, op = object(), object()
    err = errors.OpError(node_def, op, "msg here", errors.ABORTED)
    assert err.node_def is node_def
    assert err.op is op
    assert err.message == "msg here"
    assert err.error_code == errors.ABORTED
    assert str(err) == "msg here"
    assert isinstance(err, Exception)


def test_op_error_default_code_is_unknown():
    assert errors.OpError(None, None, "x").error_code == errors.UNKNOWN


def test_unknown_code_maps_to_unknown_error():
    assert errors.exception_type_from_error_code(999) is errors.UnknownError
    assert errors.exception_type_from_error_code(0) is errors.UnknownError


def test_error_code_from_subclass_of_standard_error():
    class MyNotFound(errors.NotFoundError):
        pass

    assert errors.error_code_from_exception_type(MyNotFound) == 5
    assert errors.error_code_from_exception_type(errors.OpError) == 2
    with pytest.raises(KeyError):
        errors.error_code_from_exception_type(ValueError)


def test_raise_from_code():
    op = object()
    with pytest.raises(errors.OutOfRangeError) as info:
        errors.raise_from_code(errors.OUT_OF_RANGE, "end of seq", op=op)
    assert info.value.message == "end of seq"
    assert info.value.op is op
    assert info.value.error_code == 11
    with pytest.raises(errors.UnknownError):
        errors.raise_from_code(1234, "weird")


def test_make_error_does_not_raise():
    err = errors.make_error(errors.INVALID_ARGUMENT, "bad", node_def="nd")
    assert isinstance(err, errors.InvalidArgumentError)
    assert err.node_def == "nd"


def test_catchable_as_op_error():
    with pytest.raises(errors.OpError):
        raise errors.FailedPreconditionError(None, None, "uninitialized")


def test_copy_and_deepcopy():
    op = object()
    err = errors.ResourceExhaustedError("nd", op, "oom")
    for clone in (copy.copy(err), copy.deepcopy(err)):
        assert type(clone) is errors.ResourceExhaustedError
        assert clone is not err
        assert clone.message == "oom"
        assert clone.error_code == errors.RESOURCE_EXHAUSTED
        assert clone.node_def == "nd"
    assert copy.copy(err).op is op

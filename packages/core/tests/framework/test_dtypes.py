"""Tests for kernflow.core.framework.dtypes."""

import copy
import pickle

import numpy as np
import pytest

from kernflow.core.framework import dtypes

ENUMS = {
    "float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5,
    "int8": 6, "string": 7, "complex64": 8, "int64": 9, "bool": 10,
    "uint16": 17, "complex128": 18, "float16": 19, "resource": 20,
    "variant": 21, "uint32": 22, "uint64": 23,
}


@pytest.mark.parametrize("name,enum", sorted(ENUMS.items()))
def test_enum_names_and_refs(name, enum):
    dt = getattr(dtypes, name)
    assert dt.name == name
    assert dt.as_datatype_enum == enum
    assert not dt.is_ref_dtype
    ref = getattr(dtypes, name + "_ref")
    assert ref.name == name + "_ref"
    assert ref.as_datatype_enum == enum + 100
    assert ref.is_ref_dtype
    assert ref.base_dtype is dt
    assert dt._as_ref is ref
    assert dt.as_ref() is ref
    assert ref._as_ref is ref
    assert dt.base_dtype is dt
    assert dtypes.as_dtype(enum) is dt
    assert dtypes.as_dtype(enum + 100) is ref
    assert dtypes.as_dtype(name) is dt
    assert dtypes.as_dtype(name + "_ref") is ref


def test_aliases():
    assert dtypes.half is dtypes.float16
    assert dtypes.double is dtypes.float64
    assert dtypes.half_ref is dtypes.float16_ref
    assert dtypes.as_dtype("float") is dtypes.float32
    assert dtypes.as_dtype("double") is dtypes.float64
    assert dtypes.as_dtype("half") is dtypes.float16


def test_interned_and_immutable():
    assert dtypes.DType(1) is dtypes.float32
    assert dtypes.DType(101) is dtypes.float32_ref
    with pytest.raises(AttributeError):
        dtypes.float32._type_enum = 2
    with pytest.raises(AttributeError):
        dtypes.float32.foo = 1
    assert copy.copy(dtypes.int8) is dtypes.int8
    assert copy.deepcopy(dtypes.int8) is dtypes.int8
    assert pickle.loads(pickle.dumps(dtypes.uint16)) is dtypes.uint16
    with pytest.raises(TypeError):
        dtypes.DType(99)


def test_numpy_types():
    assert dtypes.float32.as_numpy_dtype is np.float32
    assert dtypes.float16.as_numpy_dtype is np.float16
    assert dtypes.int64.as_numpy_dtype is np.int64
    assert dtypes.bool.as_numpy_dtype is np.bool_
    assert dtypes.string.as_numpy_dtype is np.object_
    assert dtypes.resource.as_numpy_dtype is np.object_
    assert dtypes.variant.as_numpy_dtype is np.object_
    assert dtypes.float32_ref.as_numpy_dtype is np.float32


def test_equality_and_hash():
    assert dtypes.float32 == dtypes.float32
    assert dtypes.float32 != dtypes.float64
    assert dtypes.float32 != dtypes.float32_ref
    assert dtypes.float32 == "float32"
    assert dtypes.float32 == np.float32
    assert dtypes.float32 == np.dtype("float32")
    assert dtypes.int64 == "int64"
    assert dtypes.float32 != "not a type"
    assert dtypes.float32 != None  # noqa: E711
    assert dtypes.float32 != object()
    assert len({dtypes.float32, dtypes.as_dtype("float"), dtypes.int32}) == 2
    assert {dtypes.float32: 1}[dtypes.DType(1)] == 1


def test_repr_str():
    assert repr(dtypes.float32) == "kf.float32"
    assert repr(dtypes.int32_ref) == "kf.int32_ref"
    assert str(dtypes.bool) == "<dtype: 'bool'>"


def test_real_dtype():
    assert dtypes.complex64.real_dtype is dtypes.float32
    assert dtypes.complex128.real_dtype is dtypes.float64
    assert dtypes.int32.real_dtype is dtypes.int32
    assert dtypes.complex64_ref.real_dtype is dtypes.float32


def test_predicates():
    floating = {"float16", "float32", "float64"}
    integer = {"int8", "int16", "int32", "int64",
               "uint8", "uint16", "uint32", "uint64"}
    unsigned = {"uint8", "uint16", "uint32", "uint64"}
    complex_ = {"complex64", "complex128"}
    for name in ENUMS:
        dt = getattr(dtypes, name)
        assert dt.is_floating == (name in floating), name
        assert dt.is_integer == (name in integer), name
        assert dt.is_unsigned == (name in unsigned), name
        assert dt.is_complex == (name in complex_), name
        assert dt.is_bool == (name == "bool"), name
        assert dt.is_quantized is False
        assert dt.is_numpy_compatible == (name not in ("resource",
                                                        "variant")), name
    assert dtypes.float32_ref.is_floating


def test_min_max():
    assert dtypes.int8.min == -128 and dtypes.int8.max == 127
    assert dtypes.uint8.min == 0 and dtypes.uint8.max == 255
    assert dtypes.int32.max == 2 ** 31 - 1
    assert dtypes.int64.min == -(2 ** 63)
    assert dtypes.uint64.max == 2 ** 64 - 1
    assert dtypes.float32.max == np.finfo(np.float32).max
    assert dtypes.float64.min == np.finfo(np.float64).min
    assert dtypes.float16.max == 65504
    for name in ("bool", "string", "complex64", "complex128", "resource",
                 "variant"):
        dt = getattr(dtypes, name)
        with pytest.raises(TypeError):
            dt.min
        with pytest.raises(TypeError):
            dt.max


def test_size_and_limits():
    assert dtypes.float32.size == 4
    assert dtypes.float64.size == 8
    assert dtypes.int8.size == 1
    assert dtypes.complex128.size == 16
    assert dtypes.bool.size == 1
    assert dtypes.float16.size == 2
    assert dtypes.resource.size == 1
    assert dtypes.uint8.limits == (0, 255)
    assert dtypes.int16.limits == (0, 32767)
    assert dtypes.float32.limits == (0, 1)
    assert dtypes.bool.limits == (False, True)
    with pytest.raises(TypeError):
        dtypes.string.limits


def test_is_compatible_with():
    assert dtypes.float32.is_compatible_with(dtypes.float32)
    assert dtypes.float32.is_compatible_with(dtypes.float32_ref)
    assert not dtypes.float32_ref.is_compatible_with(dtypes.float32)
    assert dtypes.float32_ref.is_compatible_with("float32_ref")
    assert not dtypes.float32.is_compatible_with(dtypes.int32)
    assert dtypes.float32.is_compatible_with(np.float32)


def test_as_dtype_python_and_numpy():
    assert dtypes.as_dtype(float) is dtypes.float32
    assert dtypes.as_dtype(int) is dtypes.int32
    assert dtypes.as_dtype(bool) is dtypes.bool
    assert dtypes.as_dtype(str) is dtypes.string
    assert dtypes.as_dtype(bytes) is dtypes.string
    assert dtypes.as_dtype(complex) is dtypes.complex128
    assert dtypes.as_dtype(np.float64) is dtypes.float64
    assert dtypes.as_dtype(np.dtype("int16")) is dtypes.int16
    assert dtypes.as_dtype(np.dtype("uint32")) is dtypes.uint32
    assert dtypes.as_dtype(np.bool_) is dtypes.bool
    assert dtypes.as_dtype(np.object_) is dtypes.string
    assert dtypes.as_dtype(np.dtype("<U5")) is dtypes.string
    assert dtypes.as_dtype(np.dtype("S3")) is dtypes.string
    assert dtypes.as_dtype(np.complex64) is dtypes.complex64
    assert dtypes.as_dtype(dtypes.int8) is dtypes.int8


@pytest.mark.parametrize("bad", ["floaty", 99, 0, -1, 3.5, None, [1],
                                 np.dtype("datetime64[s]"), True])
def test_as_dtype_errors(bad):
    with pytest.raises(TypeError) as info:
        dtypes.as_dtype(bad)
    assert repr(bad) in str(info.value) or str(bad) in str(info.value)


def test_dtype_from_numpy():
    assert dtypes.dtype_from_numpy(np.dtype("float32")) is dtypes.float32
    assert dtypes.dtype_from_numpy(np.int64) is dtypes.int64
    assert dtypes.dtype_from_numpy(np.array(["a"]).dtype) is dtypes.string
    with pytest.raises(TypeError):
        dtypes.dtype_from_numpy(np.dtype("datetime64[s]"))


def test_result_dtype_scalars():
    infer = dtypes.result_dtype_for_python_value
    assert infer(1.0) is dtypes.float32
    assert infer(1) is dtypes.int32
    assert infer(2 ** 31 - 1) is dtypes.int32
    assert infer(2 ** 31) is dtypes.int64
    assert infer(-(2 ** 31) - 1) is dtypes.int64
    assert infer(True) is dtypes.bool
    assert infer("abc") is dtypes.string
    assert infer(b"abc") is dtypes.string
    assert infer(1j) is dtypes.complex128
    with pytest.raises(ValueError):
        infer(2 ** 64)
    with pytest.raises(TypeError):
        infer(None)
    with pytest.raises(TypeError):
        infer(object())


def test_result_dtype_numpy_keeps_dtype():
    infer = dtypes.result_dtype_for_python_value
    assert infer(np.zeros(3, np.float64)) is dtypes.float64
    assert infer(np.zeros(3, np.int64)) is dtypes.int64
    assert infer(np.zeros(3, np.uint8)) is dtypes.uint8
    assert infer(np.float64(1.0)) is dtypes.float64
    assert infer(np.int16(3)) is dtypes.int16
    assert infer(np.array(["x", "y"])) is dtypes.string
    assert infer(np.array([b"x", "y"], dtype=object)) is dtypes.string


def test_result_dtype_nested_lists():
    infer = dtypes.result_dtype_for_python_value
    assert infer([1, 2, 3]) is dtypes.int32
    assert infer([1, 2.0]) is dtypes.float32
    assert infer([[1, 2], [3, 2 ** 40]]) is dtypes.int64
    assert infer([[1, 2], [3.0, 2 ** 40]]) is dtypes.float32
    assert infer([True, False]) is dtypes.bool
    assert infer([True, 1]) is dtypes.int32
    assert infer([1, 1j]) is dtypes.complex128
    assert infer(["a", b"b"]) is dtypes.string
    assert infer((1.5, (2, 3))) is dtypes.float32
    assert infer([np.float64(1.0), 2]) is dtypes.float64
    assert infer([np.int8(1), np.int16(2)]) is dtypes.int16
    assert infer([np.zeros(2, np.float64), [1.0, 2.0]]) is dtypes.float64
    assert infer([]) is dtypes.float32
    assert infer([[], []]) is dtypes.float32
    with pytest.raises(TypeError):
        infer(["a", 1])
    with pytest.raises(TypeError):
        infer([1, None])


def test_all_exports_exist():
    for name in dtypes.__all__:
        assert hasattr(dtypes, name), name

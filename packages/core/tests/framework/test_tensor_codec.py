"""`tensor_codec`: numpy arrays as TensorProtos and back."""

import subprocess
import sys

import numpy as np
import pytest

from kernflow.core.framework import errors
from kernflow.core.framework import tensor_codec as tc
from kernflow.core.framework import tensor_util
from kernflow.core.protobuf import attr_value_pb2
from kernflow.core.protobuf import tensor_pb2
from kernflow.core.protobuf import types_pb2

NUMERIC = [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8,
           np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128]
SHAPES = [(), (0,), (3,), (2, 3), (2, 0, 4), (1, 1, 1, 5)]


def _sample(dtype, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) * 100
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x).astype(dtype)


def _proto(dtype, shape, content=b"", strings=()):
    p = tensor_pb2.TensorProto(dtype=dtype, tensor_content=content, string_val=list(strings))
    for d in shape:
        p.tensor_shape.dim.add(size=d)
    return p


# ---------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_numeric_round_trip_is_raw_little_endian_bytes(dtype, shape):
    a = _sample(dtype, shape)
    p = tc.tensor_to_proto(a)
    assert p.tensor_content == a.astype(np.dtype(dtype).newbyteorder("<")).tobytes()
    assert [d.size for d in p.tensor_shape.dim] == list(shape) and not p.string_val
    b = tc.proto_to_tensor(p)
    assert b.dtype == a.dtype and b.shape == a.shape and b.flags.writeable
    np.testing.assert_array_equal(a, b)
    c = tc.proto_to_tensor(tensor_pb2.TensorProto.FromString(p.SerializeToString()))
    np.testing.assert_array_equal(a, c)


def test_the_bytes_are_tensorflows():
    """What TF's make_tensor_proto / SerializeTensor write (a scalar's shape is present, empty)."""
    assert tc.serialize_tensor(np.array([1.5, 2.0], np.float32)) == \
        b'\x08\x01\x12\x04\x12\x02\x08\x02"\x08\x00\x00\xc0?\x00\x00\x00@'
    assert tc.serialize_tensor(np.float32(1)) == b'\x08\x01\x12\x00"\x04\x00\x00\x80?'
    assert tc.serialize_tensor(np.array(b"a", object)) == b"\x08\x07\x12\x00B\x01a"
    assert tc.serialize_tensor(np.array([True, False])) == b'\x08\n\x12\x04\x12\x02\x08\x02"\x02\x01\x00'


def test_bfloat16_and_other_dtypes_without_a_datatype_are_refused():
    # (kernflow has no DT_BFLOAT16; a numpy dtype without a DataType is a TypeError)
    with pytest.raises(TypeError):
        tc.tensor_to_proto(np.array(["2020-01-01"], "datetime64[D]"))


def test_non_contiguous_and_big_endian_inputs():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::2].T
    assert not a.flags.c_contiguous
    np.testing.assert_array_equal(tc.proto_to_tensor(tc.tensor_to_proto(a)), a)
    be = np.arange(5, dtype=">f8")
    p = tc.tensor_to_proto(be)
    assert p.tensor_content == np.arange(5, dtype="<f8").tobytes()
    out = tc.proto_to_tensor(p)
    assert out.dtype.isnative
    np.testing.assert_array_equal(out, be)
    bcast = np.broadcast_to(np.float32(3), (2, 3))
    np.testing.assert_array_equal(tc.proto_to_tensor(tc.tensor_to_proto(bcast)),
                                  np.full((2, 3), 3, np.float32))


def test_a_decoded_array_is_fresh():
    a = np.arange(4, dtype=np.int64)
    p = tc.tensor_to_proto(a)
    b = tc.proto_to_tensor(p)
    b[0] = 99
    np.testing.assert_array_equal(tc.proto_to_tensor(p), a)


@pytest.mark.parametrize("value", [
    np.array([b"a", b"", "\u00e9t\u00e9".encode()], dtype=object),
    np.array(["x", "yz"]),                    # unicode numpy array
    np.array([b"ab", b"c"]),                  # fixed-width bytes
    np.array(["\u00e9", b"b", bytearray(b"c")], dtype=object),
    np.array(b"scalar", dtype=object),
    np.empty((0, 3), dtype=object),
    np.array([[b"a", b"bb"], [b"ccc", b"\x00\xff"]], dtype=object),
    np.array([b"x" * 300, b"y" * 20000], dtype=object),   # multi-byte varint lengths
], ids=lambda v: f"{v.dtype}{list(v.shape)}")
@pytest.mark.parametrize("string_list", [False, True], ids=["string_val", "tensor_content"])
def test_strings(value, string_list):
    as_bytes = np.vectorize(lambda s: s.encode() if isinstance(s, str) else bytes(s), otypes=[object])
    expected = as_bytes(value) if value.size else value
    p = tc.tensor_to_proto(value, string_list=string_list)
    assert p.dtype == types_pb2.DT_STRING
    if string_list:
        assert not p.string_val and (bool(p.tensor_content) == bool(value.size))
        lengths, total = tc.encode_string_list(expected.reshape(-1).tolist())
        assert p.tensor_content == lengths + b"".join(expected.reshape(-1).tolist())
    else:
        assert not p.tensor_content and list(p.string_val) == expected.reshape(-1).tolist()
    b = tc.proto_to_tensor(p)
    assert b.dtype == object and b.shape == value.shape
    assert b.tolist() == expected.tolist()
    assert tensor_util.make_ndarray(p).tolist() == expected.tolist()


def test_a_string_tensor_holds_bytes_or_str_only():
    with pytest.raises(TypeError, match="string tensor holds a int"):
        tc.tensor_to_proto(np.array([b"a", 3], dtype=object))


# ---------------------------------------------------------------------------- out= and content=
def test_out_fills_an_existing_proto():
    attr = attr_value_pb2.AttrValue()
    got = tc.tensor_to_proto(np.arange(6, dtype=np.int32).reshape(2, 3), out=attr.tensor)
    assert got is attr.tensor and attr.HasField("tensor")
    np.testing.assert_array_equal(tc.proto_to_tensor(attr.tensor), np.arange(6).reshape(2, 3))
    tc.tensor_to_proto(np.int8(-1), out=attr.list.tensor.add())
    assert attr.list.tensor[0].HasField("tensor_shape") and tc.proto_to_tensor(attr.list.tensor[0]) == -1


@pytest.mark.parametrize("wrap", [bytes, memoryview, lambda b: memoryview(b"--" + b)[2:]],
                         ids=["bytes", "memoryview", "slice"])
def test_content_kept_outside_the_proto(wrap):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    full = tc.tensor_to_proto(a)
    head = tensor_pb2.TensorProto()
    head.CopyFrom(full)
    head.ClearField("tensor_content")
    b = tc.proto_to_tensor(head, wrap(full.tensor_content))
    assert b.flags.writeable and b.dtype.isnative
    np.testing.assert_array_equal(b, a)
    s = tc.tensor_to_proto(np.array([b"ab", b"", b"c"], object), string_list=True)
    content = s.tensor_content
    s.ClearField("tensor_content")
    assert tc.proto_to_tensor(s, wrap(content)).tolist() == [b"ab", b"", b"c"]
    with pytest.raises(errors.InvalidArgumentError, match=r"float32\[3, 4\] holds 47 bytes, expected 48"):
        tc.proto_to_tensor(head, wrap(full.tensor_content[:-1]))


def test_content_that_is_the_array_itself_is_copied():
    a = np.arange(3, dtype=">i4")
    p = tc.tensor_to_proto(a)
    b = tc.proto_to_tensor(p, a)
    assert b is not a and b.dtype.isnative
    np.testing.assert_array_equal(b, a)
    c = np.arange(3.0)
    d = tc.proto_to_tensor(tc.tensor_to_proto(c), c)
    d[0] = 7
    assert c[0] == 0


# ---------------------------------------------------------------------------- malformed protos
def test_a_wrong_byte_count_names_dtype_shape_and_sizes():
    p = tc.tensor_to_proto(np.zeros(3, np.float32))
    p.tensor_content = b"\0" * 8
    with pytest.raises(errors.InvalidArgumentError) as e:
        tc.proto_to_tensor(p)
    assert not isinstance(e.value, errors.DataLossError)
    assert e.value.message == ("Cannot parse tensor from proto: TensorProto of float32[3] holds 8 "
                               "bytes, expected 12")
    with pytest.raises(errors.InvalidArgumentError, match=r"complex128\[2, 2\] holds 0 bytes, expected 64"):
        tc.proto_to_tensor(_proto(types_pb2.DT_COMPLEX128, [2, 2]))


@pytest.mark.parametrize("proto, match", [
    (_proto(types_pb2.DT_INVALID, [2]), r"no dtype \(DT_INVALID\)"),
    (_proto(types_pb2.DT_RESOURCE, []), "a resource tensor has no TensorProto encoding"),
    (_proto(types_pb2.DT_VARIANT, [1]), "a variant tensor has no TensorProto encoding"),
    (_proto(99, [1]), r"<DataType 99> tensor has no TensorProto encoding"),
    (_proto(types_pb2.DT_FLOAT, [2, -1]), r"fully defined shape, got \[2, -1\]"),
    (tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_shape={"unknown_rank": True}),
     "fully defined shape, got <unknown>"),
    (_proto(types_pb2.DT_STRING, [2, 2], strings=[b"a", b"b", b"c"]),
     r"string tensor of shape \[2, 2\] holds 3 elements, expected 4"),
    (_proto(types_pb2.DT_STRING, [2], content=b"\x01\x02abcd"),
     r"string tensor of shape \[2\]: its 2 lengths add up to 3 bytes, but 4 follow them"),
    (_proto(types_pb2.DT_STRING, [3], content=b"\x01\x01"),
     r"tensor_content of 2 bytes holds fewer than 3 lengths"),
    (_proto(types_pb2.DT_STRING, [2], content=b"\xff\xff\xff\xff\xff\x01\x00"), "more than 5 bytes"),
], ids=["invalid", "resource", "variant", "unknown", "unknown-dim", "unknown-rank", "string-count",
        "string-lengths", "string-few-lengths", "string-varint"])
def test_malformed_protos_are_invalid_argument(proto, match):
    with pytest.raises(errors.InvalidArgumentError, match=match):
        tc.proto_to_tensor(proto)
    with pytest.raises(errors.InvalidArgumentError, match=match):
        tensor_util.make_ndarray(proto)


def test_parse_tensor():
    a = np.arange(6, dtype=np.uint16).reshape(3, 2)
    np.testing.assert_array_equal(tc.parse_tensor(tc.serialize_tensor(a)), a)
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse 8 bytes as a TensorProto"):
        tc.parse_tensor(b"garbage\xff")


# ---------------------------------------------------------------------------- receive buffers
def test_receive_buffer():
    shape = tc.shape_proto((2, 3))
    out, view = tc.receive_buffer(types_pb2.DT_INT32, shape, 24)
    assert out.shape == (2, 3) and out.dtype == np.dtype("<i4") and view.nbytes == 24
    view[:] = np.arange(6, dtype="<i4").tobytes()
    np.testing.assert_array_equal(tc.to_native(out), np.arange(6).reshape(2, 3))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"X announces total_bytes=20, but a int32 tensor of shape \[2, 3\] has 24 "):
        tc.receive_buffer(types_pb2.DT_INT32, shape, 20, "X")
    with pytest.raises(errors.InvalidArgumentError, match="X announces a string tensor, which has no raw"):
        tc.receive_buffer(types_pb2.DT_STRING, shape, 0, "X")
    with pytest.raises(errors.InvalidArgumentError, match="X has no dtype"):
        tc.receive_buffer(0, shape, 0, "X")


def test_to_native():
    le = np.arange(3, dtype="<u4")
    assert tc.to_native(le) is le
    be = np.arange(3, dtype=">u4")
    assert tc.to_native(be).dtype.isnative and tc.to_native(be).tolist() == [0, 1, 2]


# ---------------------------------------------------------------------------- host values
def test_python_values_use_tf_default_dtypes():
    assert tc.proto_to_tensor(tc.tensor_to_proto(1.5)).dtype == np.float32
    assert tc.proto_to_tensor(tc.tensor_to_proto([1, 2])).dtype == np.int32
    assert tc.proto_to_tensor(tc.tensor_to_proto(b"hi")).tolist() == b"hi"


def test_host_values():
    from kernflow.core.runtime.resource_mgr import Var
    v = Var("v")
    v.assign(np.arange(3, dtype=np.float64))
    np.testing.assert_array_equal(tc.to_host_array(v), [0, 1, 2])

    class Boxed:
        def __init__(self, value):
            self.value = value
    tc.register_host_type(Boxed, lambda b: b.value)
    try:
        assert tc.proto_to_tensor(tc.tensor_to_proto(Boxed(np.int16(4)))).tolist() == 4
    finally:
        tc._HOST_TYPES.pop(Boxed)
    with pytest.raises(TypeError, match="cannot send a value of type object over the wire"):
        tc.tensor_to_proto(object())


# ---------------------------------------------------------------------------- tensor_util on top
@pytest.mark.parametrize("value", [np.float32(2.5), np.arange(5, dtype=np.int64), [[1.0, 2.0]],
                                   np.array([b"a", b"bc"], object), True, np.zeros((2, 0), np.uint8)],
                         ids=repr)
def test_make_tensor_proto_writes_the_codecs_bytes(value):
    arr = tensor_util.to_numpy(value)
    assert tensor_util.make_tensor_proto(value).SerializeToString() == tc.serialize_tensor(arr)


def test_make_tensor_proto_keeps_dtype_shape_and_broadcast():
    p = tensor_util.make_tensor_proto(5, dtype="float64", shape=[2, 2])
    assert p.dtype == types_pb2.DT_DOUBLE
    np.testing.assert_array_equal(tensor_util.make_ndarray(p), np.full((2, 2), 5.0))
    assert tensor_util.make_ndarray(tensor_util.make_tensor_proto(["a", "b"])).tolist() == [b"a", b"b"]
    with pytest.raises(TypeError, match="resource tensor"):
        tensor_util.make_tensor_proto(1, dtype="resource")


def test_importing_the_codec_needs_no_grpc_or_client():
    code = ("import sys; import kernflow.core.framework.tensor_codec; "
            "print(sorted(m for m in sys.modules if m == 'grpc' or m.startswith('kernflow.client')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

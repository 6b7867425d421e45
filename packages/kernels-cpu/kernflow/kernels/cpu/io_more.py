"""CPU kernels of the tf.io file and serialization ops (kernflow.core.ops.io_ops_more).

ReadFile and WriteFile use `kernflow.core.gfile` on paths confined to the process's file root
(kernflow.core.runtime.file_root) when one is set.
"""

from __future__ import annotations

import gzip
import os
import zlib

import numpy as np

from kernflow.core import gfile
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_codec
from kernflow.core.runtime import file_root

DEVICE = "CPU"


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


def _bytes(v) -> bytes:
    return v.encode() if isinstance(v, str) else bytes(v)


def _scalar_bytes(ctx, value, what: str) -> bytes:
    arr = np.asarray(value, dtype=object)
    if arr.ndim != 0:
        raise _invalid(ctx, f"{what} must be a scalar string, got shape {list(arr.shape)}")
    return _bytes(arr[()])


def _each(fn, value):
    """fn over every element of a string array; an object array of the same shape."""
    arr = np.asarray(value, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(arr.reshape(-1)):
        flat[i] = fn(_bytes(v))
    return out


def _read_file(ctx):
    def compute(filename):
        path = file_root.check(f"ReadFile node {ctx.name}", _scalar_bytes(ctx, filename, "filename"),
                               write=False)
        with gfile.GFile(path, "rb") as f:
            return np.array(f.read(), dtype=object)
    return compute


def _write_file(ctx):
    def compute(filename, contents):
        path = file_root.check(f"WriteFile node {ctx.name}", _scalar_bytes(ctx, filename, "filename"),
                               write=True)
        data = _scalar_bytes(ctx, contents, "contents")
        parent = os.path.dirname(path)
        if parent:
            gfile.MakeDirs(parent)
        with gfile.GFile(path, "wb") as f:
            f.write(data)
    return compute


def _decompress_fn(ctx, kind: str):
    if kind == "":
        return lambda b: b
    if kind not in ("ZLIB", "GZIP"):
        raise _invalid(ctx, f"Only ZLIB, GZIP or NONE are supported compressions, got {kind!r}")
    decompress = zlib.decompress if kind == "ZLIB" else gzip.decompress

    def run(b: bytes) -> bytes:
        try:
            return decompress(b)
        except (zlib.error, OSError, EOFError) as e:
            raise errors.DataLossError(None, None, f"{ctx.op_type} node {ctx.name}: {kind} "
                                       f"decompression failed: {e}") from None
    return run


def _decode_compressed(ctx):
    kind = ctx.get_attr("compression_type")
    fn = _decompress_fn(ctx, kind.decode() if isinstance(kind, bytes) else kind)
    return lambda data: _each(fn, data)


def _decode_json_example(ctx):
    from google.protobuf import json_format

    from kernflow.core.protobuf import example_pb2

    def one(text: bytes) -> bytes:
        try:
            return json_format.Parse(text.decode("utf-8"), example_pb2.Example()).SerializeToString()
        except (json_format.ParseError, UnicodeDecodeError) as e:
            raise _invalid(ctx, f"Error while parsing JSON as an Example: {e}") from None
    return lambda json_examples: _each(one, json_examples)


def _serialize_tensor(ctx):
    dtype = ctx.input_dtypes[0].base_dtype

    def compute(tensor):
        if dtype in (_dtypes.resource, _dtypes.variant):
            raise _invalid(ctx, f"cannot serialize a {dtype.name} tensor")
        return np.array(tensor_codec.serialize_tensor(np.asarray(tensor, dtype.as_numpy_dtype)), dtype=object)
    return compute


def _parse_tensor(ctx):
    from google.protobuf.message import DecodeError

    from kernflow.core.protobuf import tensor_pb2
    out_type = ctx.get_attr("out_type").base_dtype

    def compute(serialized):
        arr = np.asarray(serialized, dtype=object)
        if arr.ndim != 0:
            raise _invalid(ctx, f"Expected `serialized` to be a scalar, got shape: {list(arr.shape)}")
        try:
            proto = tensor_pb2.TensorProto.FromString(_bytes(arr[()]))
            got = _dtypes.as_dtype(proto.dtype)
        except (DecodeError, ValueError, TypeError, KeyError) as e:
            raise _invalid(ctx, f"Could not parse `serialized` as TensorProto: {e}") from None
        if got != out_type:
            raise _invalid(ctx, f"Type mismatch between parsed tensor ({got.name}) and dtype "
                                f"({out_type.name})")
        try:
            return tensor_codec.proto_to_tensor(proto)
        except errors.InvalidArgumentError as e:
            raise _invalid(ctx, f"Invalid TensorProto: {e.message}") from None
    return compute


def register(registry):
    """Registers the CPU kernels of the io_more family."""
    registry.register("ReadFile", DEVICE, _read_file, expensive=True)
    registry.register("WriteFile", DEVICE, _write_file, expensive=True)
    registry.register("DecodeCompressed", DEVICE, _decode_compressed)
    registry.register("DecodeJSONExample", DEVICE, _decode_json_example)
    registry.register("SerializeTensor", DEVICE, _serialize_tensor)
    registry.register("ParseTensor", DEVICE, _parse_tensor)

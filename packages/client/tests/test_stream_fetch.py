"""Streamed fetches on the client: `codec.split_content`, RunStepStream assembly, static sizes."""

from __future__ import annotations

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import codec, grpc_session
from kernflow.client.fetch_stream import read_stream as _read_stream
from kernflow.client.protobuf import master_pb2, worker_pb2
from kernflow.core.framework import errors

R = worker_pb2.RecvTensorResponse
S = master_pb2.RunStepStreamResponse


@pytest.mark.parametrize("value", [np.arange(10, dtype=np.float32), np.zeros((0, 3)), np.float64(2.5),
                                   np.array([b"x", b"", b"yz" * 10], dtype=object), None])
def test_split_content_round_trip(value):
    chunks = list(codec.iter_recv_chunks(value, is_dead=value is None, chunk_bytes=8))
    raw = [m.SerializeToString() for m in chunks]
    parts = [codec.split_content(b, R) for b in raw]
    for (head, content), msg in zip(parts, chunks):
        assert isinstance(content, memoryview) and bytes(content) == msg.content
        assert not head.content and head.total_bytes == msg.total_bytes and head.dtype == msg.dtype
        assert list(head.string_val) == list(msg.string_val) and head.is_dead == msg.is_dead
    got, is_dead = codec.assemble_recv_chunks(parts)
    if value is None:
        assert got is None and is_dead
    else:
        want, _ = codec.assemble_recv_chunks(chunks)
        assert not is_dead and got.dtype == want.dtype and got.shape == want.shape
        assert got.tolist() == want.tolist()


def test_split_content_does_not_copy_and_keeps_later_fields():
    msg = S(dtype=1, total_bytes=4, content=b"\x00\x00\x80\x3f", fetch_index=5)
    buf = msg.SerializeToString()
    head, content = codec.split_content(buf, S)
    assert content.obj is buf and bytes(content) == b"\x00\x00\x80\x3f"
    assert head.fetch_index == 5 and head.total_bytes == 4 and not head.content
    head, content = codec.split_content(S(done=True).SerializeToString(), S)
    assert head.done and len(content) == 0


@pytest.mark.parametrize("buf", [b"\x1a\x05ab", b"\x1a", b"\x0f", b"\x08\xff"])
def test_split_content_rejects_malformed_messages(buf):
    with pytest.raises(errors.DataLossError, match="malformed RecvTensorResponse"):
        codec.split_content(buf, R)


def _stream(*fetch_values, done=True, order=None):
    items = []
    for i in order if order is not None else range(len(fetch_values)):
        for m in codec.iter_recv_chunks(fetch_values[i], chunk_bytes=16):
            tagged = m.SerializeToString() + S(fetch_index=i).SerializeToString()   # (merged on parse)
            items.append(codec.split_content(tagged, S))
    if done:
        items.append((S(done=True), memoryview(b"")))
    return iter(items)


def test_read_stream_assembles_fetches_in_order():
    a, b = np.arange(20, dtype=np.int64), np.array([1.5], np.float32)
    (got_a, got_b), meta = _read_stream(_stream(a, b), ["a:0", "b:0"], "m")
    np.testing.assert_array_equal(got_a, a)
    np.testing.assert_array_equal(got_b, b)
    assert meta is None


def test_read_stream_checks_what_the_master_sent():
    a = np.arange(20, dtype=np.int64)
    with pytest.raises(errors.DataLossError, match="ended early"):
        _read_stream(_stream(a, done=False), ["a:0"], "m")
    with pytest.raises(errors.InternalError, match="did not return"):
        _read_stream(_stream(a), ["a:0", "b:0"], "m")
    with pytest.raises(errors.InternalError, match="out of order"):
        _read_stream(_stream(a, a, order=[0, 1, 0]), ["a:0", "b:0"], "m")
    with pytest.raises(errors.InternalError, match="out of order"):
        _read_stream(_stream(a, a, order=[1, 1]), ["a:0"], "m")
    dead = iter([(S(is_dead=True, dtype=1), memoryview(b"")), (S(done=True), memoryview(b""))])
    with pytest.raises(errors.InvalidArgumentError, match="was not computed"):
        _read_stream(dead, ["a:0"], "m")


def test_static_sizes_decide_streaming():
    g = kf.Graph()
    with g.as_default():
        big = kf.zeros([512, 1024], name="big")                 # 2 MiB
        small = kf.zeros([3], name="small")
        unknown = kf.placeholder(kf.float32, [None], name="unknown")
        words = kf.constant([b"a"], name="words")
    assert grpc_session._static_bytes(g, ("big:0",)) == 2 << 20
    assert grpc_session._static_bytes(g, ("big:0", "small:0")) == (2 << 20) + 12
    assert grpc_session._static_bytes(g, ("unknown:0",)) is None
    assert grpc_session._static_bytes(g, ("words:0",)) is None
    assert grpc_session._static_bytes(g, ("nope:0",)) is None


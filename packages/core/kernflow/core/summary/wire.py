"""Serialized summaries and events built without a protobuf message on the training thread.

A summary op's output is a serialized ``Summary``. Merging summaries and writing them to an event
file need to know each value's tag (MergeSummary rejects duplicates; FileWriter keeps a tag's
metadata only the first time) and otherwise treat the bytes as opaque. Parsing them back into
a message for that costs more than producing them (tools/bench_summaries.py: ~10 us per parse
inside a training step, three parses per step for two merged scalars).

`SummaryBytes` is what the summary kernels of this process return: the serialized Summary
itself (a `bytes`, so everything that takes a summary's bytes takes it unchanged) that also
remembers its values' tags and whether any value has metadata. MergeSummary and
`FileWriter.add_summary` read those instead of parsing; bytes of any other origin (a summary
fetched from another process, or built by the caller) are parsed as before. The two paths give
byte-identical event files (tests/test_summary_wire.py).

`event_bytes` encodes ``Event(wall_time, step, summary)`` exactly as protobuf serializes it
(fields in number order; proto3 leaves a zero step out).
"""

from __future__ import annotations

import struct

__all__ = ["SummaryBytes", "summary_bytes", "scalar_prefix", "scalar_summary", "event_bytes", "varint"]


class SummaryBytes(bytes):
    """A serialized Summary with `tags` (its values' tags, in order) and `has_metadata`."""

    tags: tuple = ()
    has_metadata: bool = False


def summary_bytes(data: bytes, tags: tuple, has_metadata: bool = False) -> SummaryBytes:
    """`data` (a serialized Summary whose values have `tags`) as a SummaryBytes."""
    out = SummaryBytes(data)
    out.tags = tags
    if has_metadata:
        out.has_metadata = True
    return out


def varint(n: int) -> bytes:
    """The protobuf base-128 varint of `n` (negative numbers as their 64-bit two's complement)."""
    if 0 <= n < 0x4000:   # a summary's length, most steps: one or two bytes, no loop
        return _ONE_BYTE[n] if n < 0x80 else bytes(((n & 0x7F) | 0x80, n >> 7))
    n &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
_PACK_F32 = struct.Struct("<f").pack


def scalar_prefix(tag: str) -> bytes:
    """``Summary(value=[Value(tag=tag, simple_value=x)])`` serialized, up to x's 4 bytes.

    protobuf writes fields in number order, so the float (Value field 2, fixed32, tag byte 0x15)
    is last: a scalar summary is this prefix plus x's little-endian float32 bytes.
    """
    name = tag.encode("utf-8")
    value = b"\x0a" + varint(len(name)) + name + b"\x15"      # Value: tag (field 1), simple_value
    return b"\x0a" + varint(len(value) + 4) + value             # Summary: value (field 1)


def scalar_summary(tag: str, value: float) -> SummaryBytes:
    """A one-value scalar Summary (as `kf.summary.scalar` makes), serialized."""
    try:
        data = _PACK_F32(value)
    except OverflowError:   # beyond float32: infinity, as protobuf stores it
        data = _PACK_F32(float("inf") if value > 0 else float("-inf"))
    return summary_bytes(scalar_prefix(tag) + data, (tag,))
_WALL_TIME = struct.Struct("<Bd").pack             # field 1 (fixed64) with its tag byte


def event_bytes(wall_time: float, step: int | None, summary: bytes) -> bytes:
    """``Event(wall_time=wall_time, step=step, summary=<summary>).SerializeToString()``."""
    parts = [_WALL_TIME(0x09, wall_time)] if wall_time else []
    if step:
        parts.append(b"\x10")                                    # field 2, varint
        parts.append(varint(int(step)))
    parts.append(b"\x2a")                                        # field 5, length-delimited
    parts.append(varint(len(summary)))
    parts.append(summary)
    return b"".join(parts)

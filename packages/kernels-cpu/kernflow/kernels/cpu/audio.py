"""Numpy kernels of the audio ops (kernflow.core.ops.audio_ops): 16-bit PCM WAV in and out.

The decoder walks the RIFF chunks the way TF's does, so that it accepts and rejects the same files:
before ``fmt `` only ``JUNK`` and ``bext`` chunks may come; the ``fmt `` chunk is 16 or 18 bytes
of PCM, 16 bits per sample; after it every chunk but the one ``data`` chunk is skipped. Chunk
sizes are taken as written (no pad byte after an odd-sized chunk), a skip past the end of the
file ends the walk, and the ``data`` chunk is read in whole frames only. Samples map to floats as
int16 / 32768; the encoder maps back as round-half-away-from-zero of x * 32768, clamped to int16.
"""

from __future__ import annotations

import struct

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"
_TOO_SHORT = "Data too short when trying to read string"
_PRE_FMT_SKIPPED = (b"JUNK", b"bext")
_INT32_MAX = 2**31 - 1
_U32_MAX = 2**32 - 1
_HEADER = struct.Struct("<4sI4s4sIHHIIHH4sI")


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


def _text(b: bytes) -> str:
    return b.decode("ascii", "backslashreplace")


class _Cursor:
    """Reads little-endian fields from the bytes of a WAV file; running past the end is an error."""

    def __init__(self, ctx, data: bytes):
        self.ctx, self.data, self.pos = ctx, data, 0

    def skip(self, n: int):
        if self.pos + n > len(self.data):
            raise _invalid(self.ctx, _TOO_SHORT)
        self.pos += n

    def take(self, n: int) -> bytes:
        start = self.pos
        self.skip(n)
        return self.data[start:self.pos]

    def u16(self) -> int:
        return int.from_bytes(self.take(2), "little")

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "little")

    def expect(self, tag: bytes):
        got = self.take(len(tag))
        if got != tag:
            raise _invalid(self.ctx, f"Header mismatch: Expected {_text(tag)} but found {_text(got)}")


def _find_fmt(cur: _Cursor):
    """Moves past the chunks before ``fmt `` (JUNK and bext only) and the fmt chunk's id."""
    while True:
        chunk_id = cur.take(4)
        if chunk_id == b"fmt ":
            return cur.u32()
        if chunk_id not in _PRE_FMT_SKIPPED:
            raise _invalid(cur.ctx, f"Unexpected field {_text(chunk_id)}")
        cur.skip(cur.u32())


def _read_fmt(cur: _Cursor):
    """The fmt chunk -> (channels, sample_rate), checking it describes 16-bit PCM consistently."""
    def bad(msg):
        return _invalid(cur.ctx, msg)
    fmt_size = _find_fmt(cur)
    if fmt_size not in (16, 18):
        raise bad(f"Bad format chunk size for WAV: Expected 16 or 18, but got {fmt_size}")
    audio_format = cur.u16()
    if audio_format != 1:
        raise bad(f"Bad audio format for WAV: Expected 1 (PCM), but got {audio_format}")
    channels = cur.u16()
    if channels < 1:
        raise bad(f"Bad number of channels for WAV: Expected at least 1, but got {channels}")
    rate, byte_rate, block, bits = cur.u32(), cur.u32(), cur.u16(), cur.u16()
    if bits != 16:
        raise bad(f"Can only read 16-bit WAV files, but received {bits}")
    if block != 2 * channels:
        raise bad(f"Bad bytes per sample in WAV header: Expected {2 * channels} but got {block}")
    if byte_rate != block * rate:
        raise bad(f"Bad bytes per second in WAV header: Expected {block * rate} but got {byte_rate} "
                  f"(sample_rate={rate}, bytes_per_sample={block})")
    if fmt_size == 18:
        cur.pos += 2  # cbSize of WAVEFORMATEX, unused; may run past the end (then no data is found)
    return channels, rate


def _read_data(cur: _Cursor, channels: int):
    """Walks the chunks after fmt; returns the int16 samples [frames, channels] of the data chunk."""
    samples = None
    while cur.pos < len(cur.data):
        chunk_id, size = cur.take(4), cur.u32()
        if size > _INT32_MAX:
            raise _invalid(cur.ctx, f"WAV data chunk '{_text(chunk_id)}' is too large: {size} bytes, "
                                    f"but the limit is {_INT32_MAX}")
        if chunk_id != b"data":
            cur.pos += size
            continue
        if samples is not None:
            raise _invalid(cur.ctx, "More than one data chunk found in WAV")
        frames = size // (2 * channels)
        raw = cur.take(2 * channels * frames)
        samples = np.frombuffer(raw, "<i2").reshape(frames, channels)
    if samples is None:
        raise _invalid(cur.ctx, "No data chunk found in WAV")
    return samples


def _fit(samples, desired_samples, desired_channels):
    """Truncates / zero-pads the frames and keeps the first / repeats the last channel."""
    frames, channels = samples.shape
    n = frames if desired_samples == -1 else desired_samples
    c = channels if desired_channels == -1 else desired_channels
    out = np.zeros((n, c), np.float32)
    keep = min(n, frames)
    src = np.minimum(np.arange(c), channels - 1)
    out[:keep] = samples[:keep][:, src].astype(np.float32) / np.float32(32768)
    return out


def _decode_wav(ctx):
    desired_channels = ctx.get_attr("desired_channels")
    desired_samples = ctx.get_attr("desired_samples")

    def compute(contents):
        contents = np.asarray(contents, dtype=object)
        if contents.ndim != 0:
            raise _invalid(ctx, f"contents must be scalar, got shape {list(contents.shape)}")
        data = contents.item()
        cur = _Cursor(ctx, data.encode() if isinstance(data, str) else bytes(data))
        cur.expect(b"RIFF")
        cur.u32()  # the RIFF size is not checked (as in TF)
        cur.expect(b"WAVE")
        channels, rate = _read_fmt(cur)
        samples = _read_data(cur, channels)
        audio = _fit(samples, desired_samples, desired_channels)
        return audio, np.array(rate, np.uint32).astype(np.int32)
    return compute


def _to_int16(audio):
    """float audio -> int16: x * 32768 rounded half away from zero, clamped; NaN -> 0 (as TF)."""
    x = np.clip(audio.astype(np.float64) * 32768.0, -32768.0, 32767.0)
    x = np.trunc(x + np.copysign(0.5, x))
    return np.nan_to_num(x, nan=0.0).astype("<i2")


def _encode_wav(ctx):
    def compute(audio, sample_rate):
        audio, sample_rate = np.asarray(audio, np.float32), np.asarray(sample_rate)
        if audio.ndim != 2:
            raise _invalid(ctx, f"audio must be 2-dimensional, got shape {list(audio.shape)}")
        if sample_rate.ndim != 0:
            raise _invalid(ctx, f"Input sample_rate should be a scalar tensor, got "
                                f"{list(sample_rate.shape)} instead.")
        frames, channels = audio.shape
        rate = int(sample_rate)
        if not 0 < channels < 2**16:
            raise _invalid(ctx, f"num_channels must be in (0, 2^16), got: {channels}")
        if rate <= 0:
            raise _invalid(ctx, f"sample_rate must be in (0, 2^32), got: {rate}")
        data_size = 2 * frames * channels
        if 36 + data_size > _U32_MAX:
            raise _invalid(ctx, f"audio of {frames} samples x {channels} channels is too large for a "
                                f"WAV file ({data_size} bytes of data, at most {_U32_MAX - 36})")
        block = 2 * channels
        header = _HEADER.pack(b"RIFF", 36 + data_size, b"WAVE", b"fmt ", 16, 1, channels, rate,
                              (rate * block) & _U32_MAX, block, 16, b"data", data_size)
        return np.array(header + _to_int16(audio).tobytes(), dtype=object)
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    for op, factory in {"DecodeWav": _decode_wav, "EncodeWav": _encode_wav}.items():
        registry.register(op, device, factory)

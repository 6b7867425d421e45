"""CPU kernels of the summary ops (kernflow.core.ops.summary_ops): each returns a serialized Summary.

Histograms use TF's default bucket layout and its sparse encoding (a run of empty buckets is one
entry whose limit is the run's right edge), so the protos equal TensorFlow's for the same values.
"""

from __future__ import annotations

import io
import struct
import sys
import wave

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.framework import tensor_codec
from kernflow.core.summary.wire import SummaryBytes, scalar_prefix, summary_bytes

DEVICE = "CPU"

# Pixels that are NaN or infinite in a float image (TF's ImageSummary bad_color default: opaque red).
_BAD_COLOR = np.array([255, 0, 0, 255], np.uint8)
_PIL_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def _default_bucket_limits() -> np.ndarray:
    # Limits grow by 10% from 1e-12 to 1e20 (each value computed by repeated multiplication, as TF
    # does), mirrored for negatives, with 0 in the middle and +-DBL_MAX at the ends.
    pos, v = [], 1.0e-12
    while v < 1.0e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    return np.array([-x for x in reversed(pos)] + [0.0] + pos)


_LIMITS = _default_bucket_limits()


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


def _pb():
    from kernflow.core.protobuf import summary_pb2
    return summary_pb2


def _out(summary) -> np.ndarray:
    return np.array(summary.SerializeToString(), dtype=object)


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _scalar_tag(ctx, value, what: str = "tag") -> str:
    arr = np.asarray(value, dtype=object)
    if arr.ndim != 0:
        raise _invalid(ctx, f"{what} must be scalar, got shape {list(arr.shape)}")
    return _text(arr[()])


_F32 = np.dtype("<f4")
# A float32's little-endian bytes: ~0.1 us against ~1 us for a numpy scalar's tobytes(); exact for
# every float32 (the value passes through a double, which holds it).
_PACK_F32 = struct.Struct("<f").pack
_MAX_CACHED_TAGS = 256


def _scalar_summary(ctx):
    summary_pb = _pb().Summary
    prefixes = {}   # tag -> serialized prefix (a summary op's tag is nearly always one constant)

    def compute(tags, values):
        if type(tags) is not np.ndarray or type(values) is not np.ndarray:
            tags, values = np.asarray(tags, dtype=object), np.asarray(values)
        if tags.shape != values.shape:
            raise _invalid(ctx, f"tags and values are not the same shape: {list(tags.shape)} != "
                                f"{list(values.shape)}")
        if values.ndim == 0:  # the usual case: a cached prefix and the value's float32 bytes
            tag = tags[()]
            cached = prefixes.get(tag)
            if cached is None:
                if len(prefixes) >= _MAX_CACHED_TAGS:
                    prefixes.clear()
                text = _text(tag)
                cached = prefixes[tag] = (scalar_prefix(text), (text,))
            out = np.empty((), dtype=object)
            out[()] = summary_bytes(cached[0] + values.astype(_F32, copy=False).tobytes(), cached[1])
            return out
        s = summary_pb()
        for tag, v in zip(tags.reshape(-1), values.reshape(-1).astype(np.float32).tolist()):
            s.value.add(tag=_text(tag), simple_value=v)
        return _out(s)
    return compute


def _fused_scalar_summaries(ctx):
    """MergeSummary over ScalarSummary ops of scalar values with distinct constant tags (the summary
    fusion pass's node): the tags' serialized prefixes are made once, each run only appends the
    values' float32 bytes."""
    tags = tuple(_text(t) for t in ctx.get_attr("tags"))
    prefixes = [scalar_prefix(t) for t in tags]
    nodes = [_text(n) for n in ctx.get_attr("summary_nodes")]

    def compute(*values):
        parts = []
        for prefix, v, node in zip(prefixes, values, nodes):
            t = type(v)
            if t is np.float32:   # a full reduction's numpy scalar, the usual case
                parts.append(prefix + _PACK_F32(v))
                continue
            if t is not np.ndarray:
                v = np.asarray(v)
            if v.ndim != 0:
                raise errors.InvalidArgumentError(
                    None, None, f"ScalarSummary node {node}: tags and values are not the same shape: "
                                f"[] != {list(v.shape)}")
            parts.append(prefix + (_PACK_F32(v) if v.dtype is _F32 else v.astype(_F32).tobytes()))
        out = np.empty((), dtype=object)
        out[()] = summary_bytes(b"".join(parts), tags)
        return out
    return compute


def histogram_proto(values) -> "object":
    """The HistogramProto TF's HistogramSummary builds for `values` (finite numbers, any shape)."""
    v = np.asarray(values).reshape(-1).astype(np.float64)
    pb = _pb()
    if v.size == 0:
        h = pb.HistogramProto(min=sys.float_info.max, max=-sys.float_info.max)
    else:
        # cumsum adds in order, as TF's running sums do (np.sum would add pairwise).
        h = pb.HistogramProto(min=v.min(), max=v.max(), num=v.size, sum=np.cumsum(v)[-1],
                              sum_squares=np.cumsum(v * v)[-1])
    counts = np.bincount(np.searchsorted(_LIMITS, v, side="right"), minlength=_LIMITS.size)
    counts = counts[:_LIMITS.size].astype(np.float64)
    nonempty = counts > 0
    # Keep every non-empty bucket and the last bucket of each run of empty ones.
    keep = nonempty | np.append(nonempty[1:], True)
    if nonempty.any():
        h.bucket_limit.extend(_LIMITS[keep].tolist())
        h.bucket.extend(counts[keep].tolist())
    else:
        h.bucket_limit.append(sys.float_info.max)
        h.bucket.append(0.0)
    return h


def _histogram_summary(ctx):
    def compute(tag, values):
        tag = _scalar_tag(ctx, tag)
        v = np.asarray(values)
        if v.dtype.kind == "f" and not np.isfinite(v).all():
            kind = "Nan" if np.isnan(v).any() else "Infinity"
            raise errors.InvalidArgumentError(None, None, f"{kind} in summary histogram for: {ctx.name}")
        s = _pb().Summary()
        s.value.add(tag=tag, histo=histogram_proto(v))
        return _out(s)
    return compute


def _png(pixels: np.ndarray) -> bytes:
    from PIL import Image
    channels = pixels.shape[-1]
    img = Image.fromarray(pixels[..., 0] if channels == 1 else pixels, _PIL_MODES[channels])
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _to_uint8(image: np.ndarray) -> np.ndarray:
    """TF's affine map of one float image [h, w, c] into uint8; non-finite pixels get bad_color."""
    finite = np.isfinite(image).all(axis=-1)
    good = image[finite].astype(np.float32)
    lo = good.min() if good.size else np.float32(np.inf)
    hi = good.max() if good.size else np.float32(-np.inf)
    t = image.dtype.type
    if lo < 0:
        max_val = max(abs(lo), abs(hi))
        scale, offset = (0.0 if max_val < 1e-6 else np.float32(127.0) / max_val), 128.0
    else:
        scale, offset = (0.0 if hi < 1e-6 else np.float32(255.0) / hi), 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = image * t(scale) + t(offset)
    out = np.where(finite[..., None], scaled, 0).astype(np.uint8)
    out[~finite] = _BAD_COLOR[:image.shape[-1]]
    return out


def _image_summary(ctx):
    max_images = ctx.get_attr("max_images")

    def compute(tag, tensor):
        tag = _scalar_tag(ctx, tag)
        x = np.asarray(tensor)
        if x.ndim != 4 or x.shape[-1] not in _PIL_MODES:
            raise _invalid(ctx, f"Tensor must be 4-D with last dim 1, 3, or 4, not {list(x.shape)}")
        s = _pb().Summary()
        for i in range(min(max_images, x.shape[0])):
            pixels = x[i] if x.dtype == np.uint8 else _to_uint8(x[i])
            name = f"{tag}/image/{i}" if max_images > 1 else f"{tag}/image"
            s.value.add(tag=name).image.CopyFrom(_pb().Summary.Image(
                height=x.shape[1], width=x.shape[2], colorspace=x.shape[3],
                encoded_image_string=_png(np.ascontiguousarray(pixels))))
        return _out(s)
    return compute


def wav_bytes(samples: np.ndarray, sample_rate: int) -> bytes:
    """16-bit PCM WAV of float `samples` [frames, channels] in [-1, 1] (clipped), as TF encodes it."""
    pcm = np.clip(np.rint(samples.astype(np.float32) * np.float32(32768.0)), -32768, 32767)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(samples.shape[1])
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm.astype("<i2").tobytes())
    return buf.getvalue()


def _audio_summary(ctx):
    max_outputs = ctx.get_attr("max_outputs")

    def compute(tag, tensor, sample_rate):
        tag = _scalar_tag(ctx, tag)
        rate = np.asarray(sample_rate, np.float32)
        if rate.size != 1:
            raise _invalid(ctx, f"sample_rate must be rank-0 or contain a single value, got shape "
                                f"{list(rate.shape)}")
        x = np.asarray(tensor, np.float32)
        if x.ndim not in (2, 3):
            raise _invalid(ctx, f"Tensor must be 3-D or 2-D, got: {list(x.shape)}")
        x = x[..., None] if x.ndim == 2 else x
        rate = float(rate.reshape(()))
        s = _pb().Summary()
        for i in range(min(max_outputs, x.shape[0])):
            name = f"{tag}/audio/{i}" if max_outputs > 1 else f"{tag}/audio"
            s.value.add(tag=name).audio.CopyFrom(_pb().Summary.Audio(
                sample_rate=rate, num_channels=x.shape[2], length_frames=x.shape[1],
                encoded_audio_string=wav_bytes(x[i], int(np.rint(rate))), content_type="audio/wav"))
        return _out(s)
    return compute


def _tensor_proto(ctx, value, i: int, out) -> None:
    """Fills `out` (a Summary.Value's tensor) with input `i`'s value."""
    tensor_codec.tensor_to_proto(np.asarray(value, ctx.input_dtypes[i].base_dtype.as_numpy_dtype), out=out)


def _tensor_summary_v2(ctx):
    def compute(tag, tensor, serialized_summary_metadata):
        tag = _scalar_tag(ctx, tag)
        meta = np.asarray(serialized_summary_metadata, dtype=object)
        if meta.ndim != 0:
            raise _invalid(ctx, f"serialized_summary_metadata must be scalar, got shape {list(meta.shape)}")
        s = _pb().Summary()
        v = s.value.add(tag=tag)
        _tensor_proto(ctx, tensor, 1, v.tensor)
        v.metadata.SetInParent()
        raw = meta[()]
        v.metadata.ParseFromString(raw.encode() if isinstance(raw, str) else bytes(raw))
        return _out(s)
    return compute


def _tensor_summary(ctx):
    def compute(tensor):
        s = _pb().Summary()
        _tensor_proto(ctx, tensor, 0, s.value.add(node_name=ctx.name).tensor)
        return _out(s)
    return compute


def _blobs(inputs):
    """The serialized summaries of MergeSummary's inputs (scalars, or string tensors of any shape)."""
    for x in inputs:
        if isinstance(x, np.ndarray) and x.ndim == 0:
            yield x[()]
        else:
            yield from np.asarray(x, dtype=object).reshape(-1)


def _merge_summary(ctx):
    from google.protobuf.message import DecodeError

    summary_pb = _pb().Summary

    def compute(*inputs):
        seen, tags, blobs, metadata = set(), [], [], False
        for blob in _blobs(inputs):
            if type(blob) is SummaryBytes:   # made by a kernel here: its tags are known
                one_tags, metadata = blob.tags, metadata or blob.has_metadata
            else:
                blob = blob if isinstance(blob, bytes) else str(blob).encode()
                try:
                    values = summary_pb.FromString(blob).value
                except DecodeError:
                    raise _invalid(ctx, "Could not parse one of the summary inputs") from None
                one_tags = tuple(v.tag for v in values)
                metadata = metadata or any(v.HasField("metadata") for v in values)
            for tag in one_tags:
                if tag and tag in seen:
                    raise _invalid(ctx, f"Duplicate tag {tag} found in summary inputs")
                seen.add(tag)
            tags.extend(one_tags)
            blobs.append(blob)
        # Serialized Summaries concatenate into one whose `value` lists all of theirs, in order.
        out = np.empty((), dtype=object)
        out[()] = summary_bytes(b"".join(blobs), tuple(tags), metadata)
        return out
    return compute


def register(registry):
    """Registers the CPU kernels of the summary family."""
    registry.register("ScalarSummary", DEVICE, _scalar_summary)
    registry.register("HistogramSummary", DEVICE, _histogram_summary)
    registry.register("ImageSummary", DEVICE, _image_summary, expensive=True)
    registry.register("AudioSummaryV2", DEVICE, _audio_summary, expensive=True)
    registry.register("TensorSummaryV2", DEVICE, _tensor_summary_v2)
    registry.register("TensorSummary", DEVICE, _tensor_summary)
    registry.register("MergeSummary", DEVICE, _merge_summary)
    registry.register("_FusedScalarSummaries", DEVICE, _fused_scalar_summaries)

"""Audio ops: WAV decoding and encoding (TF1 ``tf.audio.decode_wav`` / ``tf.audio.encode_wav``).

OpDefs, shape functions and the wrappers; the names are exported under ``kf.audio`` only (TF1 has
no top-level or ``tf.io`` alias of them), the CPU kernels are in kernflow.kernels.cpu.audio. Only
16-bit PCM WAV is read and written, as in TF; neither op is differentiable and neither has a GPU
kernel (placement keeps them on the host).
"""

from __future__ import annotations

import collections

import numpy as np

from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

# TF1 has neither name at top level: they live in kernflow.core.audio (kf.audio).
__all__: list = []

# Op types of this family: host only, no GPU kernel (as in TF).
AUDIO_OPS = ("DecodeWav", "EncodeWav")

DecodeWavResult = collections.namedtuple("DecodeWav", ["audio", "sample_rate"])


def _desired_dim(op, attr, what):
    n = op.get_attr(attr)
    if n == -1:
        return None
    if n < 0:
        raise ValueError(f"{what} must be non-negative, got {n} ({attr}; -1 keeps the file's {what})")
    return n


def _decode_wav_shape(op):
    op.inputs[0].shape.with_rank(0)
    samples = _desired_dim(op, "desired_samples", "samples")
    channels = _desired_dim(op, "desired_channels", "channels")
    return [_ts.TensorShape([samples, channels]), _ts.TensorShape([])]


def _encode_wav_shape(op):
    op.inputs[0].shape.with_rank(2)
    op.inputs[1].shape.with_rank(0)
    return [_ts.TensorShape([])]


register_op("DecodeWav", inputs=["contents: string"], outputs=["audio: float", "sample_rate: int32"],
            attrs=["desired_channels: int = -1", "desired_samples: int = -1"], shape_fn=_decode_wav_shape,
            doc="Decodes a 16-bit PCM WAV file (a string scalar) into float32 audio [samples, channels] "
                "scaled to [-1.0, 1.0) and its sample rate. desired_samples truncates or zero-pads the "
                "samples, desired_channels keeps the first channels or repeats the last one (-1: as "
                "in the file).")
register_op("EncodeWav", inputs=["audio: float", "sample_rate: int32"], outputs=["contents: string"],
            shape_fn=_encode_wav_shape,
            doc="Encodes float32 audio [samples, channels] as a 16-bit PCM WAV file (a string scalar): "
                "each value times 32768, rounded half away from zero and clamped to the int16 range.")
for _name in AUDIO_OPS:
    NotDifferentiable(_name)


def decode_wav(contents, desired_channels=-1, desired_samples=-1, name=None):
    """Decodes a 16-bit PCM WAV file (TF1 `tf.audio.decode_wav`).

    Args:
        contents: a string scalar tensor, the bytes of the WAV file.
        desired_channels: the number of channels to return (-1 or None: the file's). Fewer than the
            file's keeps the first ones; more repeats the file's last channel.
        desired_samples: the number of samples to return (-1 or None: the file's); fewer truncates,
            more pads with zeros.
        name: op name.

    Returns:
        A namedtuple (audio, sample_rate): audio float32 [samples, channels] with values in
        [-1.0, 1.0), sample_rate an int32 scalar.

    Raises:
        ValueError: contents is statically not a scalar, or a desired size is below -1.
        kf.errors.InvalidArgumentError (at run time): the bytes are not a 16-bit PCM WAV file.
    """
    if isinstance(contents, (bool, int, float, complex, np.number)) or \
            (isinstance(contents, np.ndarray) and contents.dtype.kind not in "SUO"):
        raise TypeError(f"Expected string passed to parameter 'contents' of op 'DecodeWav', got "
                        f"{contents!r} of type '{type(contents).__name__}' instead.")
    attrs = {"desired_channels": -1 if desired_channels is None else desired_channels,
             "desired_samples": -1 if desired_samples is None else desired_samples}
    return DecodeWavResult(*apply_op("DecodeWav", [contents], attrs, name=name).outputs)


def encode_wav(audio, sample_rate, name=None):
    """Encodes audio as a 16-bit PCM WAV file (TF1 `tf.audio.encode_wav`).

    Args:
        audio: a float32 tensor [samples, channels]; values are clamped to [-1.0, 1.0].
        sample_rate: an int32 scalar tensor, the samples per second.
        name: op name.

    Returns:
        A string scalar tensor, the bytes of the WAV file.

    Raises:
        ValueError: audio is statically not 2-D or sample_rate not a scalar.
        kf.errors.InvalidArgumentError (at run time): no channels, more than 65535 channels, a
            sample rate that is not positive, or too much audio for a WAV file.
    """
    return apply_op("EncodeWav", [audio, sample_rate], name=name).outputs[0]

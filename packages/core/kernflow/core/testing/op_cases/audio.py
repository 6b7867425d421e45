"""Contract cases of the audio ops (kernflow.core.ops.audio_ops): WAV decoding and encoding.

The WAV bytes are the ones TensorFlow (tf.compat.v1) wrote for the same audio; decoded samples are
int16 / 32768. Neither op is differentiable.
"""

import numpy as np

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import OpCase

# tf.audio.encode_wav([[0.0], [-0.5], [-1.0]], 16000) as written by TensorFlow.
_MONO = (b"RIFF*\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80>\x00\x00\x00}\x00\x00\x02\x00"
         b"\x10\x00data\x06\x00\x00\x00\x00\x00\x00\xc0\x00\x80")
# tf.audio.encode_wav([[0.5, 0.25], [1.0, -1.0]], 8000) as written by TensorFlow.
_STEREO = (b"RIFF,\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x02\x00@\x1f\x00\x00\x00}\x00\x00\x04\x00"
           b"\x10\x00data\x08\x00\x00\x00\x00@\x00 \xff\x7f\x00\x80")


def _obj(b):
    return np.array(b, dtype=object)


def _encode(a, r):
    # A scalar string comes back from Session.run as bytes: compare it as a [1] string tensor.
    return kf.reshape(kf.audio.encode_wav(a, r), [1])


def _const(*values):
    return lambda *unused: list(values) if len(values) > 1 else values[0]


CASES = [
    OpCase("DecodeWav", lambda x: list(kf.audio.decode_wav(x)), [_obj(_MONO)],
           _const(np.array([[0.0], [-0.5], [-1.0]], np.float32), np.int32(16000))),
    OpCase("DecodeWav", lambda x: list(kf.audio.decode_wav(x, desired_channels=3, desired_samples=3)),
           [_obj(_STEREO)],
           _const(np.array([[0.5, 0.25, 0.25], [32767 / 32768, -1.0, -1.0], [0, 0, 0]], np.float32),
                  np.int32(8000)), name="resized"),
    OpCase("EncodeWav", _encode, [np.array([[0.0], [-0.5], [-1.0]], np.float32), np.array(16000, np.int32)],
           _const(_obj([_MONO]))),
    OpCase("EncodeWav", _encode, [np.array([[0.5, 0.25], [1.0, -1.0]], np.float32), np.array(8000, np.int32)],
           _const(_obj([_STEREO])), name="stereo"),
]

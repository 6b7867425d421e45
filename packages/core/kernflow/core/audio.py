"""kf.audio: WAV decoding and encoding (TF1 ``tf.audio``); the ops are in kernflow.core.ops.audio_ops."""

from kernflow.core.ops.audio_ops import decode_wav, encode_wav

__all__ = ["decode_wav", "encode_wav"]

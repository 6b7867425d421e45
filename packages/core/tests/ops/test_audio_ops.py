"""kf.audio (DecodeWav / EncodeWav) against bytes and values observed from TensorFlow (tf.compat.v1),
their errors and static shapes (contract cases are in kernflow/core/testing/op_cases/audio.py)."""

import struct

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def run(t, feed=None):
    with kf.Session() as sess:
        return sess.run(t, feed)


@pytest.fixture(autouse=True)
def _graph():
    with kf.Graph().as_default():
        yield


def wav(ch=1, rate=8000, samples=(1, -2, 32767, -32768), fmt_size=16, audio_format=1, block=None,
        byte_rate=None, bits=16, extra=b"", pre=b"", chunks=None):
    """A WAV file built field by field (chunks: what follows fmt; default one data chunk)."""
    block = 2 * ch if block is None else block
    byte_rate = rate * block if byte_rate is None else byte_rate
    if chunks is None:
        chunks = chunk(b"data", struct.pack(f"<{len(samples)}h", *samples))
    body = (b"WAVE" + pre + b"fmt " + struct.pack("<IHHIIHH", fmt_size, audio_format, ch, rate, byte_rate,
                                                  block, bits) + extra + chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def chunk(cid, payload, size=None):
    return cid + struct.pack("<I", len(payload) if size is None else size) + payload


# ---------------------------------------------------------------------------- encode: TF's bytes
# Every expected byte string below is what TensorFlow 2.21 (tf.compat.v1.audio.encode_wav) wrote
# for the same audio and sample rate.
AUDIO = np.array([[0.0, 0.5], [-0.5, 1.0], [-1.0, 2.0], [0.25, -3.0], [1 / 32768, -1 / 32768],
                  [0.99999, -0.99999], [0.5 / 32768, 0.7]], np.float32)
TF_STEREO_44100 = (
    b"RIFF@\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x02\x00D\xac\x00\x00\x10\xb1\x02\x00\x04\x00"
    b"\x10\x00data\x1c\x00\x00\x00\x00\x00\x00@\x00\xc0\xff\x7f\x00\x80\xff\x7f\x00 \x00\x80\x01\x00"
    b"\xff\xff\xff\x7f\x00\x80\x01\x00\x9aY")
TF_MONO_16000 = (b"RIFF*\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80>\x00\x00\x00}\x00\x00"
                 b"\x02\x00\x10\x00data\x06\x00\x00\x00\x00\x00\x00\xc0\x00\x80")
TF_EMPTY_STEREO_8000 = (b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x02\x00@\x1f\x00\x00\x00}"
                        b"\x00\x00\x04\x00\x10\x00data\x00\x00\x00\x00")
TF_NAN_INF_8000 = (b"RIFF,\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00@\x1f\x00\x00\x80>\x00\x00"
                   b"\x02\x00\x10\x00data\x08\x00\x00\x00\x00\x00\xff\x7f\x00\x80\x00\x00")
# Sample rate 2**31 - 1: the byte rate field wraps modulo 2**32 (0xfffffffe).
TF_MAX_RATE = (b"RIFF&\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\xff\xff\xff\x7f\xfe\xff\xff\xff"
               b"\x02\x00\x10\x00data\x02\x00\x00\x00\x00\x00")


@pytest.mark.parametrize("audio, rate, expected", [
    (AUDIO, 44100, TF_STEREO_44100),
    (AUDIO[:3, :1], 16000, TF_MONO_16000),
    (np.zeros((0, 2), np.float32), 8000, TF_EMPTY_STEREO_8000),
    (np.array([[np.nan], [np.inf], [-np.inf], [-0.0]], np.float32), 8000, TF_NAN_INF_8000),
    (np.zeros((1, 1), np.float32), 2**31 - 1, TF_MAX_RATE),
], ids=["stereo", "mono", "empty", "nan_inf", "max_rate"])
def test_encode_wav_bytes_equal_tf(audio, rate, expected):
    out = run(kf.audio.encode_wav(audio, rate))
    assert isinstance(out, bytes)
    assert out == expected


def test_encode_wav_rounds_half_away_from_zero_like_tf():
    # TF wrote the int16 samples [-6 .. -1, 1 .. 7] for (k + 0.5) / 32768, k = -6 .. 6.
    x = ((np.arange(-6, 7) + 0.5) / 32768).astype(np.float32)[:, None]
    out = run(kf.audio.encode_wav(x, 8000))
    np.testing.assert_array_equal(np.frombuffer(out[44:], "<i2"),
                                  [-6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7])


def test_encode_wav_accepts_what_tf_converts():
    a = kf.audio.encode_wav(np.array([[0.5]], np.float64), np.int64(8000))
    b = kf.audio.encode_wav([[0.5]], 8000, name="enc")
    assert b.op.name == "enc" and b.dtype == kf.string and b.shape.as_list() == []
    assert run(a) == run(b) == wav(samples=(16384,))


# ---------------------------------------------------------------------------- round trips
def test_round_trip_quantises_to_int16_over_32768():
    rng = np.random.RandomState(0)
    audio = (rng.randn(50, 3) * 0.6).astype(np.float32)
    res = run(kf.audio.decode_wav(kf.audio.encode_wav(audio, 22050)))
    q = np.clip(np.trunc(audio * 32768.0 + np.copysign(0.5, audio)), -32768, 32767) / 32768
    np.testing.assert_array_equal(res.audio, q.astype(np.float32))
    assert res.audio.dtype == np.float32 and res.sample_rate == 22050
    assert res.sample_rate.dtype == np.int32


def test_decode_of_encode_is_exact_for_int16_values():
    audio = (np.arange(-32768, 32768, 97, dtype=np.int64).reshape(-1, 2) / 32768).astype(np.float32)
    ph = kf.placeholder(kf.float32, [None, 2])
    res = run(kf.audio.decode_wav(kf.audio.encode_wav(ph, 1)), {ph: audio})
    np.testing.assert_array_equal(res.audio, audio)


# ---------------------------------------------------------------------------- decode: resizing
def test_decode_wav_values_and_result_tuple():
    res = run(kf.audio.decode_wav(wav()))
    np.testing.assert_array_equal(res.audio, np.array([[1], [-2], [32767], [-32768]], np.float32) / 32768)
    assert res.sample_rate == 8000
    assert res._fields == ("audio", "sample_rate")


@pytest.mark.parametrize("channels, samples, expected", [
    # What TF returned for the stereo file TF_STEREO_44100 (truncation, zero padding, and the
    # last channel repeated into the extra channels).
    (1, -1, lambda q: q[:, :1]),
    (3, -1, lambda q: q[:, [0, 1, 1]]),
    (2, 3, lambda q: q[:3]),
    (2, 10, lambda q: np.concatenate([q, np.zeros((3, 2), np.float32)])),
    (-1, 0, lambda q: q[:0]),
    (0, -1, lambda q: q[:, :0]),
    (4, 8, lambda q: np.concatenate([q[:, [0, 1, 1, 1]], np.zeros((1, 4), np.float32)])),
])
def test_decode_wav_desired_channels_and_samples(channels, samples, expected):
    q = run(kf.audio.decode_wav(TF_STEREO_44100)).audio
    res = run(kf.audio.decode_wav(TF_STEREO_44100, desired_channels=channels, desired_samples=samples))
    np.testing.assert_array_equal(res.audio, expected(q))
    assert res.sample_rate == 44100


def test_decode_wav_mono_is_repeated_into_every_channel():
    res = run(kf.audio.decode_wav(TF_MONO_16000, desired_channels=3))
    np.testing.assert_array_equal(res.audio, np.repeat(np.array([[0.0], [-0.5], [-1.0]], np.float32), 3, 1))


def test_decode_wav_static_shapes():
    ph = kf.placeholder(kf.string)
    assert kf.audio.decode_wav(ph).audio.shape.as_list() == [None, None]
    res = kf.audio.decode_wav(ph, desired_channels=2, desired_samples=5, name="dec")
    assert res.audio.shape.as_list() == [5, 2] and res.sample_rate.shape.as_list() == []
    assert (res.audio.name, res.sample_rate.name) == ("dec:0", "dec:1")
    assert res.audio.dtype == kf.float32 and res.sample_rate.dtype == kf.int32
    r = kf.audio.decode_wav(ph, desired_channels=1, desired_samples=None)
    assert r.audio.shape.as_list() == [None, 1]
    assert r.audio.op.get_attr("desired_samples") == -1


# ---------------------------------------------------------------------------- decode: file layouts
@pytest.mark.parametrize("blob", [
    wav(fmt_size=18, extra=b"\0\0"),
    wav(pre=chunk(b"JUNK", b"abcd")),
    wav(pre=chunk(b"bext", b"") + chunk(b"JUNK", b"abc")),
    wav(chunks=chunk(b"LIST", b"abcd") + chunk(b"data", struct.pack("<4h", 1, -2, 32767, -32768))),
    wav(chunks=chunk(b"data", struct.pack("<4h", 1, -2, 32767, -32768)) + chunk(b"LIST", b"a", size=100)),
    wav(chunks=chunk(b"LIST", b"abc") + chunk(b"data", struct.pack("<4h", 1, -2, 32767, -32768))),
    wav(chunks=chunk(b"data", struct.pack("<4h", 1, -2, 32767, -32768)) + b"abcdefgh"),
    b"RIFF\xff\xff\xff\xff" + wav()[8:],
], ids=["fmt18", "junk", "bext_junk", "list_before", "list_past_end", "odd_no_pad", "trailing8", "riff_size"])
def test_decode_wav_accepts_the_layouts_tf_accepts(blob):
    res = run(kf.audio.decode_wav(blob))
    np.testing.assert_array_equal(res.audio, np.array([[1], [-2], [32767], [-32768]], np.float32) / 32768)


def test_decode_wav_reads_whole_frames_of_the_data_chunk():
    # A 6-byte data chunk of a stereo file holds one frame; TF then reads the next chunk id from
    # the leftover 2 bytes, so a following 'LI' + 'ST\0\0' parses as an empty chunk.
    blob = wav(ch=2, chunks=chunk(b"data", struct.pack("<3h", 100, 200, 300)) + b"LIST\0\0")
    np.testing.assert_array_equal(run(kf.audio.decode_wav(blob)).audio, [[100 / 32768, 200 / 32768]])
    assert run(kf.audio.decode_wav(wav(ch=3, chunks=chunk(b"data", b"")))).audio.shape == (0, 3)


def test_decode_wav_sample_rate_zero_is_returned_as_is():
    assert run(kf.audio.decode_wav(wav(rate=0))).sample_rate == 0


# ---------------------------------------------------------------------------- decode: errors
_SAMPLES = struct.pack("<4h", 1, -2, 32767, -32768)
_SHORT = "Data too short when trying to read string"


@pytest.mark.parametrize("blob, message", [
    # The messages are TF's (one space added after "but got" where TF has none).
    (b"RIFX" + wav()[4:], "Header mismatch: Expected RIFF but found RIFX"),
    (wav()[:8] + b"WAVX" + wav()[12:], "Header mismatch: Expected WAVE but found WAVX"),
    (wav().replace(b"fmt ", b"fmtx"), "Unexpected field fmtx"),
    (wav(pre=chunk(b"LIST", b"")), "Unexpected field LIST"),
    (wav()[:12] + b"LIST\x01", "Unexpected field LIST"),
    (wav(fmt_size=17), "Bad format chunk size for WAV: Expected 16 or 18, but got 17"),
    (wav(fmt_size=40, extra=b"\0" * 24), "Bad format chunk size for WAV: Expected 16 or 18, but got 40"),
    (wav(audio_format=3), "Bad audio format for WAV: Expected 1 (PCM), but got 3"),
    (wav(audio_format=0xFFFE), "Bad audio format for WAV: Expected 1 (PCM), but got 65534"),
    (wav(ch=0, block=0), "Bad number of channels for WAV: Expected at least 1, but got 0"),
    (wav(bits=8, block=1), "Can only read 16-bit WAV files, but received 8"),
    (wav(bits=24, block=3), "Can only read 16-bit WAV files, but received 24"),
    (wav(block=4), "Bad bytes per sample in WAV header: Expected 2 but got 4"),
    (wav(byte_rate=123), "Bad bytes per second in WAV header: Expected 16000 but got 123 (sample_rate=8000, "
                         "bytes_per_sample=2)"),
    (wav(chunks=b""), "No data chunk found in WAV"),
    (wav(fmt_size=18), "No data chunk found in WAV"),
    # An odd-sized chunk's pad byte is not skipped (as in TF): the walk goes astray.
    (wav(chunks=chunk(b"LIST", b"abc\0", size=3) + chunk(b"data", _SAMPLES)), "No data chunk found in WAV"),
    (wav(chunks=chunk(b"data", _SAMPLES) * 2), "More than one data chunk found in WAV"),
    (wav(chunks=chunk(b"data", _SAMPLES, size=100)), _SHORT),
    (wav(chunks=chunk(b"data", _SAMPLES + b"\x05", size=9)), _SHORT),
    (wav(chunks=chunk(b"data", _SAMPLES) + b"abc"), _SHORT),
    (wav(chunks=chunk(b"data", _SAMPLES) + chunk(b"LIST", b"", size=2**31)),
     "WAV data chunk 'LIST' is too large: 2147483648 bytes, but the limit is 2147483647"),
    (wav(chunks=chunk(b"data", b"", size=2**31)),
     "WAV data chunk 'data' is too large: 2147483648 bytes, but the limit is 2147483647"),
    (wav(pre=chunk(b"JUNK", b"", size=100)), _SHORT),
    (b"", _SHORT),
    (b"RIFF", _SHORT),
    (wav()[:30], _SHORT),
], ids=lambda v: v[:24] if isinstance(v, str) else None)
def test_decode_wav_errors_like_tf(blob, message):
    ph = kf.placeholder(kf.string)
    with pytest.raises(errors.InvalidArgumentError, match="DecodeWav") as e:
        run(kf.audio.decode_wav(ph), {ph: blob})
    assert message in str(e.value)


def test_decode_wav_every_truncation_of_a_file_fails():
    # TF: every proper prefix is too short, except the one ending right after the fmt chunk.
    blob, ph = wav(), kf.placeholder(kf.string)
    d = kf.audio.decode_wav(ph)
    with kf.Session() as sess:
        for n in range(len(blob)):
            with pytest.raises(errors.InvalidArgumentError) as e:
                sess.run(d, {ph: blob[:n]})
            assert ("No data chunk found in WAV" if n == 36 else _SHORT) in str(e.value)


def test_decode_wav_contents_must_be_a_scalar():
    ph = kf.placeholder(kf.string)
    with pytest.raises(errors.InvalidArgumentError, match=r"contents must be scalar, got shape \[1\]"):
        run(kf.audio.decode_wav(ph), {ph: np.array([wav()], object)})
    with pytest.raises(ValueError, match="rank 0"):
        kf.audio.decode_wav(kf.constant([b"a"]))


def test_decode_wav_build_errors():
    with pytest.raises(ValueError, match="channels must be non-negative, got -2"):
        kf.audio.decode_wav(b"x", desired_channels=-2)
    with pytest.raises(ValueError, match="samples must be non-negative, got -3"):
        kf.audio.decode_wav(b"x", desired_samples=-3)
    with pytest.raises(TypeError, match="Expected string passed to parameter 'contents'"):
        kf.audio.decode_wav(123)
    with pytest.raises(TypeError, match="float32 that does not match expected type of string"):
        kf.audio.decode_wav(kf.constant(1.0))


# ---------------------------------------------------------------------------- encode: errors
@pytest.mark.parametrize("audio, rate, message", [
    (np.zeros(3, np.float32), 8000, r"audio must be 2-dimensional, got shape \[3\]"),
    (np.zeros((2, 2, 2), np.float32), 8000, r"audio must be 2-dimensional, got shape \[2, 2, 2\]"),
    (np.zeros((2, 2), np.float32), [8000], r"Input sample_rate should be a scalar tensor, got \[1\] instead"),
    (np.zeros((2, 0), np.float32), 8000, r"num_channels must be in \(0, 2\^16\), got: 0"),
    (np.zeros((2, 70000), np.float32), 8000, r"num_channels must be in \(0, 2\^16\), got: 70000"),
    (np.zeros((2, 1), np.float32), 0, r"sample_rate must be in \(0, 2\^32\), got: 0"),
    (np.zeros((2, 1), np.float32), -5, r"sample_rate must be in \(0, 2\^32\), got: -5"),
])
def test_encode_wav_errors(audio, rate, message):
    a, r = kf.placeholder(kf.float32), kf.placeholder(kf.int32)
    with pytest.raises(errors.InvalidArgumentError, match=message):
        run(kf.audio.encode_wav(a, r), {a: audio, r: rate})


def test_encode_wav_build_errors():
    with pytest.raises(ValueError, match="rank 2"):
        kf.audio.encode_wav(np.zeros(3, np.float32), 8000)
    with pytest.raises(ValueError, match="rank 0"):
        kf.audio.encode_wav(np.zeros((3, 1), np.float32), [8000])
    with pytest.raises(TypeError, match="int64 that does not match expected type of int32"):
        kf.audio.encode_wav(np.zeros((3, 1), np.float32), kf.constant(8000, kf.int64))
    with pytest.raises(TypeError, match="float16 that does not match expected type of float32"):
        kf.audio.encode_wav(kf.zeros((3, 1), kf.float16), 8000)


# ---------------------------------------------------------------------------- namespace, gradients
def test_namespace_and_not_differentiable():
    assert kf.audio.decode_wav is not None and kf.audio.encode_wav is not None
    assert not hasattr(kf, "decode_wav") and not hasattr(kf, "encode_wav")
    x = kf.constant([[0.5, -0.25]])
    y = kf.audio.decode_wav(kf.audio.encode_wav(x, 8000)).audio
    assert kf.gradients(kf.reduce_sum(y), [x]) == [None]

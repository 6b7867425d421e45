"""kf.image.decode_webp: still images, animations, channel checks and bad data (DecodeWebP)."""

import io

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

Image = pytest.importorskip("PIL.Image")

_R = np.random.RandomState(2)


def _webp(frames, **kw):
    buf = io.BytesIO()
    imgs = [Image.fromarray(f) for f in frames]
    imgs[0].save(buf, "WEBP", lossless=True, save_all=len(imgs) > 1, append_images=imgs[1:], **kw)
    return buf.getvalue()


def _decode(data, **kw):
    with kf.Graph().as_default():
        out = kf.image.decode_webp(kf.constant(data), **kw)
        assert out.dtype == kf.uint8
        with kf.Session() as sess:
            return sess.run(out)


def test_still_rgb_and_rgba_round_trip():
    rgb = _R.randint(0, 256, (6, 9, 3)).astype(np.uint8)
    rgba = _R.randint(0, 256, (4, 5, 4)).astype(np.uint8)
    np.testing.assert_array_equal(_decode(_webp([rgb])), rgb)
    np.testing.assert_array_equal(_decode(_webp([rgb]), channels=3), rgb)
    np.testing.assert_array_equal(_decode(_webp([rgba])), rgba)


def test_animation_is_frames_of_rgba():
    frames = [np.full((4, 6, 3), v, np.uint8) for v in (10, 120, 250)]
    got = _decode(_webp(frames, duration=50))
    assert got.shape == (3, 4, 6, 4)
    np.testing.assert_array_equal(got[..., :3], np.stack(frames))
    assert (got[..., 3] == 255).all()


def test_channels_must_match_the_file():
    rgb = np.zeros((3, 3, 3), np.uint8)
    with pytest.raises(errors.InvalidArgumentError, match="DecodeWebP.*channels 4 does not match .* 3"):
        _decode(_webp([rgb]), channels=4)
    with pytest.raises(errors.InvalidArgumentError, match="DecodeWebP.*channels must be 0, 3 or 4.*got 1"):
        _decode(_webp([rgb]), channels=1)


def test_non_webp_contents_are_an_error():
    png = io.BytesIO()
    Image.fromarray(np.zeros((2, 2, 3), np.uint8)).save(png, "PNG")
    with pytest.raises(errors.InvalidArgumentError, match=r"DecodeWebP.*Invalid WebP data.*RIFF\.\.\.\.WEBP"):
        _decode(png.getvalue())
    with pytest.raises(errors.InvalidArgumentError, match="DecodeWebP.*could not decode"):
        _decode(b"RIFF\x10\x00\x00\x00WEBPVP8 garbage")

"""Contract cases of the ops in kernflow.core.ops.image_ops_more, each against a numpy reference.

The distorted-crop sampler is random: one case pins the crop's size (only its place is drawn and
checked), another makes every draw fail so that the whole image comes back.
"""

import io

import numpy as np

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.testing.kernel_contract import OpCase
from kernflow.core.testing.op_cases.image import _box_iou, _close

try:
    from PIL import Image
except ImportError:  # pragma: no cover - Pillow comes with kernflow-kernels-cpu
    Image = None

_F = np.float32
_r = np.random.RandomState(11)


def _quarter_crop_cmp(actual, expected):
    """begin [y, x, 0] with y, x in [0, 20]; size exactly [20, 20, -1]; the box 0.5 x 0.5 inside."""
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.ndim == 3:
        y1, x1, y2, x2 = actual.ravel()
        assert 0 <= y1 and 0 <= x1 and y2 <= 1 and x2 <= 1, actual
        np.testing.assert_allclose([y2 - y1, x2 - x1], [0.5, 0.5], atol=1e-6)
    elif actual[2] == -1:
        np.testing.assert_array_equal(actual, expected)
    else:
        assert 0 <= actual[:2].min() and actual[:2].max() <= 20 and actual[2] == 0, actual


def _quarter_crop(size, boxes):
    # image 40 x 40, aspect ratio 1 and area 1/4 exactly: a 20 x 20 crop somewhere
    return apply_op("SampleDistortedBoundingBox", [size, boxes],
                    {"aspect_ratio_range": [1.0, 1.0], "area_range": [0.25, 0.25], "seed": 7,
                     "min_object_covered": 0.0}).outputs


def _glimpse_ref(x, size, offsets):
    """Unnormalised, uncentred offsets: the window's top left corner is offset - size / 2."""
    b, h, w, c = x.shape
    out = np.zeros((b, size[0], size[1], c), _F)
    for i in range(b):
        y0, x0 = int(offsets[i, 0] - size[0] / 2), int(offsets[i, 1] - size[1] / 2)
        for r in range(size[0]):
            for q in range(size[1]):
                if 0 <= y0 + r < h and 0 <= x0 + q < w:
                    out[i, r, q] = x[i, y0 + r, x0 + q]
    return out


def _nms_overlaps_ref(ov, scores, k, thr):
    keep = []
    for i in np.argsort(-scores, kind="stable"):
        if len(keep) < k and all(ov[i, j] <= thr for j in keep):
            keep.append(i)
    return np.array(keep, np.int32)


def _combined_ref(boxes, scores, per_class, total, thr):
    b, n, q, _ = boxes.shape
    out = [np.zeros((b, total, 4), _F), np.zeros((b, total), _F), np.zeros((b, total), _F),
           np.zeros(b, np.int32)]
    for i in range(b):
        kept = []
        for c in range(scores.shape[2]):
            bx = boxes[i, :, c % q]
            sel = []
            for j in np.argsort(-scores[i, :, c], kind="stable"):
                if len(sel) < per_class and all(_box_iou(bx[j], bx[s]) <= thr for s in sel):
                    sel.append(j)
            kept += [(scores[i, j, c], c, bx[j]) for j in sel]
        kept.sort(key=lambda k: -k[0])
        kept = kept[:total]
        out[3][i] = len(kept)
        for k, (s, c, box) in enumerate(kept):
            out[0][i, k], out[1][i, k], out[2][i, k] = np.clip(box, 0, 1), s, c
    return out


_OV = np.array([[1, 0.6, 0.2, 0.9], [0.6, 1, 0.4, 0.1], [0.2, 0.4, 1, 0.3], [0.9, 0.1, 0.3, 1]], _F)
_OS = np.array([0.5, 0.9, 0.7, 0.8], _F)
# boxes [2, 5, q, 4] with two boxes overlapping heavily (IoU 0.81) and corners outside [0, 1]
_CB = np.array([[0, 0, 0.5, 0.5], [0.05, 0.05, 0.55, 0.55], [0.5, 0.5, 1.2, 1.0], [-0.1, 0.6, 0.3, 0.9],
                [0.2, 0.2, 0.4, 0.4]], _F)
_CB1 = np.stack([_CB, _CB[::-1]])[:, :, None, :]
_CB3 = np.stack([_CB1[:, :, 0], _CB1[:, :, 0] * _F(0.9), _CB1[:, ::-1, 0]], 2)
_CS = _r.rand(2, 5, 3).astype(_F)

CASES = [
    OpCase("SampleDistortedBoundingBox", _quarter_crop,
           [np.array([40, 40, 3], np.int32), np.array([[[0.1, 0.1, 0.9, 0.9]]], _F)],
           lambda s, b: [np.zeros(3, np.int32), np.array([20, 20, -1], np.int32), np.zeros((1, 1, 4), _F)],
           compare=_quarter_crop_cmp),
    OpCase("SampleDistortedBoundingBoxV2",
           lambda s, b, m: list(kf.image.sample_distorted_bounding_box(s, b, seed=1, min_object_covered=m,
                                                                       area_range=[0.1, 0.5])),
           [np.array([30, 20, 1], np.int64), np.array([[[0.0, 0.0, 1.0, 1.0]]], _F), _F(1.0)],
           lambda s, b, m: [np.array([0, 0, 0]), np.array([30, 20, -1]), np.array([[[0, 0, 1, 1]]], _F)],
           name="falls_back_to_the_image"),
    OpCase("ExtractGlimpse",
           lambda x, s, o: apply_op("ExtractGlimpse", [x, s, o],
                                    {"centered": False, "normalized": False, "uniform_noise": False,
                                     "noise": "zero"}).outputs[0],
           [_r.rand(2, 5, 6, 2).astype(_F), np.array([3, 4], np.int32),
            np.array([[2.0, 3.0], [0.5, 5.0]], _F)], lambda x, s, o: _glimpse_ref(x, s, o)),
    OpCase("ExtractGlimpse", lambda x, s, o: kf.image.extract_glimpse(x, s, o),
           [_r.rand(1, 6, 8, 1).astype(_F), np.array([2, 4], np.int32), np.array([[0.0, 0.0]], _F)],
           lambda x, s, o: x[:, 2:4, 2:6], name="centred_inside"),
    OpCase("NonMaxSuppressionWithOverlaps",
           lambda o, s: kf.image.non_max_suppression_overlaps(o, s, 3, overlap_threshold=0.5),
           [_OV, _OS], lambda o, s: _nms_overlaps_ref(o, s, 3, 0.5)),
    OpCase("CombinedNonMaxSuppression",
           lambda b, s: list(kf.image.combined_non_max_suppression(b, s, 2, 5, iou_threshold=0.5)),
           [_CB1, _CS], lambda b, s: _combined_ref(b, s, 2, 5, 0.5), name="shared_boxes"),
    OpCase("CombinedNonMaxSuppression",
           lambda b, s: list(kf.image.combined_non_max_suppression(b, s, 3, 7, iou_threshold=0.3)),
           [_CB3, _CS], lambda b, s: _combined_ref(b, s, 3, 7, 0.3), name="boxes_per_class"),
]


def _webp(arr):
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "WEBP", lossless=True)
    return np.array(buf.getvalue(), object)


def _jpeg(arr, quality=95):
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=quality)
    return np.array(buf.getvalue(), object)


if Image is not None:
    _SMOOTH = (np.linspace(0, 1, 16 * 12 * 3).reshape(16, 12, 3) * 200 + 20).astype(np.uint8)
    CASES += [
        OpCase("DecodeAndCropJpeg",
               lambda c, w: kf.image.decode_and_crop_jpeg(c, w),
               [_jpeg(_SMOOTH), np.array([3, 2, 8, 9], np.int32)],
               lambda c, w: np.asarray(Image.open(io.BytesIO(c.item())))[3:11, 2:11], compare=_close(0.5)),
        OpCase("EncodeJpegVariableQuality",
               lambda x, q: kf.image.decode_jpeg(apply_op("EncodeJpegVariableQuality", [x, q]).outputs[0]),
               [_SMOOTH, np.int32(100)], lambda x, q: x, compare=_close(2.0)),
    ]
    _RGBA = _r.randint(0, 256, (5, 7, 4)).astype(np.uint8)
    CASES += [
        OpCase("DecodeWebP", lambda c: kf.image.decode_webp(c), [_webp(_SMOOTH)], lambda c: _SMOOTH),
        OpCase("DecodeWebP", lambda c: kf.image.decode_webp(c, channels=4), [_webp(_RGBA)], lambda c: _RGBA,
               name="rgba"),
    ]

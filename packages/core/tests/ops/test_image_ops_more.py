"""kf.image's distorted-crop sampling, patches, glimpses, NMS over overlaps and per class, JPEG crops
and quality: semantics, shapes, seeds, errors and gradients.

The single-op checks against numpy references are the contract cases,
kernflow/core/testing/op_cases/image_more.py.
"""

import io

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.framework.op_def_library import apply_op

F = np.float32
IMG = np.random.RandomState(3).rand(40, 50, 3).astype(F)


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


def _draws(n, image=IMG, boxes=((0.25, 0.2, 0.75, 0.6),), **kw):
    """n runs of sample_distorted_bounding_box on `image` in one session: (begin, size, bbox, crop)."""
    with kf.Graph().as_default():
        x = kf.constant(image)
        begin, size, bbox = kf.image.sample_distorted_bounding_box(
            kf.shape(x), np.array([boxes], F).reshape(1, -1, 4), **kw)
        crop = kf.slice(x, begin, size)
        with kf.Session() as sess:
            return [sess.run([begin, size, bbox, crop]) for _ in range(n)]


# ---------------------------------------------------------------------------- sample_distorted_bounding_box
def test_sample_distorted_bounding_box_shapes_and_dtypes():
    for dt in (kf.int32, kf.int64):
        with kf.Graph().as_default():
            begin, size, bbox = kf.image.sample_distorted_bounding_box(
                kf.constant([40, 50, 3], dt), [[[0.1, 0.1, 0.5, 0.5]]], seed=1)
            assert [t.shape.as_list() for t in (begin, size, bbox)] == [[3], [3], [1, 1, 4]]
            assert (begin.dtype, size.dtype, bbox.dtype) == (dt, dt, kf.float32)
            assert begin.op.type == "SampleDistortedBoundingBoxV2" and begin.op.op_def.stateful
            b, s, bb = _run([begin, size, bbox])
            assert (b.dtype, s.dtype, bb.dtype) == (dt.as_numpy_dtype, dt.as_numpy_dtype, F)


def test_crops_lie_inside_the_image_and_slice_it():
    for begin, size, bbox, crop in _draws(100, seed=3):
        assert begin[2] == 0 and size[2] == -1
        assert (begin[:2] >= 0).all() and (size[:2] > 0).all() and (begin[:2] + size[:2] <= [40, 50]).all()
        y, x, h, w = begin[0], begin[1], size[0], size[1]
        np.testing.assert_array_equal(crop, IMG[y:y + h, x:x + w])   # the Inception idiom
        np.testing.assert_allclose(bbox[0, 0], [y / 40, x / 50, (y + h) / 40, (x + w) / 50], rtol=1e-6)


def test_every_crop_covers_enough_of_a_box():
    # pixel-aligned boxes on a 40 x 50 image, so coverage in normalised terms is exact
    boxes = ((0.25, 0.2, 0.75, 0.6), (0.5, 0.5, 1.0, 1.0))
    draws = _draws(200, boxes=boxes, seed=4, min_object_covered=0.7, area_range=[0.05, 0.5])

    def covered(crop, box):
        ih = max(min(crop[2], box[2]) - max(crop[0], box[0]), 0)
        iw = max(min(crop[3], box[3]) - max(crop[1], box[1]), 0)
        return ih * iw / ((box[2] - box[0]) * (box[3] - box[1]))
    for _, _, bbox, _ in draws:
        assert max(covered(bbox[0, 0], b) for b in boxes) >= 0.7 - 1e-6, bbox
    assert len({tuple(d[0]) for d in draws}) > 20   # crops vary, not the fallback every time


def test_aspect_ratio_and_area_ranges_are_respected():
    draws = _draws(200, seed=5, min_object_covered=0.0, aspect_ratio_range=[0.5, 2.0], area_range=[0.1, 0.3])
    ratios = []
    for _, size, _, _ in draws:
        h, w = int(size[0]), int(size[1])
        assert 0.1 * 2000 <= h * w <= 0.3 * 2000
        # the width is the height times the drawn ratio, rounded to a pixel
        assert 0.5 - 0.5 / h - 1e-9 <= w / h <= 2.0 + 0.5 / h + 1e-9
        ratios.append(w / h)
    assert min(ratios) < 0.8 and max(ratios) > 1.5


def test_falls_back_to_the_whole_image_when_no_crop_can_cover_enough():
    # covering 95% of a box that is the whole image needs a crop of over half of it
    for begin, size, bbox, crop in _draws(5, boxes=((0.0, 0.0, 1.0, 1.0),), seed=6, min_object_covered=0.95,
                                          area_range=[0.05, 0.5], max_attempts=20):
        np.testing.assert_array_equal(begin, [0, 0, 0])
        np.testing.assert_array_equal(size, [40, 50, -1])
        np.testing.assert_array_equal(bbox, [[[0, 0, 1, 1]]])
        np.testing.assert_array_equal(crop, IMG)


def test_no_bounding_boxes_uses_the_image_only_when_asked():
    with kf.Graph().as_default():
        empty = np.zeros([1, 0, 4], F)
        begin, size, _ = kf.image.sample_distorted_bounding_box(
            [40, 50, 3], empty, seed=2, use_image_if_no_bounding_boxes=True, min_object_covered=0.5)
        for _ in range(20):
            b, s = _run([begin, size])
            assert (b[:2] + s[:2] <= [40, 50]).all() and s[0] * s[1] >= 0.5 * 2000
        no_image = kf.image.sample_distorted_bounding_box([40, 50, 3], empty, seed=2)[0]
        with pytest.raises(errors.InvalidArgumentError,
                           match="SampleDistortedBoundingBoxV2.*No bounding boxes"):
            _run(no_image)


def test_a_seed_repeats_the_sequence_in_a_new_session():
    def sequence(**kw):
        return [tuple(d[0]) + tuple(d[1]) for d in _draws(8, min_object_covered=0.0, **kw)]
    first = sequence(seed=9)
    assert first == sequence(seed=9)
    assert len(set(first)) > 1                 # successive runs draw anew
    assert first != sequence(seed=10)
    assert sequence(seed2=3) == sequence(seed2=3)


def test_sample_distorted_bounding_box_errors():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="image_size must have 3 elements"):
            kf.image.sample_distorted_bounding_box([40, 50], [[[0, 0, 1, 1]]])
        with pytest.raises(ValueError, match="bounding_boxes"):
            kf.image.sample_distorted_bounding_box([40, 50, 3], [[[0, 0, 1]]])
        size = kf.placeholder(kf.int32, [None])
        boxes = kf.placeholder(kf.float32)
        begin = kf.image.sample_distorted_bounding_box(size, boxes, seed=1)[0]
        ok = {size: [40, 50, 3], boxes: [[[0.1, 0.1, 0.5, 0.5]]]}
        for feed, msg in (({size: [40, 50]}, r"image_size must be 1-D with 3 elements .*got shape \[2\]"),
                          ({size: [0, 50, 3]}, "height and width must be positive"),
                          ({boxes: [[0.1, 0.1, 0.5, 0.5]]},
                           r"bounding_boxes must be 3-D .*got shape \[1, 4\]"),
                          ({boxes: [[[0.1, 0.1, 1.5, 0.5]]]}, r"must be in \[0.0, 1.0\]"),
                          ({boxes: [[[0.6, 0.1, 0.5, 0.5]]]}, "ymin <= ymax")):
            with pytest.raises(errors.InvalidArgumentError, match="SampleDistortedBoundingBoxV2.*" + msg):
                _run(begin, {**ok, **feed})
        whole = [[[0, 0, 1, 1]]]
        bad_ratio = kf.image.sample_distorted_bounding_box([4, 5, 3], whole, aspect_ratio_range=[2, 1])
        with pytest.raises(errors.InvalidArgumentError, match="aspect_ratio_range must be"):
            _run(bad_ratio)
        negative = kf.image.sample_distorted_bounding_box([4, 5, 3], whole, min_object_covered=-0.1)
        with pytest.raises(errors.InvalidArgumentError, match="min_object_covered must be a non-negative"):
            _run(negative)


def test_sample_distorted_bounding_box_is_not_differentiable():
    with kf.Graph().as_default():
        boxes = kf.constant([[[0.1, 0.1, 0.5, 0.5]]])
        bbox = kf.image.sample_distorted_bounding_box([40, 50, 3], boxes, seed=1)[2]
        assert kf.gradients(kf.reduce_sum(bbox), boxes) == [None]


# ---------------------------------------------------------------------------- patches
def _patches_ref(x, ks, st, rates, padding):
    b, h, w, c = x.shape
    eff = [(k - 1) * r + 1 for k, r in zip(ks, rates)]
    if padding == "VALID":
        out = [-(-(n - e + 1) // s) for n, e, s in zip((h, w), eff, st)]
        pad = [0, 0]
    else:
        out = [-(-n // s) for n, s in zip((h, w), st)]
        pad = [max((o - 1) * s + e - n, 0) // 2 for o, s, e, n in zip(out, st, eff, (h, w))]
    res = np.zeros((b, out[0], out[1], ks[0] * ks[1] * c), x.dtype)
    for i in range(out[0]):
        for j in range(out[1]):
            taps = []
            for a in range(ks[0]):
                for q in range(ks[1]):
                    y, xx = i * st[0] - pad[0] + a * rates[0], j * st[1] - pad[1] + q * rates[1]
                    inside = 0 <= y < h and 0 <= xx < w
                    taps.append(x[:, y, xx] if inside else np.zeros((b, c), x.dtype))
            res[:, i, j] = np.concatenate(taps, axis=-1)
    return res


_PATCH_CONFIGS = [  # (input shape, ksizes, strides, rates, padding)
    ((1, 5, 6, 1), (2, 2), (1, 1), (1, 1), "VALID"),
    ((2, 7, 6, 3), (3, 2), (2, 3), (1, 1), "VALID"),
    ((2, 7, 8, 2), (2, 3), (3, 2), (2, 1), "SAME"),
    ((1, 6, 6, 4), (3, 3), (1, 1), (2, 2), "SAME"),
    ((3, 4, 9, 1), (1, 4), (2, 1), (1, 2), "VALID"),
    ((1, 3, 3, 2), (4, 4), (2, 2), (1, 1), "SAME"),   # windows larger than the image
]


@pytest.mark.parametrize("shape,ks,st,rates,padding", _PATCH_CONFIGS)
def test_extract_patches_matches_numpy(shape, ks, st, rates, padding):
    x = np.random.RandomState(sum(shape)).rand(*shape).astype(F)
    args = ([1, *ks, 1], [1, *st, 1], [1, *rates, 1], padding)
    with kf.Graph().as_default():
        outs = [kf.image.extract_patches(x, *args), kf.image.extract_image_patches(x, *args),
                kf.image.extract_image_patches(x, None, *args[1:], sizes=args[0]),
                kf.extract_image_patches(x, *args)]
        expected = _patches_ref(x, ks, st, rates, padding)
        assert outs[0].shape.as_list() == list(expected.shape)
        for got in _run(outs):
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("shape,ks,st,rates,padding", _PATCH_CONFIGS[1:4])
def test_extract_patches_gradient_matches_finite_differences(shape, ks, st, rates, padding):
    x0 = np.random.RandomState(1).rand(*shape)
    with kf.Graph().as_default():
        x = kf.placeholder(kf.float64, shape)
        y = kf.image.extract_patches(x, [1, *ks, 1], [1, *st, 1], [1, *rates, 1], padding)
        with kf.Session():
            err = kf.test.compute_gradient_error(x, list(shape), y, y.shape.as_list(), x_init_value=x0)
    assert err < 1e-6


def test_extract_patches_bad_arguments():
    x = kf.zeros([1, 4, 4, 1])
    with pytest.raises(ValueError, match="sizes must be 4 ints with the batch and depth entries 1"):
        kf.image.extract_patches(x, [2, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match="rates must be positive"):
        kf.image.extract_patches(x, [1, 2, 2, 1], [1, 1, 1, 1], [1, 0, 1, 1], "VALID")
    with pytest.raises(ValueError, match="rank"):
        kf.image.extract_patches(kf.zeros([4, 4, 1]), [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match="padding"):
        kf.image.extract_patches(x, [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "FULL")


# ---------------------------------------------------------------------------- non-max suppression
def _iou_matrix(boxes):
    n = len(boxes)
    out = np.zeros((n, n), F)
    for i in range(n):
        for j in range(n):
            a, b = boxes[i], boxes[j]
            inter = max(min(a[2], b[2]) - max(a[0], b[0]), 0) * max(min(a[3], b[3]) - max(a[1], b[1]), 0)
            out[i, j] = inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
    return out


_BOXES = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                   [0, 100, 1, 101]], F)
_SCORES = np.array([0.9, 0.75, 0.6, 0.95, 0.5, 0.3], F)


def test_non_max_suppression_overlaps_agrees_with_iou_suppression():
    ov = _iou_matrix(_BOXES)
    with kf.Graph().as_default():
        inf = float("-inf")
        for k, thr, score_thr in ((3, 0.5, inf), (6, 0.5, inf), (6, 0.0, 0.55), (0, 0.5, 0.0)):
            a = kf.image.non_max_suppression_overlaps(ov, _SCORES, k, thr, score_thr)
            b = kf.image.non_max_suppression(_BOXES, _SCORES, k, thr, score_thr)
            got, want = _run([a, b])
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, want)
        # any similarity works, not only IoU: here "overlaps" above 0.5 is the only relation
        custom = np.array([[1, 0.9, 0], [0.9, 1, 0.9], [0, 0.9, 1]], F)
        np.testing.assert_array_equal(
            _run(kf.image.non_max_suppression_overlaps(custom, [0.5, 0.9, 0.6], 3)), [1])


def test_non_max_suppression_overlaps_errors():
    with kf.Graph().as_default():
        with pytest.raises(ValueError):
            kf.image.non_max_suppression_overlaps(np.zeros([3, 4], F), np.zeros([3], F), 2)
        with pytest.raises(ValueError):
            kf.image.non_max_suppression_overlaps(np.zeros([3, 3], F), np.zeros([4], F), 2)
        ov, sc = kf.placeholder(kf.float32), kf.placeholder(kf.float32)
        sel = kf.image.non_max_suppression_overlaps(ov, sc, 2)
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"NonMaxSuppressionWithOverlaps.*square.*got shape \[3, 4\]"):
            _run(sel, {ov: np.zeros([3, 4]), sc: np.zeros([3])})
        with pytest.raises(errors.InvalidArgumentError, match=r"scores must be 1-D \[3\].*got shape \[2\]"):
            _run(sel, {ov: np.zeros([3, 3]), sc: np.zeros([2])})


def test_combined_non_max_suppression_per_class_sorted_and_padded():
    boxes = np.array([[[[0, 0, 0.5, 0.5]], [[0.02, 0.02, 0.52, 0.52]], [[0.5, 0.5, 1.2, 1.0]]]], F)
    scores = np.array([[[0.9, 0.1], [0.8, 0.7], [0.3, 0.6]]], F)
    with kf.Graph().as_default():
        out = kf.image.combined_non_max_suppression(boxes, scores, 2, 6, iou_threshold=0.5)
        assert [t.shape.as_list() for t in out] == [[1, 6, 4], [1, 6], [1, 6], [1]]
        assert out[3].dtype == kf.int32 and out[2].dtype == kf.float32
        b, s, c, n = _run(list(out))
        # class 0 keeps box 0 (box 1 overlaps it) and box 2; class 1 keeps boxes 1 and 2
        np.testing.assert_allclose(s[0], [0.9, 0.7, 0.6, 0.3, 0, 0])
        np.testing.assert_array_equal(c[0], [0, 1, 1, 0, 0, 0])
        np.testing.assert_allclose(b[0, :4], [[0, 0, 0.5, 0.5], [0.02, 0.02, 0.52, 0.52], [0.5, 0.5, 1, 1],
                                              [0.5, 0.5, 1, 1]])
        np.testing.assert_array_equal(b[0, 4:], 0)
        assert n.tolist() == [4]
        unclipped = kf.image.combined_non_max_suppression(boxes, scores, 2, 6, clip_boxes=False)
        few = kf.image.combined_non_max_suppression(boxes, scores, 1, 6, score_threshold=0.65,
                                                    pad_per_class=True)
        assert few[0].shape.as_list() == [1, 2, 4]   # min(1 * 2 classes, 6)
        ub, fs, fc, fn = _run([unclipped[0], few[1], few[2], few[3]])
        np.testing.assert_allclose(ub[0, 2], [0.5, 0.5, 1.2, 1.0])
        np.testing.assert_allclose(fs, [[0.9, 0.7]])
        np.testing.assert_array_equal(fc, [[0, 1]])
        assert fn.tolist() == [2]


def test_combined_non_max_suppression_total_cap_and_errors():
    scores = np.random.RandomState(2).rand(2, 8, 3).astype(F)
    boxes = np.tile(np.arange(8, dtype=F)[None, :, None, None] * 2 + np.array([0, 0, 1, 1], F), (2, 1, 3, 1))
    with kf.Graph().as_default():
        _, s, _, n = _run(list(kf.image.combined_non_max_suppression(boxes / 20, scores, 8, 5)))
        assert n.tolist() == [5, 5]   # 24 candidates (none overlap), the best 5 of each image
        np.testing.assert_allclose(s, -np.sort(-scores.reshape(2, -1), axis=1)[:, :5])
        with pytest.raises(ValueError, match="must be 1 or the number of classes"):
            kf.image.combined_non_max_suppression(np.zeros([1, 4, 2, 4], F), np.zeros([1, 4, 3], F), 2, 3)
        bx, sc = kf.placeholder(kf.float32), kf.placeholder(kf.float32)
        total = kf.placeholder(kf.int32, [])
        out = kf.image.combined_non_max_suppression(bx, sc, 2, total)[3]
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"CombinedNonMaxSuppression.*either 1 or num classes.*\[1, 4, 2, 4\]"):
            _run(out, {bx: np.zeros([1, 4, 2, 4]), sc: np.zeros([1, 4, 3]), total: 3})
        with pytest.raises(errors.InvalidArgumentError, match=r"scores must be 3-D.*got shape \[1, 5, 3\]"):
            _run(out, {bx: np.zeros([1, 4, 1, 4]), sc: np.zeros([1, 5, 3]), total: 3})
        with pytest.raises(errors.InvalidArgumentError, match="max_total_size must be positive"):
            _run(out, {bx: np.zeros([1, 4, 1, 4]), sc: np.zeros([1, 4, 3]), total: 0})


# ---------------------------------------------------------------------------- glimpses
def test_extract_glimpse_offset_conventions():
    x = np.arange(2 * 6 * 8).reshape(2, 6, 8, 1).astype(F)
    with kf.Graph().as_default():
        centre = x[:, 2:4, 2:6]
        cases = [(dict(), [[0.0, 0.0], [0.0, 0.0]], centre),
                 (dict(centered=False), [[0.5, 0.5], [0.5, 0.5]], centre),
                 (dict(centered=False, normalized=False), [[3.0, 4.0], [1.0, 2.0]],
                  np.stack([x[0, 2:4, 2:6], x[1, 0:2, 0:4]])),
                 (dict(normalized=False), [[-2.0, 2.0], [0.0, 0.0]], np.stack([x[0, 0:2, 4:8], centre[1]]))]
        for kw, offsets, want in cases:
            g = kf.image.extract_glimpse(x, [2, 4], offsets, **kw)
            assert g.shape.as_list() == [2, 2, 4, 1]
            np.testing.assert_array_equal(_run(g), want, err_msg=str(kw))


def test_extract_glimpse_fills_outside_pixels_with_noise():
    x = np.random.RandomState(4).uniform(0.2, 0.6, [1, 10, 10, 2]).astype(F)
    with kf.Graph().as_default():
        # a 6 x 6 window whose top left corner is (-3, -3): the 3 x 3 block at its bottom right is image
        args = (x, [6, 6], [[0.0, 0.0]])
        uniform = _run(kf.image.extract_glimpse(*args, centered=False, normalized=False))
        np.testing.assert_array_equal(uniform[0, 3:, 3:], x[0, :3, :3])
        outside = uniform[0, :3].ravel()
        assert x.min() <= outside.min() and outside.max() <= x.max() and np.unique(outside).size > 10
        # gaussian noise: the image's mean and deviation (over thousands of draws), and (a small
        # image's range holding ~90% of them) not confined to its range as uniform noise is
        small = np.random.RandomState(5).normal(5.0, 2.0, [1, 5, 5, 1]).astype(F)
        gauss = _run(kf.image.extract_glimpse(small, [60, 60], [[0.0, 0.0]], uniform_noise=False))
        noise = np.concatenate([gauss[0, :27].ravel(), gauss[0, 33:].ravel()])
        sd = small.std()
        assert abs(noise.mean() - small.mean()) < 0.1 * sd and abs(noise.std() - sd) < 0.1 * sd
        assert ((noise < small.min()) | (noise > small.max())).mean() > 0.02
        zero = apply_op("ExtractGlimpse", list(args), {"centered": False, "normalized": False,
                                                       "uniform_noise": False, "noise": "zero"}).outputs[0]
        z = _run(zero)
        np.testing.assert_array_equal(z[0, :3], 0)
        np.testing.assert_array_equal(z[0, 3:, 3:], x[0, :3, :3])


def test_extract_glimpse_errors():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="same batch size"):
            kf.image.extract_glimpse(np.zeros([2, 4, 4, 1], F), [2, 2], [[0.0, 0.0]])
        with pytest.raises(ValueError, match="size must have 2 elements"):
            kf.image.extract_glimpse(np.zeros([1, 4, 4, 1], F), [2, 2, 1], [[0.0, 0.0]])
        x, off = kf.placeholder(kf.float32), kf.placeholder(kf.float32)
        g = kf.image.extract_glimpse(x, [2, 2], off)
        with pytest.raises(errors.InvalidArgumentError,
                           match=r"ExtractGlimpse.*offsets must be \[batch, 2\]"):
            _run(g, {x: np.zeros([2, 4, 4, 1]), off: np.zeros([1, 2])})
        with pytest.raises(errors.InvalidArgumentError, match=r"input must be 4-D.*got shape \[4, 4, 1\]"):
            _run(g, {x: np.zeros([4, 4, 1]), off: np.zeros([1, 2])})
        both = apply_op("ExtractGlimpse", [np.zeros([1, 4, 4, 1], F), [2, 2], [[0.0, 0.0]]],
                        {"uniform_noise": True, "noise": "zero"}).outputs[0]
        with pytest.raises(errors.InvalidArgumentError, match="should not be specified at the same time"):
            _run(both)


# ---------------------------------------------------------------------------- JPEG
def _jpeg_bytes(arr, quality=95):
    from PIL import Image
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


SMOOTH = (np.linspace(0, 1, 24 * 20 * 3).reshape(24, 20, 3) * 200 + 20).astype(np.uint8)


def test_decode_and_crop_jpeg_is_decode_then_slice():
    pytest.importorskip("PIL")
    data = _jpeg_bytes(SMOOTH)
    with kf.Graph().as_default():
        crop = kf.image.decode_and_crop_jpeg(data, [3, 5, 10, 12])
        gray = kf.image.decode_and_crop_jpeg(data, [0, 0, 24, 20], channels=1)
        assert crop.shape.as_list() == [10, 12, None] and gray.shape.as_list() == [24, 20, 1]
        c, full, g = _run([crop, kf.image.decode_jpeg(data), gray])
        np.testing.assert_array_equal(c, full[3:13, 5:17])
        assert g.shape == (24, 20, 1)
        window = kf.placeholder(kf.int32, [4])
        bad = kf.image.decode_and_crop_jpeg(data, window)
        for w in ([20, 0, 5, 5], [0, 0, 0, 5], [-1, 0, 5, 5]):
            with pytest.raises(errors.InvalidArgumentError,
                               match=r"DecodeAndCropJpeg.*crop window.*\[24, 20, 3\]"):
                _run(bad, {window: w})


def test_adjust_jpeg_quality_keeps_dtype_and_shape_and_loses_detail_with_quality():
    pytest.importorskip("PIL")
    noisy = np.random.RandomState(6).randint(0, 256, [24, 20, 3]).astype(np.uint8)
    with kf.Graph().as_default():
        q = kf.placeholder(kf.int32, [])
        out = kf.image.adjust_jpeg_quality(noisy, q)
        as_float = kf.image.adjust_jpeg_quality(noisy.astype(F) / 255, 90)
        assert out.dtype == kf.uint8 and as_float.dtype == kf.float32
        with kf.Session() as sess:
            errs = [np.abs(sess.run(out, {q: v}).astype(int) - noisy).mean() for v in (100, 50, 5)]
            f = sess.run(as_float)
        assert errs[0] < errs[1] < errs[2]
        assert f.shape == (24, 20, 3) and 0 <= f.min() and f.max() <= 1
        rand = kf.image.random_jpeg_quality(noisy, 10, 90, seed=1)
        assert rand.dtype == kf.uint8
        first, again = _run(rand), _run(rand)   # the same seeded quality in each new session
        np.testing.assert_array_equal(first, again)
        assert first.shape == (24, 20, 3) and np.abs(first.astype(int) - noisy).mean() > 1
    for lo, hi in ((-1, 50), (20, 101), (50, 50)):
        with pytest.raises(ValueError):
            kf.image.random_jpeg_quality(noisy, lo, hi)

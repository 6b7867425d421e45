"""Numpy kernels of the ops in kernflow.core.ops.image_ops_more.

Sampled crops work in whole pixels, as TF's kernel does: the boxes are truncated to pixel
rectangles, a crop's height is drawn uniformly between the heights that give the smallest and
the largest area allowed (its width following from the aspect ratio), and coverage is measured
on those rectangles. The NMS kernels share image.greedy_nms with NonMaxSuppressionV3.
"""

from __future__ import annotations

import threading

import numpy as np

from kernflow.kernels.cpu.image import (_MODES, _bytes, _decode_factory, _encode, _image_arg, _invalid, _iou,
                                        greedy_nms)
from kernflow.kernels.cpu.random import _Stream

DEVICE = "CPU"
_F32 = np.float32
_EPS = 1e-7


# ---------------------------------------------------------------------------- distorted crops
def _range_attr(ctx, name, ok, what):
    r = [float(v) for v in ctx.get_attr(name)]
    if len(r) != 2 or not ok(r):
        raise _invalid(ctx, f"{name} must be 2 floats [min, max] with {what}, got {r}")
    return r


def _sample_args(ctx, image_size, boxes, min_covered):
    size, boxes = np.asarray(image_size), np.asarray(boxes, _F32)
    if size.shape != (3,):
        raise _invalid(ctx, f"image_size must be 1-D with 3 elements [height, width, channels], got "
                            f"shape {list(size.shape)}")
    h, w = int(size[0]), int(size[1])
    if h <= 0 or w <= 0:
        raise _invalid(ctx, f"image height and width must be positive, got {size.tolist()}")
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise _invalid(ctx, f"bounding_boxes must be 3-D [batch, num_boxes, 4], got shape "
                            f"{list(boxes.shape)}")
    if np.ndim(min_covered) != 0 or float(min_covered) < 0:
        raise _invalid(ctx, f"min_object_covered must be a non-negative scalar, got "
                            f"{np.asarray(min_covered)}")
    return h, w, boxes.reshape(-1, 4), float(min_covered)


def _pixel_boxes(ctx, boxes, h, w, use_image):
    """The boxes as pixel rectangles [k, 4] (x0, y0, x1, y1), truncated as TF does."""
    if not len(boxes):
        if not use_image:
            raise _invalid(ctx, "No bounding boxes provided as input. One must enable "
                                "use_image_if_no_bounding_boxes if you wish to not provide any "
                                "bounding boxes.")
        return np.array([[0, 0, w, h]], np.int64)
    if ((boxes < 0) | (boxes > 1)).any():
        raise _invalid(ctx, f"All bounding box coordinates must be in [0.0, 1.0], got {boxes.tolist()}")
    if ((boxes[:, 0] > boxes[:, 2]) | (boxes[:, 1] > boxes[:, 3])).any():
        raise _invalid(ctx, f"bounding boxes must have ymin <= ymax and xmin <= xmax, got {boxes.tolist()}")
    return np.stack([boxes[:, 1] * _F32(w), boxes[:, 0] * _F32(h), boxes[:, 3] * _F32(w),
                     boxes[:, 2] * _F32(h)], 1).astype(np.int64)


def _random_crop(gen, h, w, min_area, max_area, ratio):
    """A crop (x, y, width, height) of aspect ratio ~`ratio` with area in [min_area, max_area], or
    None when the drawn height rounds to a crop that does not fit."""
    h_min = int(np.rint(np.sqrt(min_area / ratio)))
    h_max = int(np.rint(np.sqrt(max_area / ratio)))
    if h_max * ratio > w:
        h_max = int((w + 0.5 - _EPS) / ratio)   # the tallest crop whose width rounds to at most w
    h_max = min(h_max, h)
    ch = int(gen.integers(min(h_min, h_max), h_max + 1))
    cw = int(np.rint(ch * ratio))
    if cw * ch < min_area:
        ch += 1
        cw = int(np.rint(ch * ratio))
    if cw * ch > max_area:
        ch -= 1
        cw = int(np.rint(ch * ratio))
    if not min_area <= cw * ch <= max_area or not 0 < cw <= w or not 0 < ch <= h:
        return None
    return int(gen.integers(0, w - cw + 1)), int(gen.integers(0, h - ch + 1)), cw, ch


def _covers(crop, boxes, min_covered):
    """Whether the crop covers at least min_covered of the area of some box with pixels."""
    x, y, cw, ch = crop
    area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    iw = np.clip(np.minimum(boxes[:, 2], x + cw) - np.maximum(boxes[:, 0], x), 0, None)
    ih = np.clip(np.minimum(boxes[:, 3], y + ch) - np.maximum(boxes[:, 1], y), 0, None)
    ok = area > 0
    return bool((iw[ok] * ih[ok] / area[ok] >= min_covered).any())


def _sample_box_factory(ctx):
    st = _Stream(ctx)
    ratios = _range_attr(ctx, "aspect_ratio_range", lambda r: 0 < r[0] <= r[1], "0 < min <= max")
    areas = _range_attr(ctx, "area_range", lambda r: 0 < r[0] <= r[1] <= 1, "0 < min <= max <= 1")
    attempts, use_image = ctx.get_attr("max_attempts"), ctx.get_attr("use_image_if_no_bounding_boxes")
    if attempts <= 0:
        raise _invalid(ctx, f"max_attempts must be positive, got {attempts}")
    fixed = None if ctx.op_type.endswith("V2") else ctx.get_attr("min_object_covered")
    npdt = ctx.output_dtypes[0].as_numpy_dtype

    def compute(image_size, bounding_boxes, min_object_covered=None):
        covered = fixed if fixed is not None else min_object_covered
        h, w, boxes, covered = _sample_args(ctx, image_size, bounding_boxes, covered)
        boxes = _pixel_boxes(ctx, boxes, h, w, use_image)
        crop = None
        with st.lock:
            for _ in range(attempts):
                c = _random_crop(st.gen, h, w, areas[0] * h * w, areas[1] * h * w,
                                 st.gen.uniform(ratios[0], ratios[1]))
                if c is not None and (covered <= 0 or _covers(c, boxes, covered)):
                    crop = c
                    break
        x, y, cw, ch = crop or (0, 0, w, h)
        bbox = np.array([[[y / h, x / w, (y + ch) / h, (x + cw) / w]]], _F32)
        return np.array([y, x, 0], npdt), np.array([ch, cw, -1], npdt), bbox
    return compute


# ---------------------------------------------------------------------------- glimpses
def _noise_kind(ctx):
    noise, uniform = ctx.get_attr("noise"), ctx.get_attr("uniform_noise")
    if noise not in ("", "uniform", "gaussian", "zero"):
        raise _invalid(ctx, f"noise must be one of 'uniform', 'gaussian' or 'zero', got {noise!r}")
    if uniform and noise in ("gaussian", "zero"):
        raise _invalid(ctx, "The uniform_noise and noise should not be specified at the same time")
    if noise in ("", "uniform"):
        return "uniform" if uniform else "gaussian"
    return noise


def _glimpse_args(ctx, x, size, offsets):
    x, size, offsets = np.asarray(x, _F32), np.asarray(size), np.asarray(offsets, _F32)
    if x.ndim != 4:
        raise _invalid(ctx, f"input must be 4-D [batch, height, width, channels], got shape {list(x.shape)}")
    if size.shape != (2,) or (size < 0).any():
        raise _invalid(ctx, f"size must be a vector of 2 non-negative ints (height, width), got "
                            f"{size.tolist()} of shape {list(size.shape)}")
    if offsets.shape != (x.shape[0], 2):
        raise _invalid(ctx, f"offsets must be [batch, 2] = {[x.shape[0], 2]} (y, x), got shape "
                            f"{list(offsets.shape)}")
    return x, int(size[0]), int(size[1]), offsets


def _corner(offset, in_size, size, centered, normalized):
    """The window's first pixel along one axis (TF's float32 arithmetic, truncated)."""
    v = _F32(offset)
    if normalized:
        v = v * _F32(in_size)
        if centered:
            v = v / _F32(2)
    if centered:
        v = v + _F32(in_size) / _F32(2)
    return int(v - _F32(size) / _F32(2))


def _noise(gen, kind, img, shape):
    if kind == "zero":
        return np.zeros(shape, _F32)
    if kind == "uniform":
        lo = img.min() if img.size else _F32(0)
        hi = img.max() if img.size else _F32(0)
        return (gen.random(shape, dtype=_F32) * (hi - lo) + lo).astype(_F32)
    mean = img.mean(axis=(0, 1)) if img.size else np.zeros(img.shape[-1])
    std = img.std(axis=(0, 1)) if img.size else np.zeros(img.shape[-1])
    return (gen.standard_normal(shape, dtype=_F32) * std + mean).astype(_F32)


def _glimpse(ctx):
    centered, normalized = ctx.get_attr("centered"), ctx.get_attr("normalized")
    kind = _noise_kind(ctx)
    gen, lock = np.random.default_rng(), threading.Lock()   # as TF: the noise is never seeded

    def compute(images, size, offsets):
        x, gh, gw, offsets = _glimpse_args(ctx, images, size, offsets)
        b, h, w, c = x.shape
        out = np.empty((b, gh, gw, c), _F32)
        for i in range(b):
            y0 = _corner(offsets[i, 0], h, gh, centered, normalized)
            x0 = _corner(offsets[i, 1], w, gw, centered, normalized)
            ys, xs = slice(max(y0, 0), min(y0 + gh, h)), slice(max(x0, 0), min(x0 + gw, w))
            inside = ys.start < ys.stop and xs.start < xs.stop
            if not inside or (ys.stop - ys.start, xs.stop - xs.start) != (gh, gw):
                with lock:
                    out[i] = _noise(gen, kind, x[i], (gh, gw, c))
            if inside:
                out[i, ys.start - y0:ys.stop - y0, xs.start - x0:xs.stop - x0] = x[i, ys, xs]
        return out
    return compute


# ---------------------------------------------------------------------------- non-max suppression
def _scalar(ctx, v, what):
    if np.ndim(v) != 0:
        raise _invalid(ctx, f"{what} must be 0-D, got shape {list(np.shape(v))}")
    return v


def _nms_overlaps(ctx):
    def compute(overlaps, scores, max_output_size, overlap_threshold, score_threshold):
        ov, scores = np.asarray(overlaps), np.asarray(scores)
        if ov.ndim != 2 or ov.shape[0] != ov.shape[1]:
            raise _invalid(ctx, f"overlaps must be a square 2-D [num_boxes, num_boxes] matrix, got shape "
                                f"{list(ov.shape)}")
        if scores.shape != (ov.shape[0],):
            raise _invalid(ctx, f"scores must be 1-D [{ov.shape[0]}] (one per box), got shape "
                                f"{list(scores.shape)}")
        args = [_scalar(ctx, v, n) for v, n in ((max_output_size, "max_output_size"),
                                                (overlap_threshold, "overlap_threshold"),
                                                (score_threshold, "score_threshold"))]
        return greedy_nms(ctx, lambda i, others: ov[i, others].astype(np.float64), scores, *args)[0]
    return compute


def _combined_args(ctx, boxes, scores, per_class, total, iou_thr):
    boxes, scores = np.asarray(boxes, _F32), np.asarray(scores, _F32)
    if boxes.ndim != 4 or boxes.shape[3] != 4:
        raise _invalid(ctx, f"boxes must be 4-D [batch, num_boxes, q, 4], got shape {list(boxes.shape)}")
    if scores.ndim != 3 or scores.shape[:2] != boxes.shape[:2]:
        raise _invalid(ctx, f"scores must be 3-D [batch, num_boxes, num_classes] = {list(boxes.shape[:2])} + "
                            f"[num_classes], got shape {list(scores.shape)}")
    if boxes.shape[2] not in (1, scores.shape[2]):
        raise _invalid(ctx, f"third dimension of boxes must be either 1 or num classes "
                            f"({scores.shape[2]}), got shape {list(boxes.shape)}")
    per_class, total = int(_scalar(ctx, per_class, "max_output_size_per_class")), int(
        _scalar(ctx, total, "max_total_size"))
    if per_class <= 0 or total <= 0:
        raise _invalid(ctx, f"max_output_size_per_class and max_total_size must be positive, got "
                            f"{per_class} and {total}")
    if not 0 <= float(_scalar(ctx, iou_thr, "iou_threshold")) <= 1:
        raise _invalid(ctx, f"iou_threshold must be in [0, 1], got {float(iou_thr)}")
    return boxes, scores, per_class, total


def _combined_nms(ctx):
    pad_per_class, clip = ctx.get_attr("pad_per_class"), ctx.get_attr("clip_boxes")

    def one_image(boxes, scores, per_class, iou_thr, score_thr):
        """(score, class, box index) of each box kept, best score first (ties: by class, then
        selection order)."""
        kept = []
        for c in range(scores.shape[1]):
            bx = boxes[:, c if boxes.shape[1] > 1 else 0]
            sel, _ = greedy_nms(ctx, lambda i, others: _iou(bx, i, others), scores[:, c], per_class,
                                iou_thr, score_thr)
            kept += [(scores[j, c], c, j) for j in sel]
        return sorted(kept, key=lambda k: -k[0])

    def compute(boxes, scores, max_output_size_per_class, max_total_size, iou_threshold, score_threshold):
        boxes, scores, per_class, total = _combined_args(ctx, boxes, scores, max_output_size_per_class,
                                                         max_total_size, iou_threshold)
        n_out = min(per_class * scores.shape[2], total) if pad_per_class else total
        batch = boxes.shape[0]
        out_boxes, out_scores = np.zeros((batch, n_out, 4), _F32), np.zeros((batch, n_out), _F32)
        out_classes, valid = np.zeros((batch, n_out), _F32), np.zeros(batch, np.int32)
        for b in range(batch):
            kept = one_image(boxes[b], scores[b], per_class, iou_threshold, _scalar(ctx, score_threshold,
                                                                                   "score_threshold"))[:n_out]
            valid[b] = len(kept)
            for k, (s, c, j) in enumerate(kept):
                box = boxes[b, j, c if boxes.shape[2] > 1 else 0]
                out_boxes[b, k] = np.clip(box, 0, 1) if clip else box
                out_scores[b, k], out_classes[b, k] = s, c
        return out_boxes, out_scores, out_classes, valid
    return compute


# ---------------------------------------------------------------------------- JPEG
def _decode_and_crop(ctx):
    decode = _decode_factory("jpeg")(ctx)

    def compute(contents, crop_window):
        win = np.asarray(crop_window)
        if win.shape != (4,):
            raise _invalid(ctx, f"crop_window must be 1-D with 4 elements [y, x, height, width], got shape "
                                f"{list(win.shape)}")
        img = decode(contents)
        y, x, ch, cw = (int(v) for v in win)
        if y < 0 or x < 0 or ch <= 0 or cw <= 0 or y + ch > img.shape[0] or x + cw > img.shape[1]:
            raise _invalid(ctx, f"Invalid JPEG data or crop window: crop window [y, x, height, width] "
                                f"{win.tolist()} is not inside the decoded image of shape {list(img.shape)}")
        return img[y:y + ch, x:x + cw]
    return compute


def _encode_jpeg_quality(ctx):
    def compute(images, quality):
        from PIL import Image
        x = _image_arg(ctx, images, (1, 3))
        q = int(_scalar(ctx, quality, "quality"))
        if not 0 <= q <= 100:
            raise _invalid(ctx, f"quality must be in [0, 100], got {q}")
        img = Image.fromarray(x[..., 0] if x.shape[2] == 1 else x, _MODES[x.shape[2]])
        return _encode(img, "JPEG", quality=max(q, 1))
    return compute


# ---------------------------------------------------------------------------- WebP
def _decode_webp(ctx):
    channels = ctx.get_attr("channels")
    if channels not in (0, 3, 4):
        raise _invalid(ctx, f"channels must be 0, 3 or 4 for WebP, got {channels}")

    def compute(contents):
        import io

        from PIL import Image
        data = _bytes(ctx, contents)
        if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
            raise _invalid(ctx, f"Invalid WebP data, size {len(data)} (the contents start with "
                                f"{data[:12]!r}, not RIFF....WEBP)")
        try:
            img = Image.open(io.BytesIO(data))
            frames = getattr(img, "n_frames", 1)
            stored = 4 if "A" in img.mode or frames > 1 else 3
            if channels not in (0, stored):
                what = "animation" if frames > 1 else "image"
                raise _invalid(ctx, f"channels {channels} does not match the WebP {what}'s {stored}")
            out = []
            for k in range(frames):
                img.seek(k)
                out.append(np.asarray(img.convert(_MODES[stored]), np.uint8))
        except OSError as e:
            raise _invalid(ctx, f"could not decode the WebP data: {e}") from None
        return np.stack(out) if frames > 1 else out[0]
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    table = {"SampleDistortedBoundingBox": _sample_box_factory,
             "SampleDistortedBoundingBoxV2": _sample_box_factory, "ExtractGlimpse": _glimpse,
             "NonMaxSuppressionWithOverlaps": _nms_overlaps, "CombinedNonMaxSuppression": _combined_nms,
             "DecodeAndCropJpeg": _decode_and_crop, "EncodeJpegVariableQuality": _encode_jpeg_quality,
             "DecodeWebP": _decode_webp}
    for op, factory in table.items():
        registry.register(op, device, factory)

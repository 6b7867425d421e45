"""More image ops: distorted-crop sampling, glimpses, NMS over overlaps and per class, cropped JPEG.

OpDefs, shape functions and wrappers of the image ops TF1 added after the first set (that set is in
kernflow.core.ops.image_ops, whose IMAGE_OPS includes these); CPU kernels are in
kernflow.kernels.cpu.image_more. None of them is differentiable: TF registers no gradient for them
(they output integers, selections or samples of the input).
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["IMAGE_MORE_OPS"]

_S = _ts.TensorShape

# Op types of this module: host only, like the rest of the image family.
IMAGE_MORE_OPS = ("SampleDistortedBoundingBox", "SampleDistortedBoundingBoxV2", "ExtractGlimpse",
                  "NonMaxSuppressionWithOverlaps", "CombinedNonMaxSuppression", "DecodeAndCropJpeg",
                  "EncodeJpegVariableQuality", "DecodeWebP")


# ---------------------------------------------------------------------------- shape functions
def _vector_of(op, i, n, what):
    d = op.inputs[i].shape.with_rank(1).dim_values[0]
    if d is not None and d != n:
        raise ValueError(f"{op.type}: {what} must have {n} elements, got shape {op.inputs[i].shape}")


def _scalars(op, first):
    for t in op.inputs[first:]:
        t.shape.with_rank(0)


def _const_int(t):
    v = tensor_util.constant_value(t)
    return None if v is None else int(v)


def _sample_box_shape(op):
    _vector_of(op, 0, 3, "image_size")
    boxes = op.inputs[1].shape.with_rank(3)
    if boxes.dim_values[2] not in (None, 4):
        raise ValueError(f"{op.type}: bounding_boxes must be [batch, num_boxes, 4], got shape {boxes}")
    _scalars(op, 2)
    return [_S([3]), _S([3]), _S([1, 1, 4])]


def _glimpse_shape(op):
    x = op.inputs[0].shape.with_rank(4).dim_values
    _vector_of(op, 1, 2, "size")
    offsets = op.inputs[2].shape.with_rank(2).dim_values
    if offsets[1] not in (None, 2):
        raise ValueError(f"{op.type}: offsets must be [batch, 2] (y, x), got shape {op.inputs[2].shape}")
    if None not in (x[0], offsets[0]) and x[0] != offsets[0]:
        raise ValueError(f"{op.type}: input (batch {x[0]}) and offsets (batch {offsets[0]}) must have "
                         f"the same batch size")
    v = tensor_util.constant_value(op.inputs[1])
    h, w = (None, None) if v is None else (int(v[0]), int(v[1]))
    return [_S([x[0] if x[0] is not None else offsets[0], h, w, x[3]])]


def _nms_overlaps_shape(op):
    o = op.inputs[0].shape.with_rank(2)
    n = _ts.Dimension(o.dim_values[0]).merge_with(_ts.Dimension(o.dim_values[1]))
    op.inputs[1].shape.with_rank(1).merge_with(_S([n]))
    _scalars(op, 2)
    return [_S([None])]


def _combined_nms_shape(op):
    boxes = op.inputs[0].shape.with_rank(4).dim_values
    scores = op.inputs[1].shape.with_rank(3).dim_values
    _scalars(op, 2)
    if boxes[3] not in (None, 4):
        raise ValueError(f"{op.type}: boxes must be [batch, num_boxes, q, 4], got shape {op.inputs[0].shape}")
    if None not in (boxes[2], scores[2]) and boxes[2] not in (1, scores[2]):
        raise ValueError(f"{op.type}: the third dimension of boxes ({boxes[2]}) must be 1 or the number "
                         f"of classes ({scores[2]})")
    batch = _ts.Dimension(boxes[0]).merge_with(_ts.Dimension(scores[0]))
    _ts.Dimension(boxes[1]).merge_with(_ts.Dimension(scores[1]))
    per_class, total = _const_int(op.inputs[2]), _const_int(op.inputs[3])
    n = total
    if op.get_attr("pad_per_class") and total is not None:
        n = None if per_class is None or scores[2] is None else min(per_class * scores[2], total)
    return [_S([batch, n, 4]), _S([batch, n]), _S([batch, n]), _S([batch])]


def _decode_crop_shape(op):
    op.inputs[0].shape.with_rank(0)
    _vector_of(op, 1, 4, "crop_window")
    v = tensor_util.constant_value(op.inputs[1])
    h, w = (None, None) if v is None else (int(v[2]), int(v[3]))
    return [_S([h, w, op.get_attr("channels") or None])]


def _decode_webp_shape(op):
    op.inputs[0].shape.with_rank(0)
    return [_S(None)]   # [h, w, c] for a still image, [frames, h, w, 4] for an animation


def _encode_quality_shape(op):
    op.inputs[0].shape.with_rank(3)
    op.inputs[1].shape.with_rank(0)
    return [_S([])]


# ---------------------------------------------------------------------------- op definitions
_SAMPLE_ATTRS = ["T: {uint8, int8, int16, int32, int64}", "seed: int = 0", "seed2: int = 0",
                 "aspect_ratio_range: list(float) = [0.75, 1.33]", "area_range: list(float) = [0.05, 1.0]",
                 "max_attempts: int = 100", "use_image_if_no_bounding_boxes: bool = false"]
_SAMPLE_DOC = ("Samples a crop of an image of image_size [h, w, c] that covers at least "
               "min_object_covered of one of bounding_boxes [batch, n, 4] (normalised y1, x1, y2, x2): "
               "up to max_attempts draws of an aspect ratio (width / height) uniform in its range and a "
               "height uniform between those of the least and the most area area_range allows (a "
               "fraction of the image), then the whole image. begin is [y, x, 0] and size "
               "[h, w, -1] (for Slice); bboxes is the crop [1, 1, 4], normalised. No boxes use the whole "
               "image when use_image_if_no_bounding_boxes, else are an error. Seeded by (seed, seed2), "
               "nondeterministic when both are 0.")
register_op("SampleDistortedBoundingBox", inputs=["image_size: T", "bounding_boxes: float"],
            outputs=["begin: T", "size: T", "bboxes: float"],
            attrs=_SAMPLE_ATTRS + ["min_object_covered: float = 0.1"], shape_fn=_sample_box_shape,
            stateful=True, doc=_SAMPLE_DOC)
register_op("SampleDistortedBoundingBoxV2",
            inputs=["image_size: T", "bounding_boxes: float", "min_object_covered: float"],
            outputs=["begin: T", "size: T", "bboxes: float"], attrs=_SAMPLE_ATTRS,
            shape_fn=_sample_box_shape, stateful=True,
            doc=_SAMPLE_DOC + " min_object_covered is a scalar tensor (>= 0).")
register_op("ExtractGlimpse", inputs=["input: float", "size: int32", "offsets: float"],
            outputs=["glimpse: float"],
            attrs=["centered: bool = true", "normalized: bool = true", "uniform_noise: bool = true",
                   "noise: string = 'uniform'"], shape_fn=_glimpse_shape,
            doc="Copies a window of size [gh, gw] out of each image of input [b, h, w, c], its centre at "
                "offsets [b, 2] (y, x): relative to the image centre when centered, else to its top "
                "left corner, in units of half the image size (centered) or of the image size when "
                "normalized, else in pixels; the window's top left corner is truncated to a pixel. "
                "Pixels outside the image are noise: noise 'zero' zeros, 'gaussian' normal draws "
                "with each channel's mean and standard deviation, 'uniform' (the default) uniform "
                "draws over the image's [min, max] when uniform_noise, else gaussian as well.")
register_op("NonMaxSuppressionWithOverlaps",
            inputs=["overlaps: float", "scores: float", "max_output_size: int32",
                    "overlap_threshold: float", "score_threshold: float"],
            outputs=["selected_indices: int32"], shape_fn=_nms_overlaps_shape,
            doc="Greedy non-max suppression over a precomputed [n, n] overlaps matrix: boxes by "
                "descending score, skipping those whose overlap with an already selected box exceeds "
                "overlap_threshold and those scoring at most score_threshold; at most max_output_size "
                "indices, best first.")
register_op("CombinedNonMaxSuppression",
            inputs=["boxes: float", "scores: float", "max_output_size_per_class: int32",
                    "max_total_size: int32", "iou_threshold: float", "score_threshold: float"],
            outputs=["nmsed_boxes: float", "nmsed_scores: float", "nmsed_classes: float",
                     "valid_detections: int32"],
            attrs=["pad_per_class: bool = false", "clip_boxes: bool = true"], shape_fn=_combined_nms_shape,
            doc="Per image and class, greedy non-max suppression of boxes [b, n, q, 4] (q 1: shared by "
                "every class, else one per class) by scores [b, n, classes], at most "
                "max_output_size_per_class each; then per image the best max_total_size (with "
                "pad_per_class: min(max_output_size_per_class * classes, max_total_size)) by score, "
                "zero-padded; valid_detections counts the real ones. clip_boxes clips the boxes to "
                "[0, 1].")
register_op("DecodeAndCropJpeg", inputs=["contents: string", "crop_window: int32"], outputs=["image: uint8"],
            attrs=["channels: int = 0", "ratio: int = 1", "fancy_upscaling: bool = true",
                   "try_recover_truncated: bool = false", "acceptable_fraction: float = 1",
                   "dct_method: string = ''"], shape_fn=_decode_crop_shape,
            doc="Decodes a JPEG as DecodeJpeg does and keeps crop_window [y, x, height, width] of it "
                "(which must lie inside the decoded image).")
register_op("EncodeJpegVariableQuality", inputs=["images: uint8", "quality: int32"],
            outputs=["contents: string"], shape_fn=_encode_quality_shape,
            doc="Encodes a uint8 image [h, w, 1 or 3] as a JPEG of quality given as a scalar tensor "
                "(0-100).")
register_op("DecodeWebP", inputs=["contents: string"], outputs=["image: dtype"],
            attrs=["channels: int = 0", "dtype: {uint8} = uint8"], shape_fn=_decode_webp_shape,
            doc="Decodes a WebP image: uint8 [height, width, channels] for a still image (channels 0: as "
                "stored, 3 without alpha, 4 with it; else must match the file), [frames, height, "
                "width, 4] RGBA for an animation (channels 0 or 4).")

for _op in IMAGE_MORE_OPS:
    NotDifferentiable(_op)


# ---------------------------------------------------------------------------- op wrappers
def _op(op_type, inputs, attrs=None, name=None):
    return apply_op(op_type, inputs, attrs, name=name).outputs


def _float(v, name):
    return _ops.convert_to_tensor(v, dtype=_dtypes.float32, name=name)


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, seed2=None, min_object_covered=0.1,
                                  aspect_ratio_range=None, area_range=None, max_attempts=None,
                                  use_image_if_no_bounding_boxes=None, name=None):
    """Samples a random crop of an image that covers part of at least one bounding box.

    The usual data augmentation of Inception training::

        begin, size, bbox = kf.image.sample_distorted_bounding_box(
            kf.shape(image), bounding_boxes=boxes, min_object_covered=0.1)
        crop = kf.slice(image, begin, size)

    Args:
        image_size: 1-D integer Tensor [height, width, channels].
        bounding_boxes: float Tensor [batch, num_boxes, 4] of normalised (ymin, xmin, ymax, xmax).
        seed, seed2: the op's seeds, as TF1 passes them: either non-zero seeds the generator
            (a new session repeats the sequence); both None or 0 draw fresh entropy. The graph
            seed plays no part (as in TF1's v1 function).
        min_object_covered: float (or scalar Tensor) >= 0: the fraction of some box's area the
            crop must cover.
        aspect_ratio_range: [min, max] width / height of the crop (default [0.75, 1.33]).
        area_range: [min, max] fraction of the image's area the crop covers (default [0.05, 1]).
        max_attempts: draws before falling back to the whole image (default 100).
        use_image_if_no_bounding_boxes: with no boxes, take the whole image as the box (default
            False: no boxes is an error).
        name: op name.

    Returns:
        (begin, size, bboxes): begin [offset_height, offset_width, 0] and size [target_height,
        target_width, -1] of image_size's dtype, for `kf.slice`; bboxes the crop as float
        [1, 1, 4], normalised.

    Raises:
        ValueError: on statically bad shapes.
        InvalidArgumentError (at run time): bad shapes, ranges or box coordinates, or no boxes.
    """
    attrs = {"seed": seed or 0, "seed2": seed2 or 0}
    for key, v in (("aspect_ratio_range", aspect_ratio_range), ("area_range", area_range)):
        if v is not None:
            attrs[key] = [float(e) for e in v]
    if max_attempts is not None:
        attrs["max_attempts"] = int(max_attempts)
    if use_image_if_no_bounding_boxes is not None:
        attrs["use_image_if_no_bounding_boxes"] = bool(use_image_if_no_bounding_boxes)
    with _ops.name_scope(name, "sample_distorted_bounding_box"):
        inputs = [image_size, bounding_boxes, _float(min_object_covered, "min_object_covered")]
        return tuple(_op("SampleDistortedBoundingBoxV2", inputs, attrs))


def extract_glimpse(input, size, offsets, centered=True, normalized=True, uniform_noise=True,  # noqa: A002
                    name=None):
    """Extracts a glimpse (window) of each image; pixels outside the image are noise.

    Args:
        input: float Tensor [batch, height, width, channels].
        size: 1-D int32 Tensor [glimpse_height, glimpse_width].
        offsets: float Tensor [batch, 2]: each glimpse's centre (y, x). centered: relative to the
            image's centre, else to its top left corner; normalized: in units of the image size
            (with centered, [-1, 1] spans the image), else in pixels.
        centered, normalized: see offsets.
        uniform_noise: fill the pixels outside the image with uniform draws over the image's
            [min, max] (True), or with normal draws of each channel's mean and standard deviation
            (False), as TF1 documents.
        name: op name.

    Returns:
        float Tensor [batch, glimpse_height, glimpse_width, channels].
    """
    return _op("ExtractGlimpse", [input, size, offsets],
               {"centered": centered, "normalized": normalized, "uniform_noise": uniform_noise}, name)[0]


def non_max_suppression_overlaps(overlaps, scores, max_output_size, overlap_threshold=0.5,
                                 score_threshold=float("-inf"), name=None):
    """Greedy non-max suppression over a precomputed overlap matrix.

    Args:
        overlaps: float Tensor [num_boxes, num_boxes]: overlaps[i, j] of boxes i and j.
        scores: float Tensor [num_boxes].
        max_output_size: int32 scalar: at most this many indices.
        overlap_threshold: a box overlapping a selected one by more than this is dropped.
        score_threshold: boxes scoring at most this are dropped.
        name: op name.

    Returns:
        int32 Tensor [M]: the indices selected, best score first.
    """
    with _ops.name_scope(name, "non_max_suppression_overlaps"):
        return _op("NonMaxSuppressionWithOverlaps",
                   [overlaps, scores, max_output_size, _float(overlap_threshold, "overlap_threshold"),
                    _float(score_threshold, "score_threshold")])[0]


def combined_non_max_suppression(boxes, scores, max_output_size_per_class, max_total_size, iou_threshold=0.5,
                                 score_threshold=float("-inf"), pad_per_class=False, clip_boxes=True,
                                 name=None):
    """Non-max suppression per class and image, then the best boxes of each image over all classes.

    Args:
        boxes: float Tensor [batch, num_boxes, q, 4]; q is 1 (the same boxes for every class) or
            num_classes.
        scores: float Tensor [batch, num_boxes, num_classes].
        max_output_size_per_class: int32 scalar: at most this many boxes per class.
        max_total_size: int32 scalar: at most this many boxes per image.
        iou_threshold: boxes overlapping a selected one of their class by more IoU are dropped.
        score_threshold: boxes scoring at most this are dropped.
        pad_per_class: pad to min(max_output_size_per_class * num_classes, max_total_size)
            rather than max_total_size.
        clip_boxes: clip the output boxes to [0, 1].
        name: op name.

    Returns:
        (nmsed_boxes [batch, max_detections, 4], nmsed_scores [batch, max_detections],
        nmsed_classes [batch, max_detections] (float class indices), valid_detections int32
        [batch]): best score first, zero past valid_detections.
    """
    with _ops.name_scope(name, "combined_non_max_suppression"):
        return tuple(_op("CombinedNonMaxSuppression",
                         [boxes, scores, max_output_size_per_class, _ops.convert_to_tensor(max_total_size),
                          _float(iou_threshold, "iou_threshold"), _float(score_threshold, "score_threshold")],
                         {"pad_per_class": pad_per_class, "clip_boxes": clip_boxes}))


def decode_and_crop_jpeg(contents, crop_window, channels=0, ratio=1, fancy_upscaling=True,
                         try_recover_truncated=False, acceptable_fraction=1, dct_method="", name=None):
    """Decodes JPEG bytes and crops them to crop_window [y, x, height, width] (uint8 out).

    Raises:
        InvalidArgumentError (at run time): bad JPEG data, or a window outside the image.
    """
    return _op("DecodeAndCropJpeg", [contents, crop_window],
               {"channels": channels, "ratio": ratio, "fancy_upscaling": fancy_upscaling,
                "try_recover_truncated": try_recover_truncated,
                "acceptable_fraction": float(acceptable_fraction), "dct_method": dct_method}, name)[0]


def encode_jpeg_variable_quality(images, quality, name=None):
    """Encodes a uint8 image [h, w, 1 or 3] as JPEG bytes of a quality given as an int32 tensor."""
    return _op("EncodeJpegVariableQuality",
               [images, _ops.convert_to_tensor(quality, dtype=_dtypes.int32, name="quality")], name=name)[0]


def decode_webp(contents, channels=0, dtype=_dtypes.uint8, name=None):
    """Decodes WebP bytes (TF's `tf.image.decode_webp` / `tf.io.decode_webp`).

    Args:
        contents: 0-D string Tensor: the WebP file.
        channels: 0 (as stored), 3 (RGB) or 4 (RGBA); a non-zero value must match the file's
            (TF converts nothing either). Animations are RGBA only.
        dtype: uint8, the only type TF allows.
        name: op name.

    Returns:
        uint8 Tensor [height, width, channels] for a still image, [num_frames, height, width, 4]
        for an animation (its static rank is unknown).

    Raises:
        InvalidArgumentError (at run time): the contents are not WebP, or channels does not match.
    """
    attrs = {"channels": int(channels), "dtype": _dtypes.as_dtype(dtype)}
    return _op("DecodeWebP", [contents], attrs, name)[0]

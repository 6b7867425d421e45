"""Image ops: resizing, colour spaces, crop-and-resize, non-max suppression, boxes and codecs.

OpDefs, their shape functions and gradients (TF1's image_grad formulas); CPU kernels are in
kernflow.kernels.cpu.image and the public API (crops, flips, colour adjustments composed from
these and the array/math ops) in kernflow.core.image. Images are NHWC: the resize ops take
[batch, height, width, channels]; the wrappers in kf.image also accept [height, width, channels].
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import array_ops
from kernflow.core.ops import math_ops
from kernflow.core.ops.image_ops_more import IMAGE_MORE_OPS

__all__ = ["IMAGE_OPS"]

_S = _ts.TensorShape

# Op types of this family, image_ops_more's included: host only (no GPU kernels yet).
IMAGE_OPS = ("ResizeBilinear", "ResizeBilinearGrad", "ResizeNearestNeighbor",
             "ResizeNearestNeighborGrad", "ResizeBicubic", "ResizeBicubicGrad", "ResizeArea",
             "RGBToHSV", "HSVToRGB", "AdjustContrastv2", "AdjustHue", "AdjustSaturation",
             "CropAndResize", "CropAndResizeGradImage", "CropAndResizeGradBoxes",
             "NonMaxSuppressionV3", "NonMaxSuppressionV4", "NonMaxSuppressionV5",
             "DrawBoundingBoxesV2", "DecodePng", "EncodePng", "DecodeJpeg", "EncodeJpeg",
             "DecodeGif", "DecodeBmp", "DecodeImage", "ExtractJpegShape", "RGBToHSVGrad") + IMAGE_MORE_OPS


# ---------------------------------------------------------------------------- shape functions
def _size_dims(op, i=1):
    """The (height, width) of a 2-element int32 size input (None where unknown)."""
    n = op.inputs[i].shape.with_rank(1).dim_values[0]
    if n is not None and n != 2:
        raise ValueError(f"{op.type}: size must have 2 elements (new height, new width), got shape "
                         f"{op.inputs[i].shape}")
    v = tensor_util.constant_value(op.inputs[i])
    if v is None:
        return None, None
    if (v < 0).any():
        raise ValueError(f"{op.type}: size must be non-negative, got {v.tolist()}")
    return int(v[0]), int(v[1])


def _images4(op, i=0):
    s = op.inputs[i].shape
    if s.rank is not None and s.rank != 4:
        raise ValueError(f"{op.type}: images must be 4-D [batch, height, width, channels], got shape {s}")
    return s.with_rank(4).dim_values if s.rank is not None else [None] * 4


def _resize_shape(op):
    b, _, _, c = _images4(op)
    h, w = _size_dims(op)
    return [_S([b, h, w, c])]


def _resize_grad_shape(op):
    _images4(op)
    return [op.inputs[1].shape.merge_with(_ts.unknown_shape(4))]


def _nn_grad_shape(op):
    b, _, _, c = _images4(op)
    h, w = _size_dims(op)
    return [_S([b, h, w, c])]


def _last_dim3(op):
    s = op.inputs[0].shape.with_rank_at_least(1)
    if s.rank is not None and s.dim_values[-1] is not None and s.dim_values[-1] != 3:
        raise ValueError(f"{op.type}: the last dimension of images must be 3 (RGB/HSV), got shape {s}")
    for i in range(1, len(op.inputs)):
        op.inputs[i].shape.with_rank(0)
    return [s]


def _crop_and_resize_shape(op):
    _, _, _, c = _images4(op)
    n = op.inputs[1].shape.with_rank(2).dim_values[0]
    op.inputs[2].shape.with_rank(1)
    h, w = _size_dims(op, 3)
    return [_S([n, h, w, c])]


def _crop_grad_image_shape(op):
    n, _, _, c = _images4(op)
    v = tensor_util.constant_value(op.inputs[3])
    if v is None:
        return [_S([None, None, None, c])]
    return [_S([int(d) for d in v])]


def _crop_grad_boxes_shape(op):
    return [op.inputs[2].shape.with_rank(2)]


def _nms_shape(op):
    op.inputs[0].shape.with_rank(2)
    op.inputs[1].shape.with_rank(1)
    for t in op.inputs[2:]:
        t.shape.with_rank(0)
    m = tensor_util.constant_value(op.inputs[2])
    if op.type == "NonMaxSuppressionV3":
        return [_S([None])]
    n = int(m) if m is not None and op.get_attr("pad_to_max_output_size") else None
    if op.type == "NonMaxSuppressionV4":
        return [_S([n]), _S([])]
    return [_S([n]), _S([n]), _S([])]


def _draw_shape(op):
    s = op.inputs[0].shape.with_rank(4) if op.inputs[0].shape.rank is not None else _ts.unknown_shape(4)
    op.inputs[1].shape.with_rank(3)
    return [s]


def _decode_shape(op):
    op.inputs[0].shape.with_rank(0)
    if op.type == "DecodeGif":
        return [_S([None, None, None, 3])]
    if op.type == "DecodeImage" and op.get_attr("expand_animations"):
        return [_S(None)]
    return [_S([None, None, op.get_attr("channels") or None])]


def _scalar_string_shape(op):
    op.inputs[0].shape.with_rank(3)
    return [_S([])]


def _jpeg_shape_shape(op):
    op.inputs[0].shape.with_rank(0)
    return [_S([3])]


# ---------------------------------------------------------------------------- op definitions
_IMG_T = "T: {int8, uint8, int16, uint16, int32, int64, half, float, double}"
_RESIZE_ATTRS = ["align_corners: bool = false", "half_pixel_centers: bool = false"]
_HOW = ("align_corners aligns the corner pixels' centres of input and output; half_pixel_centers "
        "samples at pixel centres (x + 0.5) * scale - 0.5 (TF2's behaviour). Both may not be set.")

register_op("ResizeBilinear", inputs=["images: T", "size: int32"], outputs=["resized_images: float"],
            attrs=[_IMG_T] + _RESIZE_ATTRS, shape_fn=_resize_shape,
            doc="Resizes a batch of images [b, h, w, c] to size [new_h, new_w] by bilinear "
                "interpolation (float32 out). " + _HOW)
register_op("ResizeBilinearGrad", inputs=["grads: float", "original_image: T"],
            outputs=["output: T"], attrs=["T: {half, float, double}"] + _RESIZE_ATTRS,
            shape_fn=_resize_grad_shape,
            doc="The gradient of ResizeBilinear w.r.t. its images: each output gradient spread over "
                "the (up to four) input pixels it interpolated, with the same weights.")
register_op("ResizeNearestNeighbor", inputs=["images: T", "size: int32"], outputs=["resized_images: T"],
            attrs=[_IMG_T] + _RESIZE_ATTRS, shape_fn=_resize_shape,
            doc="Resizes a batch of images to size [new_h, new_w], each output pixel copying its "
                "nearest input pixel. " + _HOW)
register_op("ResizeNearestNeighborGrad", inputs=["grads: T", "size: int32"], outputs=["output: T"],
            attrs=["T: {uint8, int8, int32, half, float, double}"] + _RESIZE_ATTRS,
            shape_fn=_nn_grad_shape,
            doc="The gradient of ResizeNearestNeighbor: images of size [h, w] where each pixel sums "
                "the gradients of the output pixels that copied it.")
register_op("ResizeBicubic", inputs=["images: T", "size: int32"], outputs=["resized_images: float"],
            attrs=[_IMG_T] + _RESIZE_ATTRS, shape_fn=_resize_shape,
            doc="Resizes a batch of images by bicubic (Keys) interpolation, float32 out: a = -0.75 "
                "and edge pixels repeated, or with half_pixel_centers a = -0.5 and the weights of "
                "samples outside the image dropped and renormalised. " + _HOW)
register_op("ResizeBicubicGrad", inputs=["grads: float", "original_image: T"], outputs=["output: T"],
            attrs=["T: {float, double}"] + _RESIZE_ATTRS, shape_fn=_resize_grad_shape,
            doc="The gradient of ResizeBicubic w.r.t. its images (the transposed interpolation).")
register_op("ResizeArea", inputs=["images: T", "size: int32"], outputs=["resized_images: float"],
            attrs=[_IMG_T, "align_corners: bool = false"], shape_fn=_resize_shape,
            doc="Resizes a batch of images by area averaging: each output pixel is the mean of the "
                "input area its footprint covers, weighted by overlap (float32 out).")

_COLOR_T = "T: {half, float, double}"
register_op("RGBToHSV", inputs=["images: T"], outputs=["output: T"], attrs=[_COLOR_T], shape_fn=_last_dim3,
            doc="Converts RGB images (values in [0, 1], last dimension 3) to HSV, each in [0, 1].")
register_op("HSVToRGB", inputs=["images: T"], outputs=["output: T"], attrs=[_COLOR_T], shape_fn=_last_dim3,
            doc="Converts HSV images (each channel in [0, 1], last dimension 3) to RGB.")
register_op("AdjustContrastv2", inputs=["images: T", "contrast_factor: float"], outputs=["output: T"],
            attrs=["T: {half, float} = float"],
            shape_fn=lambda op: [op.inputs[0].shape.with_rank_at_least(3)],
            doc="Per image and channel: (x - mean) * contrast_factor + mean, the mean taken over the "
                "height and width (the last three dimensions are [h, w, c]).")
register_op("AdjustHue", inputs=["images: T", "delta: float"], outputs=["output: T"],
            attrs=["T: {half, float} = float"], shape_fn=_last_dim3,
            doc="Rotates the hue of RGB images by delta (a fraction of the colour wheel, in [-1, 1]).")
register_op("AdjustSaturation", inputs=["images: T", "scale: float"], outputs=["output: T"],
            attrs=["T: {half, float} = float"], shape_fn=_last_dim3,
            doc="Multiplies the saturation of RGB images by scale (clipped to [0, 1] in HSV).")

_CROP_METHOD = "method: {'bilinear', 'nearest'} = 'bilinear'"
register_op("CropAndResize", inputs=["image: T", "boxes: float", "box_ind: int32", "crop_size: int32"],
            outputs=["crops: float"],
            attrs=["T: {uint8, uint16, int8, int16, int32, int64, half, float, double}", _CROP_METHOD,
                   "extrapolation_value: float = 0"], shape_fn=_crop_and_resize_shape,
            doc="Crops boxes [n, 4] (normalised y1, x1, y2, x2) out of image[box_ind] and resizes "
                "each to crop_size (bilinear or nearest sampling); samples outside the image get "
                "extrapolation_value.")
register_op("CropAndResizeGradImage",
            inputs=["grads: float", "boxes: float", "box_ind: int32", "image_size: int32"],
            outputs=["output: T"], attrs=["T: {half, float, double}", _CROP_METHOD],
            shape_fn=_crop_grad_image_shape,
            doc="The gradient of CropAndResize w.r.t. the image, of shape image_size [b, h, w, c].")
register_op("CropAndResizeGradBoxes", inputs=["grads: float", "image: T", "boxes: float", "box_ind: int32"],
            outputs=["output: float"],
            attrs=["T: {uint8, uint16, int8, int16, int32, int64, half, float, double}",
                   "method: {'bilinear'} = 'bilinear'"], shape_fn=_crop_grad_boxes_shape,
            doc="The gradient of CropAndResize (bilinear) w.r.t. the boxes [n, 4].")

_NMS_IN = ["boxes: T", "scores: T", "max_output_size: int32", "iou_threshold: T_threshold",
           "score_threshold: T_threshold"]
_NMS_T = ["T: {half, float} = float", "T_threshold: {half, float} = float"]
_NMS_DOC = ("Greedily selects boxes [n, 4] (any two opposite corners) by descending score, skipping "
            "those whose IoU with an already selected box exceeds iou_threshold and those scoring "
            "at most score_threshold; at most max_output_size indices, best first.")
register_op("NonMaxSuppressionV3", inputs=_NMS_IN, outputs=["selected_indices: int32"], attrs=_NMS_T,
            shape_fn=_nms_shape, doc=_NMS_DOC)
register_op("NonMaxSuppressionV4", inputs=_NMS_IN,
            outputs=["selected_indices: int32", "valid_outputs: int32"],
            attrs=_NMS_T + ["pad_to_max_output_size: bool = false"], shape_fn=_nms_shape,
            doc=_NMS_DOC + " With pad_to_max_output_size the indices are zero-padded to "
                           "max_output_size; valid_outputs counts the real ones.")
register_op("NonMaxSuppressionV5", inputs=["boxes: T", "scores: T", "max_output_size: int32",
                                           "iou_threshold: T", "score_threshold: T", "soft_nms_sigma: T"],
            outputs=["selected_indices: int32", "selected_scores: T", "valid_outputs: int32"],
            attrs=["T: {half, float} = float", "pad_to_max_output_size: bool = false"],
            shape_fn=_nms_shape,
            doc=_NMS_DOC + " soft_nms_sigma > 0 decays overlapping scores by exp(-iou^2 / (2 sigma)) "
                           "instead (Soft-NMS); the selected (decayed) scores are returned too.")
register_op("DrawBoundingBoxesV2", inputs=["images: T", "boxes: float", "colors: float"],
            outputs=["output: T"], attrs=["T: {float, half} = float"], shape_fn=_draw_shape,
            doc="Draws the 1-pixel outlines of boxes [b, n, 4] (normalised y1, x1, y2, x2) on images "
                "[b, h, w, c], box i in colors[i % len(colors)] (a default table if colors is empty).")

_DEC = "contents: string"
register_op("DecodePng", inputs=[_DEC], outputs=["image: dtype"],
            attrs=["channels: int = 0", "dtype: {uint8, uint16} = uint8"], shape_fn=_decode_shape,
            doc="Decodes a PNG into [h, w, channels] (channels 0: as stored, 1, 3 or 4).")
register_op("DecodeBmp", inputs=[_DEC], outputs=["image: uint8"], attrs=["channels: int = 0"],
            shape_fn=_decode_shape, doc="Decodes a BMP into uint8 [h, w, channels] (0: as stored, 3 or 4).")
register_op("DecodeGif", inputs=[_DEC], outputs=["image: uint8"], shape_fn=_decode_shape,
            doc="Decodes every frame of a GIF into uint8 [frames, h, w, 3].")
register_op("DecodeJpeg", inputs=[_DEC], outputs=["image: uint8"],
            attrs=["channels: int = 0", "ratio: int = 1", "fancy_upscaling: bool = true",
                   "try_recover_truncated: bool = false", "acceptable_fraction: float = 1",
                   "dct_method: string = ''"], shape_fn=_decode_shape,
            doc="Decodes a JPEG into uint8 [h / ratio, w / ratio, channels] (0: as stored, 1 or 3).")
register_op("DecodeImage", inputs=[_DEC], outputs=["image: dtype"],
            attrs=["channels: int = 0", "dtype: {uint8, uint16, float} = uint8",
                   "expand_animations: bool = true"], shape_fn=_decode_shape,
            doc="Decodes a BMP, GIF, JPEG or PNG by its magic bytes into [h, w, c] ([frames, h, w, 3] "
                "for a GIF when expand_animations); float output is scaled to [0, 1].")
register_op("EncodePng", inputs=["image: T"], outputs=["contents: string"],
            attrs=["compression: int = -1", "T: {uint8, uint16} = uint8"], shape_fn=_scalar_string_shape,
            doc="Encodes an image [h, w, c] (c in 1..4) as a PNG; compression -1 (default) to 9.")
register_op("EncodeJpeg", inputs=["image: uint8"], outputs=["contents: string"],
            attrs=["format: {'', 'grayscale', 'rgb'} = ''", "quality: int = 95", "progressive: bool = false",
                   "optimize_size: bool = false", "chroma_downsampling: bool = true",
                   "density_unit: {'in', 'cm'} = 'in'", "x_density: int = 300", "y_density: int = 300",
                   "xmp_metadata: string = ''"], shape_fn=_scalar_string_shape,
            doc="Encodes a uint8 image [h, w, 1 or 3] as a JPEG of the given quality (0-100).")
register_op("ExtractJpegShape", inputs=[_DEC], outputs=["image_shape: output_type"],
            attrs=["output_type: {int32, int64} = int32"], shape_fn=_jpeg_shape_shape,
            doc="The [height, width, channels] of a JPEG, read from its header without decoding.")


# ---------------------------------------------------------------------------- gradients
for _op in ("ResizeBilinearGrad", "ResizeNearestNeighborGrad", "ResizeBicubicGrad", "ResizeArea",
            "HSVToRGB", "AdjustHue", "AdjustSaturation", "CropAndResizeGradImage",
            "CropAndResizeGradBoxes", "NonMaxSuppressionV3", "NonMaxSuppressionV4",
            "NonMaxSuppressionV5", "DrawBoundingBoxesV2", "DecodePng", "EncodePng", "DecodeJpeg",
            "EncodeJpeg", "DecodeGif", "DecodeBmp", "DecodeImage", "ExtractJpegShape"):
    NotDifferentiable(_op)


def _resize_attrs(op):
    return {"align_corners": op.get_attr("align_corners"),
            "half_pixel_centers": op.get_attr("half_pixel_centers")}


@RegisterGradient("ResizeBilinear")
def _resize_bilinear_grad(op, grad):
    if not op.inputs[0].dtype.is_floating:
        return [None, None]
    return [apply_op("ResizeBilinearGrad", [grad, op.inputs[0]], _resize_attrs(op)).outputs[0], None]


@RegisterGradient("ResizeBicubic")
def _resize_bicubic_grad(op, grad):
    if op.inputs[0].dtype.base_dtype not in (_dtypes.float32, _dtypes.float64):
        return [None, None]
    return [apply_op("ResizeBicubicGrad", [grad, op.inputs[0]], _resize_attrs(op)).outputs[0], None]


@RegisterGradient("ResizeNearestNeighbor")
def _resize_nearest_grad(op, grad):
    x = op.inputs[0]
    size = x.shape.dim_values[1:3] if x.shape.rank == 4 and None not in x.shape.dim_values[1:3] \
        else array_ops.shape(x)[1:3]
    return [apply_op("ResizeNearestNeighborGrad", [grad, size], _resize_attrs(op)).outputs[0], None]


@RegisterGradient("AdjustContrastv2")
def _adjust_contrast_grad(op, grad):
    # out = (x - m) * f + m with m the mean over [h, w]: dx = f g + (1 - f) mean_hw(g).
    x, f = op.inputs
    fx = math_ops.cast(f, x.dtype)
    mean_g = math_ops.reduce_mean(grad, axis=[-3, -2], keepdims=True)
    dx = grad * fx + mean_g * (1 - fx)
    centered = x - math_ops.reduce_mean(x, axis=[-3, -2], keepdims=True)
    return [dx, math_ops.cast(math_ops.reduce_sum(grad * centered), _dtypes.float32)]


@RegisterGradient("RGBToHSV")
def _rgb_to_hsv_grad(op, grad):
    return [apply_op("RGBToHSVGrad", [op.inputs[0], grad]).outputs[0]]


register_op("RGBToHSVGrad", inputs=["images: T", "grads: T"], outputs=["output: T"], attrs=[_COLOR_T],
            shape_fn=lambda op: [op.inputs[0].shape],
            doc="The gradient of RGBToHSV w.r.t. its RGB images (piecewise: per pixel, through the "
                "channel that is the max and the one that is the min).")
NotDifferentiable("RGBToHSVGrad")


@RegisterGradient("CropAndResize")
def _crop_and_resize_grad(op, grad):
    image, boxes, box_ind, _ = op.inputs
    size = array_ops.shape(image)
    method = op.get_attr("method")
    g_image = None
    if image.dtype.base_dtype in (_dtypes.float16, _dtypes.float32, _dtypes.float64):
        g_image = apply_op("CropAndResizeGradImage", [grad, boxes, box_ind, size],
                           {"T": image.dtype.base_dtype, "method": method}).outputs[0]
    g_boxes = apply_op("CropAndResizeGradBoxes", [grad, image, boxes, box_ind]).outputs[0] \
        if method == "bilinear" else None
    return [g_image, g_boxes, None, None]


# ---------------------------------------------------------------------------- op wrappers
def _op(op_type, inputs, attrs=None, name=None):
    return apply_op(op_type, inputs, attrs, name=name).outputs


def resize_bilinear(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Bilinear resize of 4-D images [b, h, w, c] to size [new_h, new_w] (float32 out)."""
    return _op("ResizeBilinear", [images, size], {"align_corners": align_corners,
                                                  "half_pixel_centers": half_pixel_centers}, name)[0]


def resize_nearest_neighbor(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Nearest-neighbour resize of 4-D images to size [new_h, new_w] (the input dtype out)."""
    return _op("ResizeNearestNeighbor", [images, size], {"align_corners": align_corners,
                                                         "half_pixel_centers": half_pixel_centers}, name)[0]


def resize_bicubic(images, size, align_corners=False, name=None, half_pixel_centers=False):
    """Bicubic resize of 4-D images to size [new_h, new_w] (float32 out)."""
    return _op("ResizeBicubic", [images, size], {"align_corners": align_corners,
                                                 "half_pixel_centers": half_pixel_centers}, name)[0]


def resize_area(images, size, align_corners=False, name=None):
    """Area-averaging resize of 4-D images to size [new_h, new_w] (float32 out)."""
    return _op("ResizeArea", [images, size], {"align_corners": align_corners}, name)[0]


def rgb_to_hsv(images, name=None):
    """RGB images (floats in [0, 1], last dimension 3) to HSV."""
    return _op("RGBToHSV", [images], name=name)[0]


def hsv_to_rgb(images, name=None):
    """HSV images (floats in [0, 1], last dimension 3) to RGB."""
    return _op("HSVToRGB", [images], name=name)[0]


def crop_and_resize(image, boxes, box_ind=None, crop_size=None, method="bilinear", extrapolation_value=0,
                    name=None, box_indices=None):
    """Crops normalised boxes [n, 4] out of image[box_ind] and resizes each to crop_size (float32).

    Raises:
        ValueError: if neither box_ind nor box_indices is given, or crop_size is missing.
    """
    if box_ind is None:
        box_ind = box_indices
    if box_ind is None or crop_size is None:
        raise ValueError("crop_and_resize needs box_ind (or box_indices) and crop_size")
    if method not in ("bilinear", "nearest"):
        raise ValueError(f"method must be 'bilinear' or 'nearest', got {method!r}")
    return _op("CropAndResize", [image, boxes, box_ind, crop_size],
               {"method": method, "extrapolation_value": float(extrapolation_value)}, name)[0]


def _nms_args(boxes, scores, max_output_size, iou_threshold, score_threshold):
    from kernflow.core.framework import ops as _ops
    boxes = _ops.convert_to_tensor(boxes, name="boxes")
    dt = boxes.dtype.base_dtype
    return [boxes, scores, max_output_size, _ops.convert_to_tensor(iou_threshold, dtype=dt),
            _ops.convert_to_tensor(score_threshold, dtype=dt)]


def non_max_suppression(boxes, scores, max_output_size, iou_threshold=0.5, score_threshold=float("-inf"),
                        name=None):
    """Indices (int32) of the boxes greedy non-max suppression keeps, best score first."""
    return _op("NonMaxSuppressionV3", _nms_args(boxes, scores, max_output_size, iou_threshold,
                                                score_threshold), name=name)[0]


def non_max_suppression_with_scores(boxes, scores, max_output_size, iou_threshold=0.5,
                                    score_threshold=float("-inf"), soft_nms_sigma=0.0, name=None):
    """(indices, scores) of the boxes kept; soft_nms_sigma > 0 decays scores (Soft-NMS)."""
    args = _nms_args(boxes, scores, max_output_size, iou_threshold, score_threshold)
    from kernflow.core.framework import ops as _ops
    args.append(_ops.convert_to_tensor(soft_nms_sigma, dtype=args[0].dtype.base_dtype))
    out = _op("NonMaxSuppressionV5", args, name=name)
    return out[0], out[1]


def non_max_suppression_padded(boxes, scores, max_output_size, iou_threshold=0.5,
                               score_threshold=float("-inf"), pad_to_max_output_size=False, name=None,
                               sorted_input=False, canonicalized_coordinates=False, tile_size=512):
    """(indices, number valid): the indices zero-padded to max_output_size when asked.

    sorted_input, canonicalized_coordinates and tile_size are speed hints of TF's batched
    version; the result does not depend on them.
    """
    out = _op("NonMaxSuppressionV4", _nms_args(boxes, scores, max_output_size, iou_threshold,
                                               score_threshold),
              {"pad_to_max_output_size": pad_to_max_output_size}, name)
    return out[0], out[1]


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """Draws box outlines [b, n, 4] on float images [b, h, w, c]; colors [k, 4] (default table)."""
    from kernflow.core.framework import ops as _ops
    images = _ops.convert_to_tensor(images)
    if colors is None:
        colors = array_ops.zeros([0, 4], _dtypes.float32)
    return _op("DrawBoundingBoxesV2", [images, boxes, colors], name=name)[0]


def decode_png(contents, channels=0, dtype=_dtypes.uint8, name=None):
    """Decodes PNG bytes into [h, w, channels] uint8 or uint16."""
    return _op("DecodePng", [contents], {"channels": channels, "dtype": dtype}, name)[0]


def decode_bmp(contents, channels=0, name=None):
    """Decodes BMP bytes into uint8 [h, w, channels]."""
    return _op("DecodeBmp", [contents], {"channels": channels}, name)[0]


def decode_gif(contents, name=None):
    """Decodes every frame of GIF bytes into uint8 [frames, h, w, 3]."""
    return _op("DecodeGif", [contents], name=name)[0]


def decode_jpeg(contents, channels=0, ratio=1, fancy_upscaling=True, try_recover_truncated=False,
                acceptable_fraction=1, dct_method="", name=None):
    """Decodes JPEG bytes into uint8 [h / ratio, w / ratio, channels]."""
    return _op("DecodeJpeg", [contents], {"channels": channels, "ratio": ratio,
                                          "fancy_upscaling": fancy_upscaling,
                                          "try_recover_truncated": try_recover_truncated,
                                          "acceptable_fraction": float(acceptable_fraction),
                                          "dct_method": dct_method}, name)[0]


def encode_png(image, compression=-1, name=None):
    """Encodes a uint8/uint16 image [h, w, c] as PNG bytes (a string scalar)."""
    return _op("EncodePng", [image], {"compression": compression}, name)[0]


def encode_jpeg(image, format="", quality=95, progressive=False, optimize_size=False,  # noqa: A002
                chroma_downsampling=True, density_unit="in", x_density=300, y_density=300,
                xmp_metadata="", name=None):
    """Encodes a uint8 image [h, w, 1 or 3] as JPEG bytes (a string scalar)."""
    return _op("EncodeJpeg", [image], {"format": format, "quality": quality, "progressive": progressive,
                                       "optimize_size": optimize_size,
                                       "chroma_downsampling": chroma_downsampling,
                                       "density_unit": density_unit, "x_density": x_density,
                                       "y_density": y_density, "xmp_metadata": xmp_metadata}, name)[0]


def extract_jpeg_shape(contents, output_type=_dtypes.int32, name=None):
    """The [height, width, channels] of JPEG bytes, from the header alone."""
    return _op("ExtractJpegShape", [contents], {"output_type": output_type}, name)[0]

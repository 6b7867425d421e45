"""`kf.image`: TF1's image API (``tf.compat.v1.image``).

Images are [height, width, channels] or [batch, height, width, channels]. The resize, colour-space,
crop-and-resize, non-max-suppression and codec ops are in kernflow.core.ops.image_ops (distorted-crop
sampling, glimpses, NMS over overlaps and per class in image_ops_more, patches in misc_ops_more);
crops, pads, flips, rotations and colour adjustments here are built from array and math ops, so they have
gradients wherever those do. Dtype rules follow TF: integer images are converted to float32 in
[0, 1] (`convert_image_dtype`) for colour arithmetic and converted back, saturating.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_util
from kernflow.core.ops import array_ops as _array
from kernflow.core.ops import control_flow_ops as _cf
from kernflow.core.ops import math_ops as _math
from kernflow.core.ops import random_ops as _random
from kernflow.core.ops.image_ops import (crop_and_resize, decode_bmp, decode_gif, decode_jpeg, decode_png,
                                         draw_bounding_boxes, encode_jpeg, encode_png, extract_jpeg_shape,
                                         hsv_to_rgb, non_max_suppression, non_max_suppression_padded,
                                         non_max_suppression_with_scores, resize_area, resize_bicubic,
                                         resize_bilinear, resize_nearest_neighbor, rgb_to_hsv)
from kernflow.core.ops.image_ops_more import (combined_non_max_suppression, decode_and_crop_jpeg, decode_webp,
                                              encode_jpeg_variable_quality, extract_glimpse,
                                              non_max_suppression_overlaps, sample_distorted_bounding_box)
from kernflow.core.ops.misc_ops_more import extract_image_patches
from kernflow.core.framework.op_def_library import apply_op

__all__ = [
    "is_jpeg", "ResizeMethod", "resize_images", "resize", "resize_bilinear", "resize_nearest_neighbor",
    "resize_bicubic", "resize_area", "resize_image_with_crop_or_pad", "resize_with_crop_or_pad",
    "resize_image_with_pad", "central_crop", "crop_to_bounding_box", "pad_to_bounding_box",
    "flip_left_right", "flip_up_down", "random_flip_left_right", "random_flip_up_down", "transpose",
    "transpose_image", "rot90", "random_crop", "image_gradients", "sobel_edges", "crop_and_resize",
    "non_max_suppression", "non_max_suppression_with_scores", "non_max_suppression_padded",
    "draw_bounding_boxes", "decode_png", "encode_png", "decode_jpeg", "encode_jpeg", "decode_gif",
    "decode_bmp", "decode_webp", "decode_image", "extract_jpeg_shape", "rgb_to_hsv", "hsv_to_rgb",
    "adjust_brightness", "adjust_contrast", "adjust_gamma", "adjust_hue", "adjust_saturation",
    "convert_image_dtype", "grayscale_to_rgb", "per_image_standardization", "psnr",
    "random_brightness", "random_contrast", "random_hue", "random_saturation", "rgb_to_grayscale",
    "rgb_to_yiq", "rgb_to_yuv", "ssim", "ssim_multiscale", "total_variation", "yiq_to_rgb", "yuv_to_rgb",
    "sample_distorted_bounding_box", "extract_patches", "extract_image_patches", "extract_glimpse",
    "non_max_suppression_overlaps", "combined_non_max_suppression", "decode_and_crop_jpeg",
    "adjust_jpeg_quality", "random_jpeg_quality"]


class ResizeMethod:
    """The resize methods of `resize_images` (TF1's numbering)."""
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


# ---------------------------------------------------------------------------- shape helpers
def _image(image, name="image"):
    """`image` as a tensor of rank 3 or 4 (ValueError otherwise, when the rank is known)."""
    image = _ops.convert_to_tensor(image, name=name)
    r = image.shape.rank
    if r is not None and r not in (3, 4):
        raise ValueError(f"'{name}' must have either 3 or 4 dimensions, got shape {image.shape}")
    if r is None:
        raise ValueError(f"'{name}' contains no shape: its rank must be 3 or 4")
    return image


def _dims(image):
    """[h, w] of a 3-D or 4-D image: python ints where static, scalar tensors otherwise."""
    static = image.shape.dim_values[-3:-1]
    dyn = _array.shape(image)
    off = image.shape.rank - 3
    return [s if s is not None else dyn[off + i] for i, s in enumerate(static)]


def _static(v):
    if isinstance(v, (int, np.integer)):
        return int(v)
    c = tensor_util.constant_value(_ops.convert_to_tensor(v))
    return None if c is None else int(c)


def _check(cond_static, msg, cond_tensor_fn, deps):
    """Raises ValueError when a static condition fails; else adds a run-time Assert if needed."""
    if cond_static is False:
        raise ValueError(msg)
    if cond_static is None:
        deps.append(_cf.Assert(cond_tensor_fn(), [msg]))


def _with_deps(deps, t):
    if not deps:
        return t
    with _ops.control_dependencies(deps):
        return _array.identity(t)


def _batched(image):
    """(4-D image, whether the input was 3-D)."""
    if image.shape.rank == 3:
        return _array.expand_dims(image, 0), True
    return image, False


def _unbatch(image, was3):
    return _array.squeeze(image, [0]) if was3 else image


def _cmp(a, b, op):
    sa, sb = _static(a), _static(b)
    if sa is not None and sb is not None:
        return op(sa, sb)
    return None


# ---------------------------------------------------------------------------- resize
_RESIZE_FN = {ResizeMethod.BILINEAR: resize_bilinear, ResizeMethod.NEAREST_NEIGHBOR: resize_nearest_neighbor,
              ResizeMethod.BICUBIC: resize_bicubic, ResizeMethod.AREA: resize_area}
_METHOD_NAMES = {"bilinear": 0, "nearest": 1, "bicubic": 2, "area": 3}


def resize_images(images, size, method=ResizeMethod.BILINEAR, align_corners=False,
                  preserve_aspect_ratio=False, name=None):
    """Resizes images [h, w, c] or [b, h, w, c] to size [new_h, new_w] (TF1 semantics).

    BILINEAR, BICUBIC and AREA give float32; NEAREST_NEIGHBOR keeps the dtype. When the static
    size already equals the requested one the images come back unchanged. With
    preserve_aspect_ratio the result fits inside size, scaled by the smaller factor.

    Raises:
        ValueError: images not 3-D or 4-D, size not 2 elements, or an unknown method.
    """
    with _ops.name_scope(name, "resize", [images, size]):
        images = _image(images, "images")
        size = _ops.convert_to_tensor(size, dtype=_dtypes.int32, name="size")
        if not size.shape.is_compatible_with([2]):
            raise ValueError("'size' must be a 1-D Tensor of 2 elements: new_height, new_width")
        method = _METHOD_NAMES.get(method, method)
        if method not in _RESIZE_FN:
            raise ValueError(f"Resize method is not implemented: {method}")
        images, was3 = _batched(images)
        h, w = _dims(images)
        if preserve_aspect_ratio:
            fh, fw = _math.cast(h, _dtypes.float32), _math.cast(w, _dtypes.float32)
            scale = _math.minimum(_math.cast(size[0], _dtypes.float32) / fh,
                                  _math.cast(size[1], _dtypes.float32) / fw)
            size = _math.cast(_math.round(_array.stack([scale * fh, scale * fw])), _dtypes.int32)
        const = tensor_util.constant_value(size)
        if const is not None and [int(const[0]), int(const[1])] == [h, w]:
            return _unbatch(images, was3)
        out = _RESIZE_FN[method](images, size, align_corners=align_corners)
        if const is not None:
            out.set_shape([None, int(const[0]), int(const[1]), None])
        return _unbatch(out, was3)


resize = resize_images


def crop_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """Crops the box [offset, offset + target) out of a 3-D or 4-D image.

    Raises:
        ValueError: static offsets negative, targets not positive, or the box leaves the image
            (InvalidArgumentError at run time when only known then).
    """
    with _ops.name_scope(None, "crop_to_bounding_box", [image]):
        image = _image(image)
        image4, was3 = _batched(image)
        h, w = _dims(image4)
        deps = []
        _check(_cmp(offset_width, 0, int.__ge__), "offset_width must be >= 0.",
               lambda: _math.greater_equal(offset_width, 0), deps)
        _check(_cmp(offset_height, 0, int.__ge__), "offset_height must be >= 0.",
               lambda: _math.greater_equal(offset_height, 0), deps)
        _check(_cmp(target_width, 0, int.__gt__), "target_width must be > 0.",
               lambda: _math.greater(target_width, 0), deps)
        _check(_cmp(target_height, 0, int.__gt__), "target_height must be > 0.",
               lambda: _math.greater(target_height, 0), deps)
        _check(_cmp(w, _add(target_width, offset_width), int.__ge__),
               "width must be >= target + offset.",
               lambda: _math.greater_equal(w, _add(target_width, offset_width)), deps)
        _check(_cmp(h, _add(target_height, offset_height), int.__ge__),
               "height must be >= target + offset.",
               lambda: _math.greater_equal(h, _add(target_height, offset_height)), deps)
        image4 = _with_deps(deps, image4)
        out = _array.slice(image4, _array.stack([0, offset_height, offset_width, 0]),
                           _array.stack([-1, target_height, target_width, -1]))
        out.set_shape([image4.shape.dim_values[0], _static(target_height), _static(target_width),
                       image4.shape.dim_values[3]])
        return _unbatch(out, was3)


def _add(a, b):
    sa, sb = _static(a), _static(b)
    return sa + sb if sa is not None and sb is not None else _math.add(a, b)


def _sub(a, b):
    sa, sb = _static(a), _static(b)
    return sa - sb if sa is not None and sb is not None else _math.subtract(a, b)


def pad_to_bounding_box(image, offset_height, offset_width, target_height, target_width):
    """Zero-pads a 3-D or 4-D image to [target_height, target_width], the image at the offsets.

    Raises:
        ValueError: static offsets negative or the image does not fit (InvalidArgumentError at run
            time when only known then).
    """
    with _ops.name_scope(None, "pad_to_bounding_box", [image]):
        image = _image(image)
        image4, was3 = _batched(image)
        h, w = _dims(image4)
        after_w = _sub(_sub(target_width, offset_width), w)
        after_h = _sub(_sub(target_height, offset_height), h)
        deps = []
        _check(_cmp(offset_height, 0, int.__ge__), "offset_height must be >= 0",
               lambda: _math.greater_equal(offset_height, 0), deps)
        _check(_cmp(offset_width, 0, int.__ge__), "offset_width must be >= 0",
               lambda: _math.greater_equal(offset_width, 0), deps)
        _check(_cmp(after_w, 0, int.__ge__), "width must be <= target - offset",
               lambda: _math.greater_equal(after_w, 0), deps)
        _check(_cmp(after_h, 0, int.__ge__), "height must be <= target - offset",
               lambda: _math.greater_equal(after_h, 0), deps)
        image4 = _with_deps(deps, image4)
        pads = _array.reshape(_array.stack([0, 0, offset_height, after_h, offset_width, after_w, 0, 0]),
                              [4, 2])
        out = _array.pad(image4, pads)
        out.set_shape([image4.shape.dim_values[0], _static(target_height), _static(target_width),
                       image4.shape.dim_values[3]])
        return _unbatch(out, was3)


def _half(a, floor_of_neg=False):
    s = _static(a)
    if s is not None:
        return max((-s if floor_of_neg else s) // 2, 0)
    v = _math.negative(a) if floor_of_neg else a
    return _math.maximum(_math.floordiv(v, 2), 0)


def resize_image_with_crop_or_pad(image, target_height, target_width):
    """Centrally crops and/or zero-pads an image to [target_height, target_width]."""
    with _ops.name_scope(None, "resize_image_with_crop_or_pad", [image]):
        image = _image(image)
        h, w = _dims(image)
        dh, dw = _sub(target_height, h), _sub(target_width, w)
        cropped = crop_to_bounding_box(image, _half(dh, True), _half(dw, True), _min(target_height, h),
                                       _min(target_width, w))
        return pad_to_bounding_box(cropped, _half(dh), _half(dw), target_height, target_width)


resize_with_crop_or_pad = resize_image_with_crop_or_pad


def _min(a, b):
    sa, sb = _static(a), _static(b)
    return min(sa, sb) if sa is not None and sb is not None else _math.minimum(a, b)


def resize_image_with_pad(image, target_height, target_width, method=ResizeMethod.BILINEAR,
                          align_corners=False):
    """Resizes keeping the aspect ratio so the image fits, then zero-pads it to the target size."""
    with _ops.name_scope(None, "resize_image_with_pad", [image]):
        image = _image(image)
        image4, was3 = _batched(image)
        h, w = (_math.cast(d, _dtypes.float32) for d in _dims(image4))
        th, tw = _math.cast(target_height, _dtypes.float32), _math.cast(target_width, _dtypes.float32)
        ratio = _math.maximum(w / tw, h / th)
        rh, rw = h / ratio, w / ratio
        new = _math.cast(_math.floor(_array.stack([rh, rw])), _dtypes.int32)
        ph = _math.maximum(0, _math.cast(_math.floor((th - rh) / 2), _dtypes.int32))
        pw = _math.maximum(0, _math.cast(_math.floor((tw - rw) / 2), _dtypes.int32))
        resized = resize_images(image4, new, method, align_corners)
        out = pad_to_bounding_box(resized, ph, pw, target_height, target_width)
        return _unbatch(out, was3)


def central_crop(image, central_fraction):
    """Crops the central fraction (0, 1] of the height and width of a 3-D or 4-D image.

    Raises:
        ValueError: central_fraction outside (0, 1].
    """
    with _ops.name_scope(None, "central_crop", [image]):
        image = _image(image)
        if central_fraction <= 0.0 or central_fraction > 1.0:
            raise ValueError("central_fraction must be within (0, 1]")
        if central_fraction == 1.0:
            return image
        h, w = _dims(image)
        starts = []
        for d in (h, w):
            if isinstance(d, int):
                starts.append(int((d - d * central_fraction) / 2))
            else:
                fd = _math.cast(d, _dtypes.float64)
                starts.append(_math.cast((fd - fd * central_fraction) / 2, _dtypes.int32))
        return crop_to_bounding_box(image, starts[0], starts[1], _sub(h, _mul2(starts[0])),
                                    _sub(w, _mul2(starts[1])))


def _mul2(a):
    return 2 * a if isinstance(a, int) else a * 2


# ---------------------------------------------------------------------------- flips and rotations
def _axis(image, axis3):
    return axis3 + (image.shape.rank - 3)


def flip_left_right(image):
    """Reverses the width axis of a 3-D or 4-D image."""
    image = _image(image)
    return _array.reverse(image, [_axis(image, 1)])


def flip_up_down(image):
    """Reverses the height axis of a 3-D or 4-D image."""
    image = _image(image)
    return _array.reverse(image, [_axis(image, 0)])


def _random_flip(image, axis3, seed, scope):
    with _ops.name_scope(None, scope, [image]):
        image = _image(image)
        axis = _axis(image, axis3)
        if image.shape.rank == 3:
            flip = _math.less(_random.random_uniform([], 0, 1.0, seed=seed), 0.5)
            out = _cf.cond(flip, lambda: _array.reverse(image, [axis]), lambda: image)
            out.set_shape(image.shape)
            return out
        batch = _array.shape(image)[0]
        flips = _math.round(_random.random_uniform(_array.stack([batch, 1, 1, 1]), 0, 1.0, seed=seed))
        flips = _math.cast(flips, image.dtype)
        return flips * _array.reverse(image, [axis]) + (1 - flips) * image


def random_flip_left_right(image, seed=None):
    """Flips an image (each image of a batch) left to right with probability 1/2."""
    return _random_flip(image, 1, seed, "random_flip_left_right")


def random_flip_up_down(image, seed=None):
    """Flips an image (each image of a batch) upside down with probability 1/2."""
    return _random_flip(image, 0, seed, "random_flip_up_down")


def transpose(image, name=None):
    """Swaps the height and width axes of a 3-D or 4-D image."""
    with _ops.name_scope(name, "transpose", [image]):
        image = _image(image)
        return _array.transpose(image, [1, 0, 2] if image.shape.rank == 3 else [0, 2, 1, 3])


transpose_image = transpose


def rot90(image, k=1, name=None):
    """Rotates a 3-D or 4-D image counter-clockwise by k quarter turns (k may be a tensor)."""
    with _ops.name_scope(name, "rot90", [image, k]):
        image = _image(image)
        ks = _static(k)
        if ks is not None:
            return _rot90(image, ks % 4)
        k = _math.floormod(_ops.convert_to_tensor(k, dtype=_dtypes.int32), 4)
        out = _cf.case([(_math.equal(k, i), lambda i=i: _rot90(image, i)) for i in (1, 2, 3)],
                       default=lambda: image, exclusive=True)
        r = image.shape.rank
        out.set_shape([None] * r if r else None)
        return out


def _rot90(image, k):
    h, w = _axis(image, 0), _axis(image, 1)
    perm = [0, 2, 1, 3] if image.shape.rank == 4 else [1, 0, 2]
    if k == 0:
        return image
    if k == 1:
        return _array.transpose(_array.reverse(image, [w]), perm)
    if k == 2:
        return _array.reverse(image, [h, w])
    return _array.reverse(_array.transpose(image, perm), [w])


def random_crop(value, size, seed=None, name=None):
    """A uniformly placed crop of `size` (one entry per dimension of value).

    Raises:
        InvalidArgumentError (at run time): size larger than value's shape.
    """
    with _ops.name_scope(name, "random_crop", [value, size]):
        value = _ops.convert_to_tensor(value, name="value")
        size = _ops.convert_to_tensor(size, dtype=_dtypes.int32, name="size")
        shape = _array.shape(value)
        ok = _math.reduce_all(_math.greater_equal(shape, size))
        check = _cf.Assert(ok, ["Need value.shape >= size, got ", shape, size], summarize=1000)
        with _ops.control_dependencies([check]):
            limit = shape - size + 1
        offset = _math.floormod(_random.random_uniform(_array.shape(shape), dtype=_dtypes.int32,
                                                       maxval=2 ** 31 - 1, seed=seed), limit)
        out = _array.slice(value, offset, size)
        const = tensor_util.constant_value(size)
        if const is not None:
            out.set_shape([int(d) for d in const])
        return out


# ---------------------------------------------------------------------------- gradients of images
def image_gradients(image):
    """(dy, dx): forward differences of a 4-D image, zero in the last row / column.

    Raises:
        ValueError: the image is not 4-D.
    """
    image = _ops.convert_to_tensor(image)
    if image.shape.rank != 4:
        raise ValueError(f"image_gradients expects a 4D tensor [batch_size, h, w, d], not {image.shape}.")
    dy = image[:, 1:, :, :] - image[:, :-1, :, :]
    dx = image[:, :, 1:, :] - image[:, :, :-1, :]
    dy = _array.concat([dy, _array.zeros_like(image[:, :1, :, :])], 1)
    dx = _array.concat([dx, _array.zeros_like(image[:, :, :1, :])], 2)
    dy.set_shape(image.shape)
    dx.set_shape(image.shape)
    return dy, dx


_SOBEL = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float64)


def sobel_edges(image):
    """Sobel responses [b, h, w, c, 2] (vertical then horizontal) of a 4-D image, edges reflected."""
    image = _ops.convert_to_tensor(image)
    if image.shape.rank is not None and image.shape.rank != 4:
        raise ValueError(f"sobel_edges expects a 4-D image [batch, h, w, c], got shape {image.shape}")
    padded = _array.pad(image, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    h, w = _dims(image)
    outs = []
    for kernel in (_SOBEL, _SOBEL.T):
        terms = []
        for i in range(3):
            for j in range(3):
                if kernel[i, j]:
                    win = _array.slice(padded, _array.stack([0, i, j, 0]), _array.stack([-1, h, w, -1]))
                    terms.append(win * _math.cast(kernel[i, j], image.dtype))
        outs.append(_math.add_n(terms))
    out = _array.stack(outs, axis=-1)
    out.set_shape(image.shape.concatenate([2]) if image.shape.rank else None)
    return out


def extract_patches(images, sizes, strides, rates, padding, name=None):
    """The [1, rows, cols, 1] windows of NHWC images in the depth of the output (TF2's argument
    names for `extract_image_patches`, which see)."""
    return extract_image_patches(images, sizes, strides, rates, padding, name=name)


def decode_image(contents, channels=None, dtype=_dtypes.uint8, name=None, expand_animations=True):
    """Decodes BMP, GIF, JPEG or PNG bytes by their magic bytes (see DecodeImage).

    dtype uint8, uint16 or float32 (scaled to [0, 1]); other dtypes go through
    `convert_image_dtype`. A GIF gives [frames, h, w, 3] when expand_animations, else its first
    frame.
    """
    with _ops.name_scope(name, "decode_image", [contents]):
        dtype = _dtypes.as_dtype(dtype)
        native = dtype if dtype in (_dtypes.uint8, _dtypes.uint16, _dtypes.float32) else _dtypes.uint16
        out = apply_op("DecodeImage", [contents], {"channels": channels or 0, "dtype": native,
                                                   "expand_animations": expand_animations}).outputs[0]
        return out if native == dtype else convert_image_dtype(out, dtype)


# ---------------------------------------------------------------------------- dtypes and colour
def _max_of(dtype):
    return 1.0 if dtype.is_floating else int(np.iinfo(dtype.as_numpy_dtype).max)


def convert_image_dtype(image, dtype, saturate=False, name=None):
    """Converts an image to `dtype`, rescaling: floats span [0, 1], integers [0, MAX].

    Integer to integer shifts by the ratio of the ranges; float to integer scales by MAX + 0.5
    and truncates (saturating first when asked); integer to float divides by MAX.

    Raises:
        AttributeError: `image` or `dtype` is not a numeric image type.
    """
    image = _ops.convert_to_tensor(image, name="image")
    dtype = _dtypes.as_dtype(dtype)
    if not (dtype.is_floating or dtype.is_integer) or not (image.dtype.is_floating or image.dtype.is_integer):
        raise AttributeError(f"dtype must be either floating point or integer, got {image.dtype.name} -> "
                             f"{dtype.name}")
    if dtype == image.dtype.base_dtype:
        return _array.identity(image, name=name)
    with _ops.name_scope(name, "convert_image", [image]):
        src = image.dtype.base_dtype
        if src.is_integer and dtype.is_integer:
            a, b = _max_of(src), _max_of(dtype)
            if a > b:
                return _math.cast(_math.floordiv(image, _math.cast((a + 1) // (b + 1), src)), dtype)
            return _math.cast(image, dtype) * _math.cast((b + 1) // (a + 1), dtype)
        if src.is_floating and dtype.is_floating:
            return _math.cast(image, dtype)
        if src.is_integer:
            return _math.cast(image, dtype) * _math.cast(1.0 / _max_of(src), dtype)
        scaled = image * _math.cast(_max_of(dtype) + 0.5, src)
        return _math.saturate_cast(scaled, dtype) if saturate else _math.cast(scaled, dtype)


def _as_float(image):
    """(image as float16/float32, its original dtype), as TF's colour adjustments convert."""
    image = _ops.convert_to_tensor(image, name="image")
    orig = image.dtype.base_dtype
    if orig in (_dtypes.float16, _dtypes.float32):
        return image, orig
    return convert_image_dtype(image, _dtypes.float32), orig


def _back(image, orig):
    return convert_image_dtype(image, orig, saturate=True)


def adjust_brightness(image, delta):
    """Adds delta to every pixel (in float [0, 1] terms for integer images, saturating back)."""
    with _ops.name_scope(None, "adjust_brightness", [image, delta]):
        flt, orig = _as_float(image)
        return _back(_math.add(flt, _math.cast(delta, flt.dtype)), orig)


def adjust_contrast(images, contrast_factor):
    """(x - mean) * contrast_factor + mean per image and channel, the mean over height and width."""
    with _ops.name_scope(None, "adjust_contrast", [images, contrast_factor]):
        flt, orig = _as_float(images)
        factor = _math.cast(contrast_factor, _dtypes.float32)
        return _back(apply_op("AdjustContrastv2", [flt, factor]).outputs[0], orig)


def adjust_gamma(image, gamma=1, gain=1):
    """gain * image ** gamma (integer images through float [0, 1]).

    Raises:
        ValueError: a static gamma < 0 (InvalidArgumentError at run time otherwise).
    """
    with _ops.name_scope(None, "adjust_gamma", [image, gamma, gain]):
        flt, orig = _as_float(image)
        gamma = _ops.convert_to_tensor(gamma, name="gamma")
        g = tensor_util.constant_value(gamma)
        if g is not None and float(g) < 0:
            raise ValueError("Gamma should be a non-negative real number.")
        deps = [] if g is not None else [_cf.Assert(_math.greater_equal(gamma, 0),
                                                    ["Gamma should be a non-negative real number."])]
        with _ops.control_dependencies(deps):
            out = _math.cast(gain, flt.dtype) * _math.pow(flt, _math.cast(gamma, flt.dtype))
        return _back(out, orig)


def adjust_hue(image, delta, name=None):
    """Rotates the hue of RGB images by delta (in [-1, 1], a fraction of the colour wheel)."""
    with _ops.name_scope(name, "adjust_hue", [image]):
        flt, orig = _as_float(image)
        out = apply_op("AdjustHue", [flt, _math.cast(delta, _dtypes.float32)]).outputs[0]
        return _back(out, orig)


def adjust_saturation(image, saturation_factor, name=None):
    """Scales the saturation of RGB images by saturation_factor (clipped to [0, 1] in HSV)."""
    with _ops.name_scope(name, "adjust_saturation", [image]):
        flt, orig = _as_float(image)
        out = apply_op("AdjustSaturation", [flt, _math.cast(saturation_factor, _dtypes.float32)]).outputs[0]
        return _back(out, orig)


def _check_range(lower, upper):
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")


def random_brightness(image, max_delta, seed=None):
    """adjust_brightness by a delta uniform in [-max_delta, max_delta).

    Raises:
        ValueError: max_delta < 0.
    """
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_brightness(image, _random.random_uniform([], -max_delta, max_delta, seed=seed))


def random_contrast(image, lower, upper, seed=None):
    """adjust_contrast by a factor uniform in [lower, upper).

    Raises:
        ValueError: upper <= lower or lower < 0.
    """
    _check_range(lower, upper)
    return adjust_contrast(image, _random.random_uniform([], lower, upper, seed=seed))


def random_hue(image, max_delta, seed=None):
    """adjust_hue by a delta uniform in [-max_delta, max_delta), max_delta in [0, 0.5].

    Raises:
        ValueError: max_delta outside [0, 0.5].
    """
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_hue(image, _random.random_uniform([], -max_delta, max_delta, seed=seed))


def random_saturation(image, lower, upper, seed=None):
    """adjust_saturation by a factor uniform in [lower, upper).

    Raises:
        ValueError: upper <= lower or lower < 0.
    """
    _check_range(lower, upper)
    return adjust_saturation(image, _random.random_uniform([], lower, upper, seed=seed))


def adjust_jpeg_quality(image, jpeg_quality, name=None):
    """Encodes a [h, w, 1 or 3] image as a JPEG of quality jpeg_quality (0-100, an int or an int32
    tensor) and decodes it again, in the image's dtype (through uint8, as TF does)."""
    with _ops.name_scope(name, "adjust_jpeg_quality", [image]):
        image = _ops.convert_to_tensor(image, name="image")
        encoded = encode_jpeg_variable_quality(convert_image_dtype(image, _dtypes.uint8), jpeg_quality)
        return convert_image_dtype(decode_jpeg(encoded), image.dtype.base_dtype)


def random_jpeg_quality(image, min_jpeg_quality, max_jpeg_quality, seed=None):
    """adjust_jpeg_quality by a quality uniform in [min_jpeg_quality, max_jpeg_quality).

    Raises:
        ValueError: a bound outside [0, 100], or min_jpeg_quality >= max_jpeg_quality.
    """
    if not (0 <= min_jpeg_quality <= 100 and 0 <= max_jpeg_quality <= 100):
        raise ValueError("jpeg encoding range must be between 0 and 100.")
    if min_jpeg_quality >= max_jpeg_quality:
        raise ValueError("`min_jpeg_quality` must be less than `max_jpeg_quality`.")
    quality = _random.random_uniform([], min_jpeg_quality, max_jpeg_quality, seed=seed, dtype=_dtypes.int32)
    return adjust_jpeg_quality(image, quality)


def _mix_channels(images, matrix, name):
    """images[..., 3] @ matrix [3, k], keeping the leading shape."""
    images = _ops.convert_to_tensor(images, name="images")
    k = _ops.convert_to_tensor(np.asarray(matrix, np.float64), dtype=images.dtype, name="kernel")
    shape = _array.shape(images)
    flat = _math.matmul(_array.reshape(images, [-1, 3]), k)
    out = _array.reshape(flat, _array.concat([shape[:-1], [int(np.shape(matrix)[1])]], 0), name=name)
    out.set_shape(images.shape[:-1].concatenate([int(np.shape(matrix)[1])]) if images.shape.rank else None)
    return out


_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617], [0.114, -0.32134392, 0.31119955]]
_YIQ_INV = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021], [0.6208248, -0.64720424, 1.70423049]]
_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512], [0.114, 0.43601035, -0.10001026]]


def rgb_to_grayscale(images, name=None):
    """Luma 0.2989 R + 0.5870 G + 0.1140 B of RGB images, last dimension 1, the input dtype."""
    with _ops.name_scope(name, "rgb_to_grayscale", [images]):
        images = _ops.convert_to_tensor(images, name="images")
        orig = images.dtype.base_dtype
        flt = convert_image_dtype(images, _dtypes.float32)
        gray = _mix_channels(flt, [[0.2989], [0.5870], [0.1140]], None)
        return convert_image_dtype(gray, orig)


def grayscale_to_rgb(images, name=None):
    """Repeats the single channel of grayscale images three times.

    Raises:
        ValueError: the last dimension is known and not 1.
    """
    with _ops.name_scope(name, "grayscale_to_rgb", [images]):
        images = _ops.convert_to_tensor(images, name="images")
        last = images.shape.dim_values[-1] if images.shape.rank else None
        if images.shape.rank is not None and (images.shape.rank < 2 or last not in (None, 1)):
            raise ValueError(f"Last dimension of a grayscale image should be size 1, got shape "
                             f"{images.shape}")
        reps = _array.concat([_array.ones_like(_array.shape(images))[:-1], [3]], 0)
        out = _array.tile(images, reps)
        out.set_shape(images.shape[:-1].concatenate([3]) if images.shape.rank else None)
        return out


def rgb_to_yiq(images):
    """RGB to YIQ (Y in [0, 1], I in [-0.5957, 0.5957], Q in [-0.5226, 0.5226])."""
    return _mix_channels(images, _YIQ, "rgb_to_yiq")


def yiq_to_rgb(images):
    """YIQ to RGB (the inverse of rgb_to_yiq)."""
    return _mix_channels(images, _YIQ_INV, "yiq_to_rgb")


def rgb_to_yuv(images):
    """RGB to YUV (Y in [0, 1], U and V in [-0.5, 0.5])."""
    return _mix_channels(images, _YUV, "rgb_to_yuv")


def yuv_to_rgb(images):
    """YUV to RGB (the inverse of rgb_to_yuv)."""
    return _mix_channels(images, np.linalg.inv(np.array(_YUV)), "yuv_to_rgb")


def per_image_standardization(image):
    """(x - mean) / max(stddev, 1 / sqrt(num_pixels)) per image, as float32.

    Raises:
        ValueError: the image has fewer than 3 dimensions.
    """
    with _ops.name_scope(None, "per_image_standardization", [image]):
        image = _ops.convert_to_tensor(image, name="image")
        if image.shape.rank is not None and image.shape.rank < 3:
            raise ValueError(f"'image' (shape {image.shape}) must be at least three-dimensional.")
        if not image.dtype.is_floating:
            image = _math.cast(image, _dtypes.float32)
        axes = [-1, -2, -3]
        n = _math.cast(_math.reduce_prod(_array.shape(image)[-3:]), image.dtype)
        mean = _math.reduce_mean(image, axes, keepdims=True)
        std = _math.sqrt(_math.reduce_mean(_math.square(image - mean), axes, keepdims=True))
        return (image - mean) / _math.maximum(std, _math.rsqrt(n))


def total_variation(images, name=None):
    """Sum of absolute differences of neighbouring pixels: a scalar for 3-D, [batch] for 4-D."""
    with _ops.name_scope(name, "total_variation", [images]):
        images = _image(images, "images")
        if images.shape.rank == 3:
            d1 = images[1:, :, :] - images[:-1, :, :]
            d2 = images[:, 1:, :] - images[:, :-1, :]
            axes = None
        else:
            d1 = images[:, 1:, :, :] - images[:, :-1, :, :]
            d2 = images[:, :, 1:, :] - images[:, :, :-1, :]
            axes = [1, 2, 3]
        return _math.reduce_sum(_math.abs(d1), axes) + _math.reduce_sum(_math.abs(d2), axes)


def psnr(a, b, max_val, name=None):
    """Peak signal-to-noise ratio 20 log10(max_val) - 10 log10(mse) over the last 3 dimensions."""
    with _ops.name_scope(name, "PSNR", [a, b]):
        a, b = _ops.convert_to_tensor(a), _ops.convert_to_tensor(b)
        max_val = convert_image_dtype(_math.cast(max_val, a.dtype), _dtypes.float32)
        a, b = convert_image_dtype(a, _dtypes.float32), convert_image_dtype(b, _dtypes.float32)
        mse = _math.reduce_mean(_math.squared_difference(a, b), [-3, -2, -1])
        return _math.subtract(20 * _math.log(max_val) / np.log(10.0),
                              np.float32(10 / np.log(10)) * _math.log(mse), name="psnr")


def is_jpeg(contents, name=None):
    """A bool scalar: whether the encoded image `contents` starts with the JPEG marker (TF1's
    tf.image.is_jpeg; like TF, it looks at the first three bytes only)."""
    from kernflow.core import strings as _strings
    from kernflow.core.ops import math_ops as _math
    with _ops.name_scope(name, "is_jpeg", [contents]):
        return _math.equal(_strings.substr(contents, 0, 3), b"\xff\xd8\xff", name=name)


from kernflow.core.image_ssim import ssim, ssim_multiscale  # noqa: E402 - needs convert_image_dtype

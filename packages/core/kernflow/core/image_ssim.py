"""Structural similarity for `kf.image`: ssim and ssim_multiscale (TF1's tf.image.ssim, ssim_multiscale).

Both are composites of existing ops (a per-channel Gaussian convolution, average pooling), so they
run on any device and differentiate through those ops.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.image import convert_image_dtype
from kernflow.core.ops import array_ops as _array
from kernflow.core.ops import math_ops as _math

__all__ = ["ssim", "ssim_multiscale"]

_MS_SSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def _gaussian(size, sigma):
    c = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = np.exp(-(c[:, None] ** 2 + c[None, :] ** 2) / (2 * sigma ** 2))
    return (g / g.sum()).astype(np.float32).reshape(size, size, 1, 1)


def _filter(x, kernel):
    """Per-channel VALID convolution of [..., h, w, c] with a [k, k, 1, 1] kernel."""
    from kernflow.core import nn
    shape = _array.shape(x)
    x4 = _array.reshape(x, _array.concat([[-1], shape[-3:]], 0))
    xc = _array.transpose(x4, [0, 3, 1, 2])
    s = _array.shape(xc)
    y = nn.conv2d(_array.reshape(xc, _array.stack([-1, s[2], s[3], 1])), kernel, [1, 1, 1, 1], "VALID")
    ys = _array.shape(y)
    y = _array.transpose(_array.reshape(y, _array.stack([s[0], s[1], ys[1], ys[2]])), [0, 2, 3, 1])
    return _array.reshape(y, _array.concat([shape[:-3], _array.shape(y)[1:]], 0))


def _as_float(img1, img2, max_val):
    """The images and max_val as float32 scaled as convert_image_dtype scales them."""
    img1, img2 = _ops.convert_to_tensor(img1, name="img1"), _ops.convert_to_tensor(img2, name="img2")
    max_val = convert_image_dtype(_math.cast(max_val, img1.dtype), _dtypes.float32)
    return convert_image_dtype(img1, _dtypes.float32), convert_image_dtype(img2, _dtypes.float32), max_val


def _ssim_maps(img1, img2, max_val, filter_size, filter_sigma, k1, k2, fn="ssim"):
    """The SSIM map (luminance * contrast-structure) and the contrast-structure map [..., h', w', c]."""
    small = [d for d in img1.shape.dim_values[-3:-1] if d is not None and d < filter_size] \
        if img1.shape.rank else []
    if small:
        raise ValueError(f"{fn}: the images ({img1.shape}) must be at least filter_size = {filter_size} "
                         f"high and wide")
    kernel = _gaussian(filter_size, filter_sigma)
    c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
    m1, m2 = _filter(img1, kernel), _filter(img2, kernel)
    num0, den0 = m1 * m2 * 2.0, _math.square(m1) + _math.square(m2)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = _filter(img1 * img2, kernel) * 2.0
    den1 = _filter(_math.square(img1) + _math.square(img2), kernel)
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    return luminance * cs, cs


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03, return_index_map=False):
    """Structural similarity of two images (batches) over the last three dimensions [h, w, c].

    A Gaussian window (filter_size, filter_sigma) gives the local means and variances; the
    result is averaged over the valid window positions and the channels (with
    return_index_map, the per-position map averaged over channels).
    """
    with _ops.name_scope(None, "SSIM", [img1, img2]):
        img1, img2, max_val = _as_float(img1, img2, max_val)
        ssim_map, _ = _ssim_maps(img1, img2, max_val, filter_size, filter_sigma, k1, k2)
        if return_index_map:
            return _math.reduce_mean(ssim_map, [-1])
        return _math.reduce_mean(_math.reduce_mean(ssim_map, [-3, -2]), [-1])


def _halve(img):
    """2x2 average pooling of [..., h, w, c], an odd h or w first padded by repeating its last row or
    column (TF's SYMMETRIC padding to even)."""
    from kernflow.core import nn
    shape = _array.shape(img)
    rem = _math.floormod(shape[-3:-1], 2)
    paddings = _array.stack([[0, 0], _array.stack([0, rem[0]]), _array.stack([0, rem[1]]), [0, 0]])
    x4 = _array.reshape(img, _array.concat([[-1], shape[-3:]], 0))
    y = nn.avg_pool(_array.pad(x4, paddings, mode="SYMMETRIC"), [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    out = _array.reshape(y, _array.concat([shape[:-3], _array.shape(y)[1:]], 0))
    static = list(img.shape.dim_values) if img.shape.rank else None
    if static:
        halved = [None if d is None else (d + 1) // 2 for d in static[-3:-1]]
        out.set_shape(static[:-3] + halved + static[-1:])
    return out


def ssim_multiscale(img1, img2, max_val, power_factors=_MS_SSIM_WEIGHTS, filter_size=11, filter_sigma=1.5,
                    k1=0.01, k2=0.03):
    """Multi-scale structural similarity (Wang, Simoncelli and Bovik 2003) of two images (batches).

    At scale 0 the images are compared as given; each further scale halves them by 2x2 average
    pooling (an odd height or width first padded by repeating its last row or column). The
    result is the product over scales of the channel-wise contrast-structure term (the SSIM at the
    last scale), each clipped at 0 and raised to its power factor, averaged over the channels.

    Args:
        img1, img2: images [..., height, width, channels] of the same shape and dtype (converted to
            float32 as `convert_image_dtype` does); the last scale must still be filter_size wide.
        max_val: the dynamic range of the images (1.0 for floats in [0, 1], 255 for uint8).
        power_factors: one weight per scale (default: the paper's five).
        filter_size, filter_sigma: the Gaussian window.
        k1, k2: the SSIM stability constants.

    Returns:
        float32 Tensor of the images' batch shape ([...]).

    Raises:
        ValueError: the images are statically too small for the number of scales.
    """
    with _ops.name_scope(None, "MS-SSIM", [img1, img2]):
        img1, img2, max_val = _as_float(img1, img2, max_val)
        factors = _ops.convert_to_tensor(power_factors, dtype=_dtypes.float32, name="power_factors")
        terms = []
        for scale in range(len(power_factors)):
            if scale:
                img1, img2 = _halve(img1), _halve(img2)
            ssim_map, cs = _ssim_maps(img1, img2, max_val, filter_size, filter_sigma, k1, k2,
                                      "ssim_multiscale")
            terms.append(_math.reduce_mean(cs, [-3, -2]))
        terms[-1] = _math.reduce_mean(ssim_map, [-3, -2])
        from kernflow.core import nn
        stacked = nn.relu(_array.stack(terms, axis=-1))
        return _math.reduce_mean(_math.reduce_prod(_math.pow(stacked, factors), [-1]), [-1])

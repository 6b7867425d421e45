"""Numpy kernels of the image ops (kernflow.core.ops.image_ops); the codecs use Pillow.

Every resize is separable: one weight matrix per axis ([out, in], from TF's sampling rules in
float32 coordinates) is applied to the rows, then the columns, so a resize and its gradient are
the same two matmuls, the gradient with the matrices transposed. Crop-and-resize builds the same
matrices per box.
"""

from __future__ import annotations

import heapq

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"
_F32 = np.float32


def _invalid(ctx, msg: str):
    return errors.InvalidArgumentError(None, None, f"{ctx.op_type} node {ctx.name}: {msg}")


def _round_away(x):
    """C roundf: halves away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + _F32(0.5))


# ---------------------------------------------------------------------------- sampling matrices
def _scale(in_size, out_size, align):
    if align and out_size > 1:
        return _F32(in_size - 1) / _F32(out_size - 1)
    return _F32(in_size) / _F32(out_size)


def _coords(in_size, out_size, align, half, nearest=False):
    s, o = _scale(in_size, out_size, align), np.arange(out_size, dtype=_F32)
    if not half:
        return o * s
    return (o + _F32(0.5)) * s - (_F32(0) if nearest else _F32(0.5))


def _matrix(rows, cols, weights, out_size, in_size):
    w = np.zeros((out_size, in_size))
    for c, v in zip(cols, weights):
        np.add.at(w, (rows, c), v)
    return w


def _bilinear_w(in_size, out_size, align, half):
    x = _coords(in_size, out_size, align, half)
    f = np.floor(x)
    lo = np.clip(f, 0, in_size - 1).astype(np.int64)
    hi = np.clip(np.ceil(x), 0, in_size - 1).astype(np.int64)
    lerp = (x - f).astype(np.float64)
    return _matrix(np.arange(out_size), [lo, hi], [1 - lerp, lerp], out_size, in_size)


def _nearest_idx(in_size, out_size, align, half):
    x = _coords(in_size, out_size, align, half, nearest=True)
    idx = np.minimum(_round_away(x) if align else np.floor(x), in_size - 1).astype(np.int64)
    return np.maximum(idx, 0) if half else idx


def _one_hot(idx, in_size):
    w = np.zeros((idx.size, in_size))
    w[np.arange(idx.size), idx] = 1
    return w


_TABLE = 1024


def _cubic_tables(a):
    x = np.arange(_TABLE + 1, dtype=np.float64) / _TABLE
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + 1
    far = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return near.astype(_F32), far.astype(_F32)


_KEYS = {False: _cubic_tables(-0.75), True: _cubic_tables(-0.5)}


def _bicubic_w(in_size, out_size, align, half):
    x = _coords(in_size, out_size, align, half)
    f = np.floor(x)
    off = np.rint((x - f) * _TABLE).astype(np.int64)
    near, far = _KEYS[half]
    base = f.astype(np.int64)
    taps = [base - 1, base, base + 1, base + 2]
    ws = [far[off], near[off], near[_TABLE - off], far[_TABLE - off]]
    idx = [np.clip(t, 0, in_size - 1) for t in taps]
    ws = [w.astype(np.float64) for w in ws]
    if half:  # samples outside the image are dropped and the rest renormalised
        ws = [np.where(i == t, w, 0.0) for i, t, w in zip(idx, taps, ws)]
        total = sum(ws)
        ws = [np.where(np.abs(total) > 0, w / np.where(total == 0, 1, total), w) for w in ws]
    return _matrix(np.arange(out_size), idx, ws, out_size, in_size)


def _area_w(in_size, out_size, align):
    s = _scale(in_size, out_size, align)
    w = np.zeros((out_size, in_size))
    for o in range(out_size):
        lo, hi = _F32(o) * s, _F32(o + 1) * s
        for i in range(int(np.floor(lo)), int(np.ceil(hi))):
            w[o, min(i, in_size - 1)] += min(i + 1, hi) - max(i, lo)
    return w / float(s)


def _separable(x, wy, wx):
    """out[b, y, x, c] = sum_ij wy[y, i] x[b, i, j, c] wx[x, j]."""
    b, h, w, c = x.shape
    t = np.matmul(wy, x.reshape(b, h, w * c)).reshape(b, wy.shape[0], w, c)
    return np.matmul(wx, t)


# ---------------------------------------------------------------------------- resize kernels
def _resize_args(ctx, images, size):
    x, size = np.asarray(images), np.asarray(size)
    if x.ndim != 4:
        raise _invalid(ctx, f"input must be 4-dimensional [batch, height, width, channels], got shape "
                            f"{list(x.shape)}")
    if size.shape != (2,):
        raise _invalid(ctx, f"shape_t must be 1-dimensional with 2 elements, got shape {list(size.shape)}")
    oh, ow = int(size[0]), int(size[1])
    if oh <= 0 or ow <= 0:
        raise _invalid(ctx, f"output dimensions must be positive, got {[oh, ow]}")
    if x.shape[1] == 0 or x.shape[2] == 0:
        raise _invalid(ctx, f"input image must be of non-zero size, got shape {list(x.shape)}")
    return x, oh, ow


def _flags(ctx):
    align, half = ctx.get_attr("align_corners"), _attr(ctx, "half_pixel_centers", False)
    if align and half:
        raise _invalid(ctx, "If half_pixel_centers is True, align_corners must be False.")
    return align, half


def _attr(ctx, name, default):
    try:
        return ctx.get_attr(name)
    except (KeyError, ValueError, errors.InvalidArgumentError):
        return default


def _weights_fn(kind):
    return {"ResizeBilinear": _bilinear_w, "ResizeBicubic": _bicubic_w}[kind]


def _resize_factory(kind):
    def factory(ctx):
        def compute(images, size):
            align, half = (ctx.get_attr("align_corners"), False) if kind == "ResizeArea" else _flags(ctx)
            x, oh, ow = _resize_args(ctx, images, size)
            if kind == "ResizeArea":
                wy, wx = _area_w(x.shape[1], oh, align), _area_w(x.shape[2], ow, align)
            else:
                fn = _weights_fn(kind)
                wy, wx = fn(x.shape[1], oh, align, half), fn(x.shape[2], ow, align, half)
            return _separable(x.astype(np.float64), wy, wx).astype(_F32)
        return compute
    return factory


def _resize_grad_factory(kind):
    def factory(ctx):
        npdt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)

        def compute(grads, original_image):
            align, half = _flags(ctx)
            g, x = np.asarray(grads), np.asarray(original_image)
            if g.ndim != 4 or x.ndim != 4 or g.shape[0] != x.shape[0] or g.shape[3] != x.shape[3]:
                raise _invalid(ctx, f"grads {list(g.shape)} and original_image {list(x.shape)} must be "
                                    f"4-D with the same batch and channel sizes")
            fn = _weights_fn(kind.replace("Grad", ""))
            wy, wx = fn(x.shape[1], g.shape[1], align, half), fn(x.shape[2], g.shape[2], align, half)
            return _separable(g.astype(np.float64), wy.T, wx.T).astype(npdt)
        return compute
    return factory


def _resize_nearest(ctx):
    def compute(images, size):
        align, half = _flags(ctx)
        x, oh, ow = _resize_args(ctx, images, size)
        iy = _nearest_idx(x.shape[1], oh, align, half)
        ix = _nearest_idx(x.shape[2], ow, align, half)
        return x[:, iy][:, :, ix]
    return compute


def _resize_nearest_grad(ctx):
    def compute(grads, size):
        align, half = _flags(ctx)
        g, size = np.asarray(grads), np.asarray(size)
        if g.ndim != 4 or size.shape != (2,):
            raise _invalid(ctx, f"grads must be 4-D and size a vector of 2, got shapes {list(g.shape)} "
                                f"and {list(size.shape)}")
        h, w = int(size[0]), int(size[1])
        wy = _one_hot(_nearest_idx(h, g.shape[1], align, half), h)
        wx = _one_hot(_nearest_idx(w, g.shape[2], align, half), w)
        acc = np.int64 if g.dtype.kind in "iu" else np.float64
        return _separable(g.astype(acc), wy.T.astype(acc), wx.T.astype(acc)).astype(g.dtype)
    return compute


# ---------------------------------------------------------------------------- colour
def _rgb_to_hsv(x):
    x = x.astype(np.float64)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    v, mn = x.max(-1), x.min(-1)
    rng = v - mn
    s = np.where(v > 0, rng / np.where(v > 0, v, 1), 0.0)
    norm = 1.0 / (6.0 * np.where(rng > 0, rng, 1))
    h = np.where(r == v, norm * (g - b), np.where(g == v, norm * (b - r) + 2 / 6, norm * (r - g) + 4 / 6))
    h = np.where(rng > 0, h, 0.0)
    h = np.where(h < 0, h + 1, h)
    return np.stack([h, s, v], -1)


def _hsv_to_rgb(x):
    x = x.astype(np.float64)
    h, s, v = x[..., 0], x[..., 1], x[..., 2]
    c = s * v
    m = v - c
    dh = h * 6
    cat = np.floor(dh).astype(np.int64)
    xx = c * (1 - np.abs(np.fmod(dh, 2) - 1))
    z = np.zeros_like(c)
    table = [(c, xx, z), (xx, c, z), (z, c, xx), (z, xx, c), (xx, z, c), (c, z, xx)]
    out = [np.select([cat == k for k in range(6)], [t[i] for t in table], 0.0) + m for i in range(3)]
    return np.stack(out, -1)


def _check_rgb(ctx, x):
    x = np.asarray(x)
    if x.ndim < 1 or x.shape[-1] != 3:
        raise _invalid(ctx, f"input must have 3 channels (the last dimension), got shape {list(x.shape)}")
    return x


def _color_factory(fn):
    def factory(ctx):
        def compute(images, *scalars):
            x = _check_rgb(ctx, images)
            return fn(x, *[float(s) for s in scalars]).astype(x.dtype)
        return compute
    return factory


def _adjust_hue(x, delta):
    hsv = _rgb_to_hsv(x)
    hsv[..., 0] = np.mod(hsv[..., 0] + delta, 1.0)
    return _hsv_to_rgb(hsv)


def _adjust_saturation(x, scale):
    hsv = _rgb_to_hsv(x)
    hsv[..., 1] = np.clip(hsv[..., 1] * scale, 0.0, 1.0)
    return _hsv_to_rgb(hsv)


def _rgb_to_hsv_grad(ctx):
    def compute(images, grads):
        x = _check_rgb(ctx, images).astype(np.float64)
        g = np.asarray(grads, np.float64)
        imax, imin = x.argmax(-1), x.argmin(-1)
        eye = np.eye(3)
        dmax, dmin = eye[imax], eye[imin]
        v, mn = x.max(-1, keepdims=True), x.min(-1, keepdims=True)
        rng = v - mn
        dv = dmax
        safe_v = np.where(v > 0, v, 1)
        ds = np.where(v > 0, dmin * (-1 / safe_v) + dmax * (mn / safe_v ** 2), 0.0)
        # h = num / (6 range) (+ a constant) with num = g - b, b - r or r - g as r, g or b is the max.
        nums = np.array([[0, 1, -1], [-1, 0, 1], [1, -1, 0]], np.float64)[imax]
        num = (nums * x).sum(-1, keepdims=True)
        safe_r = np.where(rng > 0, rng, 1)
        dh = np.where(rng > 0, (nums * safe_r - num * (dmax - dmin)) / (6 * safe_r ** 2), 0.0)
        out = dh * g[..., :1] + ds * g[..., 1:2] + dv * g[..., 2:3]
        return out.astype(np.asarray(images).dtype)
    return compute


def _adjust_contrast(ctx):
    def compute(images, contrast_factor):
        x = np.asarray(images)
        if x.ndim < 3:
            raise _invalid(ctx, f"input must be at least 3-D [..., height, width, channels], got shape "
                                f"{list(x.shape)}")
        f = np.asarray(contrast_factor)
        if f.ndim != 0:
            raise _invalid(ctx, f"contrast_factor must be scalar, got shape {list(f.shape)}")
        xf = x.astype(_F32)
        mean = xf.mean(axis=(-3, -2), keepdims=True, dtype=np.float64).astype(_F32)
        return ((xf - mean) * _F32(f) + mean).astype(x.dtype)
    return compute


# ---------------------------------------------------------------------------- crop and resize
def _crop_axis(v1, v2, in_size, out_size, nearest):
    """Sampling matrix [out, in] of one box axis, its derivative w.r.t. the coordinate, and the
    coordinate's derivatives w.r.t. (v1, v2); rows sampling outside the image are zero."""
    o = np.arange(out_size, dtype=_F32)
    if out_size > 1:
        scale = (_F32(v2) - _F32(v1)) * _F32(in_size - 1) / _F32(out_size - 1)
        x = _F32(v1) * _F32(in_size - 1) + o * scale
        d1 = (in_size - 1) * (1 - o.astype(np.float64) / (out_size - 1))
        d2 = (in_size - 1) * o.astype(np.float64) / (out_size - 1)
    else:
        x = np.full(out_size, _F32(0.5) * (_F32(v1) + _F32(v2)) * _F32(in_size - 1), _F32)
        d1 = d2 = np.full(out_size, 0.5 * (in_size - 1))
    valid = (x >= 0) & (x <= in_size - 1)
    xc = np.clip(x, 0, in_size - 1)
    rows = np.arange(out_size)
    if nearest:
        w = _one_hot(_round_away(xc).astype(np.int64), in_size)
        dw = np.zeros_like(w)
    else:
        lo, hi = np.floor(xc).astype(np.int64), np.ceil(xc).astype(np.int64)
        lerp = (xc - np.floor(xc)).astype(np.float64)
        w = _matrix(rows, [lo, hi], [1 - lerp, lerp], out_size, in_size)
        dw = _matrix(rows, [lo, hi], [-np.ones(out_size), np.ones(out_size)], out_size, in_size)
    w[~valid], dw[~valid] = 0, 0
    return w, dw, valid, d1, d2


def _crop_boxes(ctx, boxes, box_ind, batch):
    boxes, box_ind = np.asarray(boxes), np.asarray(box_ind)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise _invalid(ctx, f"boxes must be 2-D [num_boxes, 4], got shape {list(boxes.shape)}")
    if box_ind.shape != (boxes.shape[0],):
        raise _invalid(ctx, f"box_index has shape {list(box_ind.shape)}, expected [{boxes.shape[0]}] "
                            f"(one per box)")
    bad = (box_ind < 0) | (box_ind >= batch)
    if bad.any():
        raise _invalid(ctx, f"box_index has values outside [0, batch_size): box_index[{int(np.argmax(bad))}]"
                            f" = {int(box_ind[np.argmax(bad)])}, batch_size {batch}")
    return boxes, box_ind


def _crop_and_resize(ctx):
    nearest = ctx.get_attr("method") == "nearest"
    extrap = ctx.get_attr("extrapolation_value")

    def compute(image, boxes, box_ind, crop_size):
        x = np.asarray(image)
        if x.ndim != 4:
            raise _invalid(ctx, f"input image must be 4-D, got shape {list(x.shape)}")
        cs = np.asarray(crop_size)
        if cs.shape != (2,) or (cs <= 0).any():
            raise _invalid(ctx, f"crop_size must be a vector of 2 positive sizes, got {cs.tolist()}")
        boxes, box_ind = _crop_boxes(ctx, boxes, box_ind, x.shape[0])
        ch, cw = int(cs[0]), int(cs[1])
        out = np.empty((boxes.shape[0], ch, cw, x.shape[3]), _F32)
        for n, (y1, x1, y2, x2) in enumerate(boxes):
            wy, _, vy, _, _ = _crop_axis(y1, y2, x.shape[1], ch, nearest)
            wx, _, vx, _, _ = _crop_axis(x1, x2, x.shape[2], cw, nearest)
            crop = _separable(x[box_ind[n]:box_ind[n] + 1].astype(np.float64), wy, wx)[0]
            crop[~(vy[:, None] & vx[None, :])] = extrap
            out[n] = crop
        return out
    return compute


def _crop_grad_image(ctx):
    nearest = ctx.get_attr("method") == "nearest"
    npdt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)

    def compute(grads, boxes, box_ind, image_size):
        size = [int(s) for s in np.asarray(image_size)]
        g = np.asarray(grads, np.float64)
        if len(size) != 4 or g.ndim != 4 or g.shape[3] != size[3]:
            raise _invalid(ctx, f"image_size must be [batch, height, width, depth] with the grads' "
                                f"depth, got {size} for grads {list(g.shape)}")
        boxes, box_ind = _crop_boxes(ctx, boxes, box_ind, size[0])
        out = np.zeros(size)
        for n, (y1, x1, y2, x2) in enumerate(boxes):
            wy = _crop_axis(y1, y2, size[1], g.shape[1], nearest)[0]
            wx = _crop_axis(x1, x2, size[2], g.shape[2], nearest)[0]
            out[box_ind[n]] += _separable(g[n:n + 1], wy.T, wx.T)[0]
        return out.astype(npdt)
    return compute


def _crop_grad_boxes(ctx):
    def compute(grads, image, boxes, box_ind):
        g, x = np.asarray(grads, np.float64), np.asarray(image).astype(np.float64)
        boxes, box_ind = _crop_boxes(ctx, boxes, box_ind, x.shape[0])
        out = np.zeros((boxes.shape[0], 4))
        for n, (y1, x1, y2, x2) in enumerate(boxes):
            wy, dwy, _, dy1, dy2 = _crop_axis(y1, y2, x.shape[1], g.shape[1], False)
            wx, dwx, _, dx1, dx2 = _crop_axis(x1, x2, x.shape[2], g.shape[2], False)
            img = x[box_ind[n]:box_ind[n] + 1]
            gy = (_separable(img, dwy, wx)[0] * g[n]).sum(axis=(1, 2))
            gx = (_separable(img, wy, dwx)[0] * g[n]).sum(axis=(0, 2))
            out[n] = [gy @ dy1, gx @ dx1, gy @ dy2, gx @ dx2]
        return out.astype(_F32)
    return compute


# ---------------------------------------------------------------------------- boxes
def _iou(boxes, i, others):
    b = boxes.astype(np.float64)
    ymin, ymax = np.minimum(b[:, 0], b[:, 2]), np.maximum(b[:, 0], b[:, 2])
    xmin, xmax = np.minimum(b[:, 1], b[:, 3]), np.maximum(b[:, 1], b[:, 3])
    area = (ymax - ymin) * (xmax - xmin)
    ih = np.maximum(np.minimum(ymax[i], ymax[others]) - np.maximum(ymin[i], ymin[others]), 0)
    iw = np.maximum(np.minimum(xmax[i], xmax[others]) - np.maximum(xmin[i], xmin[others]), 0)
    inter = ih * iw
    union = area[i] + area[others] - inter
    ok = (area[i] > 0) & (area[others] > 0)
    return np.where(ok, inter / np.where(union > 0, union, 1), 0.0)


def _nms(ctx, boxes, scores, max_out, iou_thr, score_thr, sigma=0.0):
    boxes, scores = np.asarray(boxes), np.asarray(scores)
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise _invalid(ctx, f"boxes must be 2-D [num_boxes, 4], got shape {list(boxes.shape)}")
    if scores.shape != (boxes.shape[0],):
        raise _invalid(ctx, f"scores must be 1-D [{boxes.shape[0]}] (one per box), got shape "
                            f"{list(scores.shape)}")
    if not 0 <= float(iou_thr) <= 1:
        raise _invalid(ctx, f"iou_threshold must be in [0, 1], got {float(iou_thr)}")
    return greedy_nms(ctx, lambda i, others: _iou(boxes, i, others), scores, max_out, iou_thr,
                      score_thr, sigma)


def greedy_nms(ctx, overlap, scores, max_out, thr, score_thr, sigma=0.0):
    """Greedy (or, with sigma > 0, soft) non-max suppression by descending score.

    Args:
        ctx: the kernel's context (for errors).
        overlap: fn(i, others) -> the overlaps of box i with the boxes `others` (an int64 array).
        scores: [n] array; boxes scoring at most score_thr are never selected.
        max_out, thr, score_thr, sigma: as the NonMaxSuppression ops take them.

    Returns:
        (selected indices int32, their (decayed) scores in the dtype of scores).
    """
    max_out, thr, score_thr = int(max_out), float(thr), float(score_thr)
    if max_out < 0:
        raise _invalid(ctx, f"max_output_size must be non-negative, got {max_out}")
    scale = -0.5 / sigma if sigma > 0 else 0.0
    # (negated score, index, how many selected boxes it has been checked against)
    heap = [(-float(s), i, 0) for i, s in enumerate(scores.astype(np.float64)) if s > score_thr]
    heapq.heapify(heap)
    sel, sel_scores = [], []
    while heap and len(sel) < max_out:
        neg, i, begin = heapq.heappop(heap)
        score = orig = -neg
        ious = overlap(i, np.array(sel[begin:], np.int64))[::-1] if len(sel) > begin else []
        if any(iou > thr for iou in ious):
            continue   # hard suppression
        for iou in ious:
            score *= np.exp(scale * iou * iou)
            if score <= score_thr:
                break
        if score == orig:
            sel.append(i)
            sel_scores.append(score)
        elif score > score_thr:
            heapq.heappush(heap, (-score, i, len(sel)))
    return np.array(sel, np.int32), np.array(sel_scores, scores.dtype)


def _pad(a, n):
    return np.concatenate([a, np.zeros(max(n - a.size, 0), a.dtype)])


def _nms_factory(version):
    def factory(ctx):
        pad = version > 3 and ctx.get_attr("pad_to_max_output_size")

        def compute(boxes, scores, max_output_size, iou_threshold, score_threshold, sigma=0.0):
            if float(sigma) < 0:
                raise _invalid(ctx, f"soft_nms_sigma must be non-negative, got {float(sigma)}")
            idx, sc = _nms(ctx, boxes, scores, max_output_size, iou_threshold, score_threshold,
                           float(sigma))
            n = np.int32(idx.size)
            if pad:
                idx, sc = _pad(idx, int(max_output_size)), _pad(sc, int(max_output_size))
            return {3: idx, 4: [idx, n], 5: [idx, sc, n]}[version]
        return compute
    return factory


_DEFAULT_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1],
                            [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1]])


def _draw_boxes(ctx):
    def compute(images, boxes, colors):
        x, boxes, colors = np.array(images), np.asarray(boxes), np.asarray(colors)
        if x.ndim != 4 or x.shape[3] < 1:
            raise _invalid(ctx, f"images must be 4-D [batch, height, width, depth], got {list(x.shape)}")
        if boxes.ndim != 3 or boxes.shape[0] != x.shape[0] or boxes.shape[2] != 4:
            raise _invalid(ctx, f"boxes must be [batch, num_boxes, 4] with the images' batch, got "
                                f"{list(boxes.shape)}")
        table = colors if colors.size else _DEFAULT_COLORS
        if table.ndim != 2 or table.shape[1] < x.shape[3]:
            raise _invalid(ctx, f"colors must be [num_colors, >= depth], got {list(table.shape)}")
        h, w = x.shape[1:3]
        for b in range(x.shape[0]):
            for i, (y1, x1, y2, x2) in enumerate(boxes[b]):
                color = table[i % len(table), :x.shape[3]]
                _draw_one(x[b], color, int(np.floor(y1 * (h - 1))), int(np.floor(x1 * (w - 1))),
                          int(np.floor(y2 * (h - 1))), int(np.floor(x2 * (w - 1))))
        return x
    return compute


def _draw_one(img, color, top, left, bottom, right):
    h, w = img.shape[:2]
    if top > bottom or left > right or top >= h or left >= w or bottom < 0 or right < 0:
        return
    r0, r1, c0, c1 = max(top, 0), min(bottom, h - 1), max(left, 0), min(right, w - 1)
    for row in (top, bottom):
        if 0 <= row < h:
            img[row, c0:c1 + 1] = color
    for col in (left, right):
        if 0 <= col < w:
            img[r0:r1 + 1, col] = color


# ---------------------------------------------------------------------------- codecs (Pillow)
_MAGIC = ((b"\xff\xd8\xff", "jpeg"), (b"\x89PNG\r\n\x1a\n", "png"), (b"GIF8", "gif"), (b"BM", "bmp"))
_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
_CHANNELS = {"png": (0, 1, 2, 3, 4), "jpeg": (0, 1, 3), "gif": (0, 3), "bmp": (0, 1, 3, 4)}


def _bytes(ctx, contents):
    arr = np.asarray(contents, dtype=object)
    if arr.ndim != 0:
        raise _invalid(ctx, f"contents must be scalar, got shape {list(arr.shape)}")
    v = arr.item()
    return v if isinstance(v, bytes) else str(v).encode()


def _format(data):
    return next((f for m, f in _MAGIC if data.startswith(m)), None)


def _open(ctx, data, fmt):
    import io

    from PIL import Image
    found = _format(data)
    if fmt is not None and found != fmt:
        raise _invalid(ctx, f"Invalid {fmt.upper()} data, size {len(data)} (the contents start with "
                            f"{data[:8]!r})")
    if found is None:
        raise _invalid(ctx, "Unknown image file format. One of JPEG, PNG, GIF, BMP required.")
    try:
        img = Image.open(io.BytesIO(data))
        img.format_name = found
        return img
    except Exception as e:  # noqa: BLE001 - Pillow raises many kinds; all mean bad data
        raise _invalid(ctx, f"could not decode the {found.upper()} data: {e}") from None


def _to_array(img, channels):
    """The decoded image as [h, w, c] (c as stored when channels is 0), uint8 or uint16; and
    whether it is 16-bit."""
    mode = img.mode
    if mode in ("I;16", "I;16B", "I"):
        arr = np.asarray(img, np.uint16)[..., None]
        return arr if channels in (0, 1) else np.repeat(arr, channels, -1), True
    if mode == "P":
        mode = "RGBA" if "transparency" in img.info else "RGB"
    elif mode not in _MODES.values():
        mode = "RGB" if mode in ("CMYK", "YCbCr", "RGBX") else "L"
    target = _MODES[channels] if channels else mode
    arr = np.asarray(img.convert(target), np.uint8)
    return (arr[..., None] if arr.ndim == 2 else arr), False


def _decode_one(ctx, data, fmt, channels, expand):
    img = _open(ctx, data, fmt)
    kind = img.format_name
    if channels not in _CHANNELS[kind]:
        raise _invalid(ctx, f"channels must be one of {list(_CHANNELS[kind])} for {kind.upper()}, got "
                            f"{channels}")
    if kind == "gif":
        frames = []
        for k in range(getattr(img, "n_frames", 1) if expand else 1):
            img.seek(k)
            frames.append(np.asarray(img.convert("RGB"), np.uint8))
        return (np.stack(frames) if expand else frames[0]), False
    if kind == "jpeg":
        ratio = _attr(ctx, "ratio", 1)
        if ratio not in (1, 2, 4, 8):
            raise _invalid(ctx, f"ratio must be 1, 2, 4 or 8, got {ratio}")
        w, h = img.size
        img.draft("L" if channels == 1 else "RGB", (-(-w // ratio), -(-h // ratio)))
    return _to_array(img, channels)


def _decode_factory(fmt):
    def factory(ctx):
        channels = _attr(ctx, "channels", 0)
        out_dt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        expand = fmt == "gif" or (fmt is None and ctx.get_attr("expand_animations"))

        def compute(contents):
            arr, is16 = _decode_one(ctx, _bytes(ctx, contents), fmt, channels, expand)
            if out_dt == np.uint8:
                return (arr >> 8).astype(np.uint8) if is16 else arr
            wide = arr.astype(np.uint16) if is16 else arr.astype(np.uint16) * np.uint16(257)
            return wide if out_dt == np.uint16 else (wide / _F32(65535)).astype(_F32)
        return compute
    return factory


def _encode(img, fmt, **kw):
    import io
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return np.array(buf.getvalue(), dtype=object)


def _image_arg(ctx, image, allowed):
    x = np.asarray(image)
    if x.ndim != 3 or x.shape[2] not in allowed:
        raise _invalid(ctx, f"image must be 3-D [height, width, channels] with channels in {list(allowed)}, "
                            f"got shape {list(x.shape)}")
    return x


def _encode_png(ctx):
    level = ctx.get_attr("compression")

    def compute(image):
        from PIL import Image
        x = _image_arg(ctx, image, (1, 2, 3, 4))
        if x.dtype == np.uint16:
            if x.shape[2] != 1:
                raise errors.UnimplementedError(None, None, f"EncodePng node {ctx.name}: uint16 images "
                                                f"with {x.shape[2]} channels (only 1)")
            img = Image.fromarray(x[..., 0].astype("<u2"), "I;16")
        else:
            img = Image.fromarray(x[..., 0] if x.shape[2] == 1 else x, _MODES[x.shape[2]])
        return _encode(img, "PNG", compress_level=6 if level < 0 else min(level, 9))
    return compute


def _encode_jpeg(ctx):
    fmt, quality = ctx.get_attr("format"), ctx.get_attr("quality")
    dpi = (ctx.get_attr("x_density"), ctx.get_attr("y_density"))
    if ctx.get_attr("density_unit") == "cm":
        dpi = (round(dpi[0] * 2.54), round(dpi[1] * 2.54))

    def compute(image):
        from PIL import Image
        want = {"": (1, 3), "grayscale": (1,), "rgb": (3,)}[fmt]
        x = _image_arg(ctx, image, want)
        img = Image.fromarray(x[..., 0] if x.shape[2] == 1 else x, _MODES[x.shape[2]])
        kw = {"quality": max(min(quality, 100), 1), "progressive": ctx.get_attr("progressive"),
              "optimize": ctx.get_attr("optimize_size"), "dpi": dpi,
              "subsampling": 2 if ctx.get_attr("chroma_downsampling") else 0}
        if ctx.get_attr("xmp_metadata"):
            kw["xmp"] = ctx.get_attr("xmp_metadata").encode()
        return _encode(img, "JPEG", **kw)
    return compute


def _jpeg_shape(ctx):
    out_dt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)

    def compute(contents):
        img = _open(ctx, _bytes(ctx, contents), "jpeg")
        c = {"L": 1, "CMYK": 4}.get(img.mode, 3)
        return np.array([img.size[1], img.size[0], c], out_dt)
    return compute


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    table = {"ResizeBilinear": _resize_factory("ResizeBilinear"),
             "ResizeBicubic": _resize_factory("ResizeBicubic"),
             "ResizeArea": _resize_factory("ResizeArea"),
             "ResizeBilinearGrad": _resize_grad_factory("ResizeBilinearGrad"),
             "ResizeBicubicGrad": _resize_grad_factory("ResizeBicubicGrad"),
             "ResizeNearestNeighbor": _resize_nearest, "ResizeNearestNeighborGrad": _resize_nearest_grad,
             "RGBToHSV": _color_factory(_rgb_to_hsv), "HSVToRGB": _color_factory(_hsv_to_rgb),
             "AdjustHue": _color_factory(_adjust_hue), "AdjustSaturation": _color_factory(_adjust_saturation),
             "AdjustContrastv2": _adjust_contrast, "RGBToHSVGrad": _rgb_to_hsv_grad,
             "CropAndResize": _crop_and_resize, "CropAndResizeGradImage": _crop_grad_image,
             "CropAndResizeGradBoxes": _crop_grad_boxes, "NonMaxSuppressionV3": _nms_factory(3),
             "NonMaxSuppressionV4": _nms_factory(4), "NonMaxSuppressionV5": _nms_factory(5),
             "DrawBoundingBoxesV2": _draw_boxes, "DecodePng": _decode_factory("png"),
             "DecodeJpeg": _decode_factory("jpeg"), "DecodeGif": _decode_factory("gif"),
             "DecodeBmp": _decode_factory("bmp"), "DecodeImage": _decode_factory(None),
             "EncodePng": _encode_png, "EncodeJpeg": _encode_jpeg, "ExtractJpegShape": _jpeg_shape}
    for op, factory in table.items():
        registry.register(op, device, factory)

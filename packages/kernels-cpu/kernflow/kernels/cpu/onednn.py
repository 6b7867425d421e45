"""oneDNN convolutions (with fused bias and relu), max pooling and ReluGrad for the CPU kernels, over
oneDNN's C API (ctypes).

TensorFlow's CPU convolutions are oneDNN's; numpy has no convolution, and im2col + one GEMM moves the
whole window matrix through memory on every call. When the `onednn-cpu-gomp` wheel is installed (a
dependency of kernflow-kernels-cpu on Linux x86-64) the float32 Conv2D/Conv3D family and max pooling
run oneDNN primitives here; everything else, and every platform without the library, uses the numpy
kernels. `KERNFLOW_ONEDNN=0` turns this off.

How a call runs:
- activations keep the caller's layout: their memory descriptors are built from the numpy strides
  (NHWC, NCHW or any strided view), so nothing is copied in or out;
- weights use the layout the primitive asks for ("any"): a reorder from TF's HWIO layout runs before
  each forward or backward-data call (a few tens of microseconds) and back after backward-weights;
- the scratchpad is user-managed (a numpy buffer per call), so one primitive can run on several
  executor threads at once; each thread has its own stream;
- primitives are cached per geometry (shapes, strides, paddings) in a bounded LRU.
The library releases the GIL (ctypes does) and runs its own OpenMP threads.
"""

from __future__ import annotations

import collections
import ctypes as C
import logging
import os
import sys
import threading

import numpy as np

_log = logging.getLogger(__name__)

_MAX_DIMS = 12
_Dims = C.c_int64 * _MAX_DIMS
_P = C.c_void_p

# oneDNN C API constants (oneDNN 3.x, dnnl_types.h / dnnl_common_types.h).
_CPU = 1
_F32 = 3
_TAG_ANY = 1
_FWD_TRAINING = 64
_FWD_INFERENCE = 96
_CONV_DIRECT = 0x1
_POOL_MAX = 0x1ff
_SCRATCHPAD_USER = 1
_ELTWISE_RELU, _ELTWISE_LINEAR, _ELTWISE_CLIP = 0x20, 0x26, 0x2e
_BINARY_MUL, _BINARY_MAX = 0x1fff1, 0x1fff2
_Q_SRC, _Q_DIFF_SRC, _Q_WEIGHTS, _Q_DIFF_WEIGHTS = 129, 130, 131, 132
_Q_WORKSPACE, _Q_SCRATCHPAD = 135, 136
ARG_SRC, ARG_DST, ARG_WEIGHTS, ARG_WORKSPACE, ARG_SCRATCHPAD = 1, 17, 33, 64, 80
ARG_DIFF_SRC, ARG_DIFF_DST, ARG_DIFF_WEIGHTS = 129, 145, 161
ARG_SRC_1, ARG_BIAS = 2, 41
_ARG_POST_OP_BASE = 32768
_CACHE_SIZE = 256


class _Arg(C.Structure):
    _fields_ = [("arg", C.c_int), ("memory", _P)]


class OneDNNError(RuntimeError):
    """A oneDNN call failed (the caller falls back to numpy)."""


def _dims(values) -> _Dims:
    d = _Dims()
    for i, v in enumerate(values):
        d[i] = int(v)
    return d


class _Library:
    def __init__(self, path: str):
        lib = C.CDLL(path)
        lib.dnnl_primitive_desc_query_md.restype = _P
        lib.dnnl_primitive_desc_query_md.argtypes = [_P, C.c_int, C.c_int]
        lib.dnnl_memory_desc_get_size.restype = C.c_size_t
        lib.dnnl_memory_desc_get_size.argtypes = [_P]
        self.lib = lib
        self.engine = _P()
        self._check(lib.dnnl_engine_create(C.byref(self.engine), _CPU, C.c_size_t(0)), "engine_create")
        self.attr = _P()
        self._check(lib.dnnl_primitive_attr_create(C.byref(self.attr)), "primitive_attr_create")
        self._check(lib.dnnl_primitive_attr_set_scratchpad_mode(self.attr, _SCRATCHPAD_USER),
                    "primitive_attr_set_scratchpad_mode")
        self._local = threading.local()

    @staticmethod
    def _check(status: int, what: str) -> None:
        if status != 0:
            raise OneDNNError(f"oneDNN dnnl_{what} failed with status {status}")

    def call(self, name: str, *args) -> None:
        self._check(getattr(self.lib, "dnnl_" + name)(*args), name)

    def stream(self) -> _P:
        s = getattr(self._local, "stream", None)
        if s is None:
            s = _P()
            self.call("stream_create", C.byref(s), self.engine, C.c_uint(1))
            self._local.stream = s
        return s

    # -------------------------------------------------------------- memory descriptors
    def md(self, dims, strides=None) -> "_MemDesc":
        md = _P()
        if strides is None:
            self.call("memory_desc_create_with_tag", C.byref(md), len(dims), _dims(dims), _F32, _TAG_ANY)
        else:
            self.call("memory_desc_create_with_strides", C.byref(md), len(dims), _dims(dims), _F32,
                      _dims(strides))
        return _MemDesc(self, md, owned=True)

    def attr_with_post_ops(self, post_ops) -> _P:
        """A new primitive attr (user scratchpad) with `post_ops`: ("eltwise", alg, alpha, beta) or
        ("binary", alg, memory descriptor) in order. The caller destroys it once the primitive
        descriptor is made (the descriptor keeps a copy)."""
        attr, po = _P(), _P()
        self.call("primitive_attr_create", C.byref(attr))
        try:
            self.call("primitive_attr_set_scratchpad_mode", attr, _SCRATCHPAD_USER)
            self.call("post_ops_create", C.byref(po))
            try:
                for kind, alg, *rest in post_ops:
                    if kind == "eltwise":
                        self.call("post_ops_append_eltwise", po, alg, C.c_float(rest[0]), C.c_float(rest[1]))
                    else:
                        self.call("post_ops_append_binary", po, alg, rest[0].handle)
                self.call("primitive_attr_set_post_ops", attr, po)
            finally:
                self.lib.dnnl_post_ops_destroy(po)
        except OneDNNError:
            self.lib.dnnl_primitive_attr_destroy(attr)
            raise
        return attr

    def query(self, pd: _P, what: int) -> "_MemDesc":
        return _MemDesc(self, _P(self.lib.dnnl_primitive_desc_query_md(pd, what, 0)), owned=False)


class _MemDesc:
    __slots__ = ("lib", "handle", "owned", "nbytes")

    def __init__(self, lib: _Library, handle: _P, owned: bool):
        self.lib, self.handle, self.owned = lib, handle, owned
        self.nbytes = int(lib.lib.dnnl_memory_desc_get_size(handle)) if handle.value else 0

    def __del__(self):
        if self.owned and self.handle.value:
            self.lib.lib.dnnl_memory_desc_destroy(self.handle)


class _Primitive:
    """A primitive with its descriptor, the descriptors it was made from, and its scratchpad size."""

    def __init__(self, lib: _Library, pd: _P):
        self.lib, self.pd = lib, pd
        self.handle = _P()
        try:
            lib.call("primitive_create", C.byref(self.handle), pd)
        except OneDNNError:
            lib.lib.dnnl_primitive_desc_destroy(pd)
            raise
        self.scratch_md = lib.query(pd, _Q_SCRATCHPAD)

    def __del__(self):
        if self.handle.value:
            self.lib.lib.dnnl_primitive_destroy(self.handle)
        if self.pd.value:
            self.lib.lib.dnnl_primitive_desc_destroy(self.pd)

    def run(self, args) -> None:
        """args: (arg id, memory descriptor, numpy array); the scratchpad is added here."""
        lib = self.lib
        if self.scratch_md.nbytes:
            args = list(args) + [(ARG_SCRATCHPAD, self.scratch_md,
                                  np.empty(self.scratch_md.nbytes, dtype=np.uint8))]
        mems = []
        try:
            for _, md, arr in args:
                m = _P()
                lib.call("memory_create", C.byref(m), md.handle, lib.engine, _P(arr.ctypes.data))
                mems.append(m)
            packed = (_Arg * len(args))(*[_Arg(a[0], m) for a, m in zip(args, mems)])
            stream = lib.stream()
            lib.call("primitive_execute", self.handle, stream, len(args), packed)
            lib.call("stream_wait", stream)
        finally:
            for m in mems:
                lib.lib.dnnl_memory_destroy(m)


_lib: _Library | None = None
_lib_lock = threading.Lock()
_lib_tried = False
_cache: collections.OrderedDict = collections.OrderedDict()


def _library_path() -> str | None:
    prefixes = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(sys.executable))]
    for prefix in dict.fromkeys(prefixes):
        path = os.path.join(prefix, "lib", "libdnnl.so.3")
        if os.path.exists(path):
            return path
    return None


_enabled = True


def set_enabled(enabled: bool) -> bool:
    """Turns the oneDNN kernels on or off for this process (the numpy kernels run when off); returns
    the previous setting. Tests use it to compare both paths."""
    global _enabled
    previous, _enabled = _enabled, bool(enabled)
    return previous


def library() -> _Library | None:
    """The loaded library, or None when oneDNN is not installed, cannot load, or is turned off."""
    global _lib, _lib_tried
    if not _enabled:
        return None
    if _lib_tried:
        return _lib
    with _lib_lock:
        if _lib_tried:
            return _lib
        if os.environ.get("KERNFLOW_ONEDNN", "1") not in ("0", "false", "off"):
            path = _library_path()
            if path is not None:
                # OpenMP threads that spin after a primitive steal the cores from OpenBLAS's threads
                # and the executor's (measured: the convnet step 48 ms passive vs 89 ms spinning).
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                try:
                    _lib = _Library(path)
                except (OSError, OneDNNError, AttributeError) as e:
                    _log.warning("oneDNN at %s could not be loaded (%s); using the numpy kernels", path, e)
        _lib_tried = True
    return _lib


_refused: set = set()


def log_fallback(what: str, error: Exception) -> None:
    """Logs (once per kind of failure) that a call went to numpy because oneDNN refused it."""
    key = (what, str(error))
    if key not in _refused:
        _refused.add(key)
        _log.info("%s: oneDNN refused the call (%s); using the numpy kernel", what, error)


def available() -> bool:
    return library() is not None


def _cached(key, build):
    with _lib_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    value = build()
    with _lib_lock:
        _cache[key] = value
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return value


def _act_md(lib: _Library, shape, strides, channels_last: bool) -> _MemDesc:
    """Memory descriptor of an activation array (numpy shape/byte strides) in oneDNN's N, C, spatial order."""
    el = [s // 4 for s in strides]
    if channels_last:
        order = [0, len(shape) - 1] + list(range(1, len(shape) - 1))
    else:
        order = list(range(len(shape)))
    return lib.md([shape[i] for i in order], [el[i] for i in order])


def _filter_md(lib: _Library, shape, strides) -> _MemDesc:
    """TF filter [spatial..., in, out] -> oneDNN (out, in, spatial...)."""
    el = [s // 4 for s in strides]
    nd = len(shape)
    order = [nd - 1, nd - 2] + list(range(nd - 2))
    return lib.md([shape[i] for i in order], [el[i] for i in order])


def _usable(*arrays) -> bool:
    return all(a.dtype == np.float32 and all(s > 0 and s % 4 == 0 for s in a.strides) and a.size
               for a in arrays)


class _Conv:
    """The three convolution primitives of one geometry plus the filter reorders they need."""

    def __init__(self, lib, kind, x_shape, x_strides, w_shape, y_shape, y_strides, channels_last,
                 strides, dilations, pad_l, pad_r, bias=False, relu=False):
        self.lib = lib
        self.b_md = lib.md([w_shape[-1]], [1]) if bias else None
        self.x_md = _act_md(lib, x_shape, x_strides, channels_last)
        self.y_md = _act_md(lib, y_shape, y_strides, channels_last)
        self.w_md = _filter_md(lib, w_shape, _contiguous_strides(w_shape))
        w_any = lib.md([w_shape[-1], w_shape[-2]] + list(w_shape[:-2]))
        s, d = _dims(strides), _dims([k - 1 for k in dilations])
        pl, pr = _dims(pad_l), _dims(pad_r)
        fwd = _P()
        attr = lib.attr_with_post_ops([("eltwise", _ELTWISE_RELU, 0.0, 0.0)]) if relu else lib.attr
        try:
            lib.call("convolution_forward_primitive_desc_create", C.byref(fwd), lib.engine,
                     _FWD_INFERENCE if kind == "fwd" else _FWD_TRAINING, _CONV_DIRECT, self.x_md.handle,
                     w_any.handle, self.b_md.handle if bias else None, self.y_md.handle, s, d, pl, pr,
                     attr)
        finally:
            if relu:
                lib.lib.dnnl_primitive_attr_destroy(attr)
        if kind == "fwd":
            pd = fwd
        else:
            pd = _P()
            try:
                if kind == "bwd_data":
                    lib.call("convolution_backward_data_primitive_desc_create", C.byref(pd), lib.engine,
                             _CONV_DIRECT, self.x_md.handle, w_any.handle, self.y_md.handle, s, d, pl, pr,
                             fwd, lib.attr)
                else:
                    lib.call("convolution_backward_weights_primitive_desc_create", C.byref(pd), lib.engine,
                             _CONV_DIRECT, self.x_md.handle, w_any.handle, None, self.y_md.handle, s, d,
                             pl, pr, fwd, lib.attr)
            finally:
                lib.lib.dnnl_primitive_desc_destroy(fwd)
        self.prim = _Primitive(lib, pd)
        self.wi_md = lib.query(pd, _Q_DIFF_WEIGHTS if kind == "bwd_weights" else _Q_WEIGHTS)
        src, dst = (self.wi_md, self.w_md) if kind == "bwd_weights" else (self.w_md, self.wi_md)
        rpd = _P()
        lib.call("reorder_primitive_desc_create", C.byref(rpd), src.handle, lib.engine, dst.handle,
                 lib.engine, lib.attr)
        self.reorder = _Primitive(lib, rpd)
        self.wi_size = self.wi_md.nbytes // 4


def _conv_prim(kind, x, w_shape, y, channels_last, strides, dilations, pad_l, pad_r, bias=False,
               relu=False) -> _Conv:
    lib = library()
    key = (kind, x.shape, x.strides, tuple(w_shape), y.shape, y.strides, channels_last, tuple(strides),
           tuple(dilations), tuple(pad_l), tuple(pad_r), bias, relu)
    return _cached(key, lambda: _Conv(lib, kind, x.shape, x.strides, w_shape, y.shape, y.strides,
                                      channels_last, strides, dilations, pad_l, pad_r, bias, relu))


def _filter_in_primitive_layout(c: _Conv, w):
    wi = np.empty(c.wi_size, dtype=np.float32)
    c.reorder.run([(ARG_SRC, c.w_md, w), (ARG_DST, c.wi_md, wi)])
    return wi


def conv_forward(x, w, out_shape, channels_last, strides, dilations, pad_l, pad_r, bias=None,
                 relu=False):
    """y = conv(x, w) (+ bias) (then relu); x in the caller's layout, w TF's [spatial..., in, out],
    bias a vector of w's output channels; None if not usable.

    The relu is oneDNN's post-op, which (as in TF's own fused kernel, _FusedConv2D on oneDNN) turns
    NaN into 0 where a separate Relu keeps it."""
    if library() is None or not _usable(x, w) or (bias is not None and not _usable(bias)):
        return None
    w = np.ascontiguousarray(w)
    if bias is not None:
        bias = np.ascontiguousarray(bias)
        if bias.shape != (w.shape[-1],):
            return None
    y = np.empty(out_shape, dtype=np.float32)
    c = _conv_prim("fwd", x, w.shape, y, channels_last, strides, dilations, pad_l, pad_r,
                   bias is not None, relu)
    wi = _filter_in_primitive_layout(c, w)
    args = [(ARG_SRC, c.x_md, x), (ARG_WEIGHTS, c.wi_md, wi), (ARG_DST, c.y_md, y)]
    if bias is not None:
        args.append((ARG_BIAS, c.b_md, bias))
    c.prim.run(args)
    return y


def conv_backward_data(x_shape, w, dy, channels_last, strides, dilations, pad_l, pad_r):
    """dx of a convolution; None if not usable."""
    if library() is None or not _usable(w, dy):
        return None
    w = np.ascontiguousarray(w)
    dx = np.empty(x_shape, dtype=np.float32)
    c = _conv_prim("bwd_data", dx, w.shape, dy, channels_last, strides, dilations, pad_l, pad_r)
    wi = _filter_in_primitive_layout(c, w)
    c.prim.run([(ARG_DIFF_DST, c.y_md, dy), (ARG_WEIGHTS, c.wi_md, wi), (ARG_DIFF_SRC, c.x_md, dx)])
    return dx


def conv_backward_weights(x, w_shape, dy, channels_last, strides, dilations, pad_l, pad_r):
    """dw (TF's filter layout) of a convolution; None if not usable."""
    if library() is None or not _usable(x, dy):
        return None
    c = _conv_prim("bwd_weights", x, w_shape, dy, channels_last, strides, dilations, pad_l, pad_r)
    wi = np.empty(c.wi_size, dtype=np.float32)
    c.prim.run([(ARG_SRC, c.x_md, x), (ARG_DIFF_DST, c.y_md, dy), (ARG_DIFF_WEIGHTS, c.wi_md, wi)])
    dw = np.empty(tuple(w_shape), dtype=np.float32)
    c.reorder.run([(ARG_SRC, c.wi_md, wi), (ARG_DST, c.w_md, dw)])
    return dw


def _contiguous_strides(shape):
    return tuple(4 * int(np.prod(shape[i + 1:])) for i in range(len(shape)))


class _MaxPoolGrad:
    """Max pooling forward (for its argmax workspace) and backward of one geometry."""

    def __init__(self, lib, x_shape, x_strides, y_shape, g_strides, channels_last, kernel, strides,
                 pad_l, pad_r):
        self.x_md = _act_md(lib, x_shape, x_strides, channels_last)
        self.y_md = _act_md(lib, y_shape, _contiguous_strides(y_shape), channels_last)
        self.g_md = _act_md(lib, y_shape, g_strides, channels_last)
        self.dx_md = _act_md(lib, x_shape, _contiguous_strides(x_shape), channels_last)
        s, k, d = _dims(strides), _dims(kernel), _dims([0] * len(kernel))
        pl, pr = _dims(pad_l), _dims(pad_r)
        fwd = _P()
        lib.call("pooling_forward_primitive_desc_create", C.byref(fwd), lib.engine, _FWD_TRAINING, _POOL_MAX,
                 self.x_md.handle, self.y_md.handle, s, k, d, pl, pr, lib.attr)
        self.fwd = _Primitive(lib, fwd)
        self.ws_md = lib.query(fwd, _Q_WORKSPACE)
        bwd = _P()
        lib.call("pooling_backward_primitive_desc_create", C.byref(bwd), lib.engine, _POOL_MAX,
                 self.dx_md.handle, self.g_md.handle, s, k, d, pl, pr, fwd, lib.attr)
        self.bwd = _Primitive(lib, bwd)


class _MaxPool:
    """Max pooling forward (inference: no workspace) of one geometry."""

    def __init__(self, lib, x_shape, x_strides, y_shape, channels_last, kernel, strides, pad_l, pad_r):
        self.x_md = _act_md(lib, x_shape, x_strides, channels_last)
        self.y_md = _act_md(lib, y_shape, _contiguous_strides(y_shape), channels_last)
        s, k, d = _dims(strides), _dims(kernel), _dims([0] * len(kernel))
        fwd = _P()
        lib.call("pooling_forward_primitive_desc_create", C.byref(fwd), lib.engine, _FWD_INFERENCE,
                 _POOL_MAX, self.x_md.handle, self.y_md.handle, s, k, d, _dims(pad_l), _dims(pad_r),
                 lib.attr)
        self.fwd = _Primitive(lib, fwd)


def _pool_layout(ksize, strides, pads):
    """(channels_last, spatial axes) of a 4-D pooling whose channel window is 1 wide, else None."""
    if ksize[3] == strides[3] == 1 and pads[3] == (0, 0):
        return True, (1, 2)
    if ksize[1] == strides[1] == 1 and pads[1] == (0, 0):
        return False, (2, 3)
    return None


def max_pool(x, out_shape, ksize, strides, pads):
    """TF's MaxPool of a float32 4-D input (padding never wins), or None to use numpy.

    This is the primitive TF's own CPU kernel runs: on inputs holding NaN (which never wins a
    window here, where numpy's maximum propagates it) and infinities it gave exactly TF 2.21's
    output, SAME padding included.
    """
    layout = _pool_layout(ksize, strides, pads) if library() is not None and _usable(x) else None
    if layout is None:
        return None
    channels_last, spatial = layout
    args = (x.shape, x.strides, tuple(out_shape), channels_last, tuple(ksize[i] for i in spatial),
            tuple(strides[i] for i in spatial), tuple(pads[i][0] for i in spatial),
            tuple(pads[i][1] for i in spatial))
    lib = library()
    p = _cached(("max_pool",) + args, lambda: _MaxPool(lib, *args))
    y = np.empty(out_shape, dtype=np.float32)
    p.fwd.run([(ARG_SRC, p.x_md, x), (ARG_DST, p.y_md, y)])
    return y


_F32_LOWEST = np.finfo(np.float32).min


def max_pool_grad(x, y, g, ksize, strides, pads):
    """TF's MaxPoolGrad (the gradient goes to the first maximum of each window), or None to use numpy.

    x, y, g are 4-D with the window over two of the last three axes and a size-1 window of stride 1
    (the channel) on the remaining one. Windows whose maximum is not a finite value above the lowest
    one (y holds +-inf, NaN, or the lowest value a window of -inf pools to) go to numpy, whose rules
    for them are TF's: such a window takes no gradient.
    """
    layout = _pool_layout(ksize, strides, pads) if library() is not None and _usable(x, g) else None
    if layout is None or not (np.isfinite(y).all() and (y > _F32_LOWEST).all()):
        return None
    channels_last, spatial = layout
    args = (x.shape, x.strides, g.shape, g.strides, channels_last, tuple(ksize[i] for i in spatial),
            tuple(strides[i] for i in spatial), tuple(pads[i][0] for i in spatial),
            tuple(pads[i][1] for i in spatial))
    lib = library()
    p = _cached(("max_pool_grad",) + args, lambda: _MaxPoolGrad(lib, *args))
    ws = np.empty(p.ws_md.nbytes, dtype=np.uint8)
    p.fwd.run([(ARG_SRC, p.x_md, x), (ARG_DST, p.y_md, np.empty(g.shape, np.float32)),
               (ARG_WORKSPACE, p.ws_md, ws)])
    dx = np.empty(x.shape, dtype=np.float32)
    p.bwd.run([(ARG_DIFF_DST, p.g_md, g), (ARG_WORKSPACE, p.ws_md, ws), (ARG_DIFF_SRC, p.dx_md, dx)])
    return dx


# Elements below which ReluGrad stays in numpy (a primitive call costs ~20 us of Python).
_RELU_GRAD_MIN = 1 << 15


class _ReluGrad:
    """g * (y > 0) of n contiguous float32 elements, one JIT pass: max(y, 0) * 2**100 * 2**100,
    clipped to [0, 1], times g. The mask is exactly numpy's (y > 0) as 0.0/1.0: NaN gives 0 (max
    returns the 0 operand), the smallest denormal reaches 2**51 before the clip; and multiplying by
    it keeps TF's arithmetic (a NaN or inf gradient where y <= 0 gives NaN, as TF's ReluGrad)."""

    def __init__(self, lib, n):
        self.md = lib.md([n], [1])
        self.zero_md = lib.md([1], [1])
        attr = lib.attr_with_post_ops([("eltwise", _ELTWISE_LINEAR, 2.0 ** 100, 0.0),
                                       ("eltwise", _ELTWISE_LINEAR, 2.0 ** 100, 0.0),
                                       ("eltwise", _ELTWISE_CLIP, 0.0, 1.0),
                                       ("binary", _BINARY_MUL, self.md)])
        pd = _P()
        try:
            lib.call("binary_primitive_desc_create", C.byref(pd), lib.engine, _BINARY_MAX, self.md.handle,
                     self.zero_md.handle, self.md.handle, attr)
        finally:
            lib.lib.dnnl_primitive_attr_destroy(attr)
        self.prim = _Primitive(lib, pd)


_ZERO = np.zeros(1, dtype=np.float32)


def relu_grad(g, y):
    """TF's ReluGrad, g * (y > 0), of same-shaped contiguous float32 arrays; None to use numpy."""
    if library() is None or g.size < _RELU_GRAD_MIN or g.shape != y.shape \
            or g.dtype != np.float32 or y.dtype != np.float32 \
            or not (g.flags.c_contiguous and y.flags.c_contiguous):
        return None
    lib = library()
    p = _cached(("relu_grad", g.size), lambda: _ReluGrad(lib, g.size))
    out = np.empty(g.shape, dtype=np.float32)
    p.prim.run([(ARG_SRC, p.md, y), (ARG_SRC_1, p.zero_md, _ZERO), (ARG_DST, p.md, out),
                (_ARG_POST_OP_BASE * 4 | ARG_SRC_1, p.md, g)])
    return out

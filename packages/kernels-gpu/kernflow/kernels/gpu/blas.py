"""Matrix products through cuBLAS called directly, on whatever CUDA stream is current.

cupy's cuBLAS bindings refuse to run while a stream is being captured into a CUDA graph (cupy 14:
"calling cuBLAS API during stream capture is currently unsupported"), although cuBLAS supports
capture with a workspace of the caller's (cuBLAS documentation, "CUDA Graphs Support"); and
`cupy.dot` costs 18-25 us of host time per call on a small matrix, most of a small step's matmul.
This module calls ``cublasSgemm_v2`` / ``cublasDgemm_v2`` of the cuBLAS library cupy has loaded,
through ctypes: one handle per thread and device, its stream set to the current stream when that
changes, and a workspace of its own set after every stream change (``cublasSetStream`` resets it).
Default math mode: float32 products are computed in float32, as cupy's (no TF32).

`gemm` returns None for what it does not handle (other dtypes, sizes past int32); the caller then
uses cupy.
"""

from __future__ import annotations

import ctypes
import re
import threading

import cupy as cp
import numpy as np

__all__ = ["gemm", "available"]

_OP_N, _OP_T = 0, 1
_WORKSPACE_BYTES = 4 << 20
_INT_MAX = (1 << 31) - 1
_lib = None
_lib_error = None
_local = threading.local()
_load_lock = threading.Lock()
_ONE = {np.dtype(np.float32): ctypes.c_float(1.0), np.dtype(np.float64): ctypes.c_double(1.0)}
_ZERO = {np.dtype(np.float32): ctypes.c_float(0.0), np.dtype(np.float64): ctypes.c_double(0.0)}


def _library_path() -> str | None:
    """The path of the libcublas cupy loaded (from this process's memory map)."""
    pat = re.compile(r"(/\S*/libcublas\.so(?:\.\d+)*)$")
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                m = pat.search(line.strip())
                if m:
                    return m.group(1)
    except OSError:
        return None
    return None


def _load():
    global _lib, _lib_error
    with _load_lock:
        if _lib is not None or _lib_error is not None:
            return _lib
        try:
            cp.cuda.device.get_cublas_handle()   # makes cupy load cuBLAS
            path = _library_path()
            if path is None:
                raise OSError("libcublas is not mapped in this process")
            lib = ctypes.CDLL(path)
            vp, i = ctypes.c_void_p, ctypes.c_int
            lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
            lib.cublasSetStream_v2.argtypes = [vp, vp]
            lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
            for name, t in (("cublasSgemm_v2", ctypes.c_float), ("cublasDgemm_v2", ctypes.c_double)):
                getattr(lib, name).argtypes = [vp, i, i, i, i, i, ctypes.POINTER(t), vp, i, vp, i,
                                               ctypes.POINTER(t), vp, i]
            for name in ("cublasCreate_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2",
                         "cublasSgemm_v2", "cublasDgemm_v2"):
                getattr(lib, name).restype = ctypes.c_int
            _lib = lib
        except Exception as e:  # noqa: BLE001 - any failure leaves matmuls to cupy
            _lib_error = f"{type(e).__name__}: {e}"
        return _lib


def available() -> bool:
    """True when cuBLAS could be loaded for direct calls."""
    return _load() is not None


def _check(status: int, what: str) -> None:
    if status:
        raise RuntimeError(f"cuBLAS {what} failed with status {status}")


def _handle(lib):
    """This thread's handle for the current device, bound to the current stream."""
    dev = cp.cuda.runtime.getDevice()
    handles = getattr(_local, "handles", None)
    if handles is None:
        handles = _local.handles = {}
    st = handles.get(dev)
    if st is None:
        h = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(h)), "create")
        with cp.cuda.using_allocator(cp.get_default_memory_pool().malloc):
            workspace = cp.cuda.alloc(_WORKSPACE_BYTES)   # never from a capture's private pool
        st = handles[dev] = [h, None, workspace]
    stream = cp.cuda.get_current_stream().ptr
    if st[1] != stream:
        _check(lib.cublasSetStream_v2(st[0], stream), "set stream")
        _check(lib.cublasSetWorkspace_v2(st[0], st[2].ptr, _WORKSPACE_BYTES), "set workspace")
        st[1] = stream
    return st[0]


def _operand(x):
    """(array, op, ld) presenting the logical matrix `x` (r x c) as x^T in column-major terms."""
    if not x.flags.c_contiguous:
        if x.flags.f_contiguous:
            return x, _OP_T, max(x.shape[0], 1)
        x = cp.ascontiguousarray(x)
    return x, _OP_N, max(x.shape[1], 1)


def gemm(a, b):
    """a @ b for 2-D float32/float64 cupy arrays (views, transposed views welcome); None when not
    handled here (the caller falls back to cupy)."""
    dtype = a.dtype
    if dtype not in _ONE or b.dtype != dtype:
        return None
    m, k = a.shape
    n = b.shape[1]
    if max(m, n, k) > _INT_MAX:
        return None
    lib = _load()
    if lib is None:
        return None
    c = cp.empty((m, n), dtype)
    if m == 0 or n == 0:
        return c
    if k == 0:
        c.fill(0)
        return c
    # Row-major C = A B is column-major C^T = B^T A^T: B^T and A^T are how cuBLAS sees the
    # row-major buffers of B and A.
    a, op_a, ld_a = _operand(a)
    b, op_b, ld_b = _operand(b)
    fn = lib.cublasSgemm_v2 if dtype == np.float32 else lib.cublasDgemm_v2
    _check(fn(_handle(lib), op_b, op_a, n, m, k, ctypes.byref(_ONE[dtype]), b.data.ptr, ld_b,
              a.data.ptr, ld_a, ctypes.byref(_ZERO[dtype]), c.data.ptr, n), "gemm")
    return c

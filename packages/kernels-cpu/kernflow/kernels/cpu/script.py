"""CPU kernels of the Python-calling and printing ops (kernflow.core.ops.script_ops).

PrintV2 to ``file://<path>`` appends to a path confined to the process's file root
(kernflow.core.runtime.file_root) when one is set, checked at each write.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.runtime import file_root
from kernflow.kernels.cpu.strings import _float_str

DEVICE = "CPU"
_log = logging.getLogger("kernflow")


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


# ---------------------------------------------------------------------------- py_func
class EagerArray(np.ndarray):
    """What a `py_function` callable receives: a numpy array that also has ``.numpy()``."""

    def numpy(self):
        arr = self.view(np.ndarray)
        return arr[()] if arr.ndim == 0 else arr.copy()


# Python exception -> TF error class (TF's py_func.cc); everything else is UnknownError.
_ERRORS = ((ValueError, errors.InvalidArgumentError), (TypeError, errors.InvalidArgumentError),
           (StopIteration, errors.OutOfRangeError), (MemoryError, errors.ResourceExhaustedError),
           (NotImplementedError, errors.UnimplementedError))


def _error_of(e: BaseException, token: str):
    cls = next((c for py, c in _ERRORS if isinstance(e, py)), errors.UnknownError)
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return cls(None, None, f"{type(e).__name__}: {e} (in the Python function {token})\n{tb}")


def _type_name(arr: np.ndarray) -> str:
    if arr.dtype.kind in "OSU":
        return "string" if arr.dtype.kind in "SU" or arr.size == 0 or all(
            isinstance(v, (bytes, str)) for v in arr.reshape(-1)) else "object"
    try:
        return _dtypes.as_dtype(arr.dtype).name
    except (TypeError, KeyError, ValueError):
        return str(arr.dtype)


def _to_strings(arr: np.ndarray):
    """An object array of bytes, or None if `arr` does not hold strings."""
    if arr.dtype.kind == "S" or arr.dtype.kind == "U":
        vals = arr.astype(object)
    elif arr.dtype.kind == "O" and all(isinstance(v, (bytes, str)) for v in arr.reshape(-1)):
        vals = arr.copy()
    else:
        return None
    flat = vals.reshape(-1)
    for i, v in enumerate(flat):
        flat[i] = v.encode("utf-8") if isinstance(v, str) else bytes(v)
    return vals


def _convert(value, dt, i: int, token: str, lenient: bool):
    """The output `value` as an array of DType `dt`; numpy results must match it exactly unless
    `lenient` (py_function converts, as TF's convert_to_tensor)."""
    if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
        value = value.view(np.ndarray)
    arr = np.asarray(value)
    if dt == _dtypes.string:
        out = _to_strings(arr)
        if out is not None:
            return out
    else:
        want = np.dtype(dt.as_numpy_dtype)
        if arr.dtype == want:
            return np.array(arr, copy=True)
        if lenient and arr.dtype.kind not in "OSU":
            try:
                return arr.astype(want)
            except (TypeError, ValueError):
                pass
    raise errors.InvalidArgumentError(None, None, f"{i}-th value returned by {token} is "
                                      f"{_type_name(arr)}, but expects {dt.name}")


def _results(ret, out_types, token: str, eager: bool):
    if ret is None:
        values = []
    elif isinstance(ret, (list, tuple)):
        values = list(ret)
        if eager:  # TF's EagerFunc zips the results with Tout
            values = values[:len(out_types)]
    else:
        values = [ret]
    if len(values) != len(out_types):
        raise errors.InvalidArgumentError(None, None, f"{token} returns {len(values)} values, but "
                                          f"expects to see {len(out_types)} values.")
    return [_convert(v, dt, i, token, eager) for i, (v, dt) in enumerate(zip(values, out_types))]


def _py_func(ctx):
    from kernflow.core.ops import script_ops
    token = _text(ctx.get_attr("token"))
    out_types = [d.base_dtype for d in ctx.output_dtypes]
    eager = ctx.op_type == "EagerPyFunc"

    def compute(*inputs):
        cb = script_ops.registry.get(token)
        if cb is None:
            raise errors.InvalidArgumentError(
                None, None, f"{ctx.op_type} node {ctx.name}: callback {token} is not found: the "
                f"Python function of a py_func only exists in the process that built the graph")
        args = [np.array(x, copy=True) for x in inputs]
        if eager:
            args = [a.view(EagerArray) for a in args]
        try:
            ret = cb.func(*args)
        except Exception as e:  # noqa: BLE001 - any failure of user code fails the op
            raise _error_of(e, token) from None
        outs = _results(ret, out_types, token, eager)
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)
    return compute


# ---------------------------------------------------------------------------- Print
def _element_v1(v, kind: str) -> str:
    if kind == "O":
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    if kind == "f":
        return _float_str(float(v), np.asarray(v).dtype.itemsize <= 4)
    if kind == "c":
        return f"({_float_str(v.real, True)},{_float_str(v.imag, True)})"
    return str(int(v))


def summarize_v1(a: np.ndarray, summarize: int) -> str:
    """TF's Tensor::SummarizeValue(summarize) (print_v2=false): the first `summarize` elements in
    row-major order, nested in brackets per dimension, '...' where elements were left out."""
    n = a.size
    limit = n if summarize < 0 else min(summarize, n)
    if a.ndim == 0:
        return _element_v1(a[()], a.dtype.kind)
    flat = a.reshape(-1)
    kind = a.dtype.kind
    out, at = [], [0]

    def dim(d):
        if at[0] >= limit:
            return
        if d == a.ndim - 1:
            for i in range(a.shape[d]):
                if at[0] >= limit:
                    if d != 0:
                        out.append("...")
                    return
                if i:
                    out.append(" ")
                out.append(_element_v1(flat[at[0]], kind))
                at[0] += 1
            return
        for _ in range(a.shape[d]):
            opened = at[0] < limit
            if opened:
                out.append("[")
            dim(d + 1)
            if opened or at[0] < limit:
                out.append("]")
    dim(0)
    if limit < n:
        out.append("...")
    return "".join(out)


def _print(ctx):
    message = _text(ctx.get_attr("message"))
    first_n = ctx.get_attr("first_n")
    summarize = ctx.get_attr("summarize")
    lock = threading.Lock()
    calls = [0]

    def compute(x, *data):
        if first_n >= 0:
            with lock:
                if calls[0] >= first_n:
                    return x
                calls[0] += 1
        text = message + "".join("[" + summarize_v1(np.asarray(d), summarize) + "]" for d in data)
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
        return x
    return compute


_LOG_LEVELS = {"log(info)": logging.INFO, "log(warning)": logging.WARNING, "log(error)": logging.ERROR}


def _writer(ctx, stream: str):
    if stream in ("stdout", "stderr"):
        def write(text):
            f = sys.stdout if stream == "stdout" else sys.stderr
            f.write(text)
            f.flush()
        return write
    if stream in _LOG_LEVELS:
        return lambda text: _log.log(_LOG_LEVELS[stream], "%s", text.rstrip("\n"))
    if stream.startswith("file://"):
        path, where = stream[len("file://"):], f"PrintV2 node {ctx.name}"

        def append(text):
            confined = file_root.check(where, path, write=True)
            with open(confined, "a", encoding="utf-8", errors="surrogateescape") as f:
                f.write(text)
        return append
    raise errors.InvalidArgumentError(None, None, f"PrintV2 node {ctx.name}: unknown output_stream "
                                      f"{stream!r} (expected stdout, stderr, log(info), log(warning), "
                                      f"log(error) or file://<path>)")


def _print_v2(ctx):
    end = _text(ctx.get_attr("end"))
    write = _writer(ctx, _text(ctx.get_attr("output_stream")))

    def compute(text):
        arr = np.asarray(text, dtype=object)
        if arr.ndim != 0:
            raise errors.InvalidArgumentError(None, None, f"PrintV2 node {ctx.name}: input is expected "
                                              f"to be a scalar, but got shape {list(arr.shape)}")
        v = arr[()]
        s = v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
        write(s + end)
    return compute


def register(registry):
    """Registers the CPU kernels of the script family."""
    for op in ("PyFunc", "PyFuncStateless", "EagerPyFunc"):
        registry.register(op, DEVICE, _py_func, expensive=True)
    registry.register("Print", DEVICE, _print)
    registry.register("PrintV2", DEVICE, _print_v2)

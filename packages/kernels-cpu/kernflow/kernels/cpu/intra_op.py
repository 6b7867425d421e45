"""The intra-op thread pool of the CPU kernels: TF's `intra_op_parallelism_threads`.

One op's large matmul or elementwise update is split into row blocks that run at once on this pool
(the calling executor thread takes the first block). numpy's BLAS is set to one thread when the first
CPU device is created, as TF's Eigen kernels share one intra-op pool instead of each library keeping
its own: OpenBLAS's idle threads spin for a while after every call, and on a small machine they take
the cores from the next op (oneDNN's convolutions, the executor's other threads). Measured on 2 cores:
the mnist_deep step 48 -> 34 ms, docs/performance.md.

The BLAS setting is process-wide (threadpoolctl), so numpy's own matmuls in the same process also run
on one thread while kernflow is in use; `KERNFLOW_BLAS_THREADS=N` keeps N BLAS threads instead (and
then kernflow does not split matmuls).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Multiply-adds per block below which a matmul is not split: a thread handoff costs ~20 us, and the
# small matmuls of an RNN's loop already run concurrently on the executor's threads (the LSTM step
# was 191 ms with 2**21, 163 ms with 2**23; tools/bench_lstm.py).
_MIN_BLOCK_FLOPS = 1 << 23
# Elementwise updates: elements per block, and per piece of a block.
_MIN_BLOCK_ELEMENTS = 1 << 17
_CACHE_BLOCK = 1 << 16
# Rows of a below which a @ b^T is computed as (b @ a^T)^T (see `_matmul`).
_TRANSPOSED_MAX_ROWS = 256
# Rows of a up to which a split matmul divides b rather than a (tools/bench_conv.py's dense layer;
# measured on 2 cores, m = 512 is faster in row blocks, m = 256 either way).
_FEW_ROWS = 256

_lock = threading.Lock()
_threads = 0
_pool: ThreadPoolExecutor | None = None
_blas_limiter = None


def configure(intra_op_threads: int = 0) -> None:
    """Sets the pool size (0: one thread per core) and BLAS to one thread; the first call wins."""
    global _threads, _pool, _blas_limiter
    if _threads:
        return
    with _lock:
        if _threads:
            return
        n = intra_op_threads if intra_op_threads > 0 else (os.cpu_count() or 1)
        blas = os.environ.get("KERNFLOW_BLAS_THREADS")
        from threadpoolctl import threadpool_limits
        if blas:
            _blas_limiter = threadpool_limits(limits=int(blas), user_api="blas")
            n = 1
        else:
            _blas_limiter = threadpool_limits(limits=1, user_api="blas")
        if n > 1:
            _pool = ThreadPoolExecutor(n - 1, thread_name_prefix="kernflow-intra-op")
        _threads = n


def threads() -> int:
    return _threads or 1


def _blocks(total: int, parts: int):
    step = -(-total // parts)
    return [(i, min(total, i + step)) for i in range(0, total, step)]


def run_blocks(fn, total: int, parts: int) -> None:
    """Runs fn(start, stop) over `parts` contiguous blocks of range(total) on this thread and the pool.

    Blocks are claimed, not assigned: this thread runs blocks until none is left and then waits only
    for blocks another thread has started. When the pool is busy (two inter-op threads each running
    a large matmul: the PTB LSTM's two output-layer gradients), a caller does not wait for a queued
    task to reach a worker; it runs the blocks itself (a step's two 30 ms gradient matmuls, each
    split in 2: 42 -> ~31 ms).
    """
    blocks = _blocks(total, parts)
    if len(blocks) == 1 or _pool is None:
        for a, b in blocks:
            fn(a, b)
        return
    lock = threading.Lock()
    done = threading.Event()
    state = {"next": 0, "left": len(blocks), "error": None}

    def work():
        while True:
            with lock:
                i = state["next"]
                if i >= len(blocks):
                    return
                state["next"] = i + 1
            try:
                fn(*blocks[i])
            except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
                state["error"] = state["error"] or e
            finally:
                with lock:
                    state["left"] -= 1
                    if state["left"] == 0:
                        done.set()

    futures = [_pool.submit(work) for _ in blocks[1:]]
    work()
    for f in futures:
        f.cancel()              # not started: nothing left for it to claim
    done.wait()
    if state["error"] is not None:
        raise state["error"]


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b on this thread. When b is a transposed matrix (`transpose_b`, the `dy @ W^T` of every
    backward pass) and a has few rows, OpenBLAS's kernel for that layout is slow: (b^T @ a^T)^T is
    the same product, 1.2-2x faster for m <= 256 (20x800 @ (400x800)^T: 283 -> 196 us, the copy
    back to row-major included; tools/bench_lstm.py's gradient loop)."""
    if b.flags.f_contiguous and not b.flags.c_contiguous and a.shape[0] <= _TRANSPOSED_MAX_ROWS \
            and b.shape[1] > 1 and a.dtype == b.dtype and a.dtype.kind == "f":
        return np.ascontiguousarray(np.matmul(b.T, a.T).T)
    return np.matmul(a, b)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for 2-D arrays (any strides), split into row or column blocks over the intra-op pool."""
    if _pool is None:           # one intra-op thread: nothing to split (and no per-call arithmetic)
        return _matmul(a, b)
    m, k = a.shape
    n = b.shape[1]
    parts = min(threads(), (m * n * k) // _MIN_BLOCK_FLOPS)
    if parts < 2 or a.dtype != b.dtype or a.dtype.kind not in "fc":
        return _matmul(a, b)
    if m >= n or m > _FEW_ROWS:
        out = np.empty((m, n), dtype=a.dtype)
        run_blocks(lambda i, j: np.matmul(a[i:j], b, out=out[i:j]), m, parts)
        return out
    # Few rows (a batch of 50 against a 3136x1024 layer): row blocks would each read all of b, and
    # column blocks of b are slow in OpenBLAS (strided panels), so:
    if b.flags.f_contiguous and not b.flags.c_contiguous:
        # b = B^T (`dy @ W^T`): blocks of B's contiguous rows give rows of the transposed result
        # (50x1024 @ (3136x1024)^T: 4.3 -> 2.2 ms on 2 threads, the copy back included).
        bt, out_t = b.T, np.empty((n, m), dtype=a.dtype)
        run_blocks(lambda i, j: np.matmul(bt[i:j], a.T, out=out_t[i:j]), n, parts)
        return np.ascontiguousarray(out_t.T)
    if k < _FEW_ROWS:
        out = np.empty((m, n), dtype=a.dtype)
        run_blocks(lambda i, j: np.matmul(a, b[:, i:j], out=out[:, i:j]), n, parts)
        return out
    # Otherwise split the inner dimension and add the partial products
    # (50x3136 @ 3136x1024: 3.9 -> 2.6 ms on 2 threads).
    partial: dict = {}

    def block(i, j):
        partial[i] = np.matmul(a[:, i:j], b[i:j])
    run_blocks(block, k, parts)
    first, *rest = (partial[i] for i in sorted(partial))
    for r in rest:
        first += r
    return first


def batch_matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """np.matmul of stacked matrices, split over the leading (batch) axis of the result when both
    operands have the same batch shape; otherwise numpy's own loop."""
    if x.ndim == 2 and y.ndim == 2:
        return matmul(x, y)
    if x.ndim < 3 or x.shape[:-2] != y.shape[:-2] or threads() < 2:
        return np.matmul(x, y)
    flops = x.size * y.shape[-1]
    parts = min(threads(), flops // _MIN_BLOCK_FLOPS, x.shape[0])
    if parts < 2:
        return np.matmul(x, y)
    out = np.empty(x.shape[:-1] + y.shape[-1:], dtype=np.result_type(x, y))
    run_blocks(lambda i, j: np.matmul(x[i:j], y[i:j], out=out[i:j]), x.shape[0], parts)
    return out


def elementwise(fn, arrays, size: int) -> None:
    """fn(*blocks) over matching flat blocks of same-sized contiguous arrays (an in-place update)."""
    parts = min(threads(), size // _MIN_BLOCK_ELEMENTS)
    if parts < 2 or not all(a.flags.c_contiguous for a in arrays):
        fn(*arrays)
        return
    flat = [a.reshape(-1) for a in arrays]

    def block(i, j):   # in cache-sized pieces: each piece's passes then hit L2, not memory
        for k in range(i, j, _CACHE_BLOCK):
            fn(*[f[k:min(j, k + _CACHE_BLOCK)] for f in flat])
    run_blocks(block, size, parts)

"""CUDA-graph capture of one step's launches, and their replay (the GPU side of runtime/replay.py).

`capture_step(device, run, args)` records `run(inputs)` on a capture stream of its own:

* The step's feeds become *input buffers* allocated once; a replay copies each run's feeds into
  them (device-to-device, or host-to-device for numpy feeds) on the current stream before launching.
* Everything the step allocates while recording comes from a memory pool private to the capture
  (`cupy.cuda.MemoryPool`), kept as long as the graph: the graph writes into those buffers on every
  replay, so no other allocation may ever be handed them (PyTorch keeps a private pool per graph for
  the same reason). Intermediates freed while recording return to that pool and are reused by later
  launches of the same recording, in stream order, which a replay preserves.
* The recording uses relaxed capture mode on a non-blocking stream (the legacy default stream,
  which every eager kernel uses, cannot be captured); the graph is then launched on the current
  stream, ordered with eager work like any kernel.
* cupy refuses what a replay could not repeat: a host-to-device or device-to-host copy, a
  synchronisation, or a cuBLAS call through its own bindings (matmuls go through `blas.gemm`,
  which calls cuBLAS directly) raise while recording, and the step stays eager. A host value the
  step uploads while recording (a constant-derived scalar or shape converted by the executor)
  goes up once, before the graph, into a buffer kept with it (`upload`); a 0-d value cupy writes
  with a fill kernel whose argument is recorded by value. `runtime/replay.py` only captures steps
  whose host values are the same every run.

Launching the graph replays every kernel of the step in one call: on an H100 a 30-kernel graph of
tiny kernels costs ~40 us against ~460 us launched one by one from cupy.
"""

from __future__ import annotations

import threading

import cupy as cp
import numpy as np

__all__ = ["capture_step", "StepGraph", "upload"]


class _Recording:
    """What a device records while one thread captures: that thread, the stream eager work runs
    on, and the host values uploaded for the graph."""

    __slots__ = ("thread", "outer", "side", "kept")

    def __init__(self, outer):
        self.thread = threading.get_ident()
        self.outer = outer
        self.side = None   # a non-blocking stream for uploads, made on first use
        self.kept = []


class StepGraph:
    """A captured step: its input buffers, its graph, its outputs (the same objects every replay)."""

    def __init__(self, graph, inputs, outputs, keep):
        self._graph = graph
        self._inputs = inputs
        self._outputs = outputs
        self._keep = keep   # private pool, capture stream, uploads: alive as long as the graph

    def replay(self, args):
        """Copies `args` into the input buffers, launches the graph, returns the step's outputs."""
        stream = cp.cuda.get_current_stream()
        for buf, a in zip(self._inputs, args):
            _fill(buf, a, stream)
        self._graph.launch(stream)
        return self._outputs


def _fill(buf, a, stream) -> None:
    if type(a) is cp.ndarray:
        if a.dtype == buf.dtype and a.flags.c_contiguous and a.device.id == buf.device.id:
            if a.nbytes:
                buf.data.copy_from_device_async(a.data, a.nbytes, stream)
        else:
            buf[...] = a
    else:
        host = np.asarray(a, dtype=buf.dtype, order="C")   # (ascontiguousarray makes 0-d 1-d)
        if host.nbytes:
            buf.set(host, stream)


def upload(recording, value):
    """`value` (host) in device memory for a graph being recorded: copied now, outside the graph
    (on a side stream, waited for), into a buffer the graph keeps."""
    host = np.asarray(value, order="C")
    with recording.outer, cp.cuda.using_allocator(cp.get_default_memory_pool().malloc):
        arr = cp.empty(host.shape, host.dtype)
    if host.nbytes:
        if recording.side is None:
            recording.side = cp.cuda.Stream(non_blocking=True)
        arr.data.copy_from_host_async(host.ctypes.data, host.nbytes, recording.side)
        recording.side.synchronize()
    recording.kept.append(arr)
    return arr


def capture_step(device, run, args):
    """Records `run(inputs)` into a `StepGraph`; raises if the recording fails (nothing is left
    recording: the capture stream is ended either way)."""
    outer = cp.cuda.get_current_stream()
    pool = cp.cuda.MemoryPool()
    stream = cp.cuda.Stream(non_blocking=True)
    with cp.cuda.using_allocator(pool.malloc):
        inputs = [cp.empty(np.shape(a), np.dtype(a.dtype)) for a in args]
    recording = _Recording(outer)
    device._recording = recording
    try:
        with stream, cp.cuda.using_allocator(pool.malloc):
            stream.begin_capture()
            try:
                outputs = run(inputs)
            except BaseException:
                try:
                    stream.end_capture()
                except Exception:  # noqa: BLE001 - the recording is void anyway
                    pass
                raise
            graph = stream.end_capture()
    finally:
        device._recording = None
    return StepGraph(graph, inputs, list(outputs), (pool, stream, recording.kept))

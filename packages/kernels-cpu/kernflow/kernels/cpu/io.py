"""Checkpoint I/O kernels: SaveV2, RestoreV2, MergeV2Checkpoints, ShardedFilename.

They read and write the tensor bundle format of kernflow.core.train.checkpoint_format
(docs/checkpoint_format.md): whole numpy buffers are written and checksummed at once. Every prefix,
and every file of it that is opened, is confined to the process's file root
(kernflow.core.runtime.file_root) when one is set.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors
from kernflow.core.ops.io_ops import parse_shape_and_slice
from kernflow.core.runtime import file_root
from kernflow.core.train import checkpoint_format as cf

DEVICE = "CPU"


def _scalar_text(value, what: str, node: str, op: str) -> str:
    arr = np.asarray(value, dtype=object)
    if arr.size != 1:
        raise errors.InvalidArgumentError(None, None, f"{op} {node}: {what} must be a single string, "
                                          f"got shape {list(arr.shape)}")
    v = arr.reshape(-1)[0]
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _strings(value, what: str, n: int, node: str, op: str) -> list[str]:
    arr = np.asarray(value, dtype=object)
    if arr.ndim != 1 or arr.size != n:
        raise errors.InvalidArgumentError(None, None, f"{op} {node}: {what} must be a vector of {n} "
                                          f"strings (one per tensor), got shape {list(arr.shape)}")
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in arr]


def _confined(where: str, prefix: str, write: bool) -> str:
    """`prefix` as the op must use it under the file root; its index file (the one file of a
    checkpoint that is opened by name: a symbolic link pointing out) is checked too."""
    if file_root.root() is None:
        return prefix
    prefix = file_root.check(where, prefix, write=write)
    file_root.check(where, cf.index_filename(prefix), write=write)
    return prefix


def _save_v2(ctx):
    node = ctx.name
    dtypes = [d.base_dtype for d in ctx.input_dtypes[3:]]

    def compute(prefix, tensor_names, shape_and_slices, *tensors):
        prefix = _confined(f"SaveV2 {node}", _scalar_text(prefix, "prefix", node, "SaveV2"), True)
        names = _strings(tensor_names, "tensor_names", len(tensors), node, "SaveV2")
        specs = _strings(shape_and_slices, "shape_and_slices", len(tensors), node, "SaveV2")
        for n, s in zip(names, specs):
            if s.strip():
                raise errors.UnimplementedError(None, None, f"SaveV2 {node}: saving slices is not "
                                                f"supported (tensor '{n}', spec {s!r})")
        with cf.BundleWriter(prefix) as w:
            for n, t, dt in zip(names, tensors, dtypes):
                w.add(n, t, dt)
            w.finish()
    return compute


def _slice(arr, spec, name, node):
    try:
        parsed = parse_shape_and_slice(spec)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, None, f"RestoreV2 {node}: {e}") from None
    if parsed is None:
        return arr
    full, slices = parsed
    if list(arr.shape) != full:
        raise errors.InvalidArgumentError(None, None, f"RestoreV2 {node}: tensor '{name}' has shape "
                                          f"{list(arr.shape)} in the checkpoint, the slice spec "
                                          f"{spec!r} expects {full}")
    idx = tuple(slice(s, None if ln < 0 else s + ln) for s, ln in slices)
    return np.ascontiguousarray(arr[idx])


def _restore_v2(ctx):
    node = ctx.name
    dtypes = [d.base_dtype for d in ctx.output_dtypes]
    single = len(dtypes) == 1

    def compute(prefix, tensor_names, shape_and_slices):
        where = f"RestoreV2 {node}"
        prefix = _confined(where, _scalar_text(prefix, "prefix", node, "RestoreV2"), False)
        names = _strings(tensor_names, "tensor_names", len(dtypes), node, "RestoreV2")
        specs = _strings(shape_and_slices, "shape_and_slices", len(dtypes), node, "RestoreV2")
        reader = cf.BundleReader(prefix)
        if file_root.root() is not None:
            file_root.check_all(where, [reader.data_file(s) for s in range(reader.num_shards)],
                                write=False)
        outs = [_slice(reader.read(n, dt), s, n, node) for n, s, dt in zip(names, specs, dtypes)]
        return outs[0] if single else tuple(outs)
    return compute


def _merge(ctx):
    delete_old_dirs = ctx.get_attr("delete_old_dirs")
    allow_missing = ctx.get_attr("allow_missing_files")
    node = ctx.name

    def compute(checkpoint_prefixes, destination_prefix):
        where = f"MergeV2Checkpoints {node}"
        # the sources are read, then moved and deleted: written
        srcs = [_confined(where, v.decode("utf-8") if isinstance(v, bytes) else str(v), True)
                for v in np.asarray(checkpoint_prefixes, dtype=object).reshape(-1)]
        dest = _confined(where, _scalar_text(destination_prefix, "destination_prefix", node,
                                             "MergeV2Checkpoints"), True)
        cf.merge_bundles(srcs, dest, delete_old_dirs, allow_missing)
    return compute


def _sharded_filename(ctx):
    node = ctx.name

    def compute(basename, shard, num_shards):
        base = _scalar_text(basename, "basename", node, "ShardedFilename")
        s, n = int(shard), int(num_shards)
        if n < 1 or not 0 <= s < n:
            raise errors.InvalidArgumentError(None, None, f"ShardedFilename {node}: shard {s} is not "
                                              f"in [0, num_shards={n})")
        return np.array(f"{base}-{s:05d}-of-{n:05d}".encode("utf-8"), dtype=object)
    return compute


def register(registry, device=DEVICE):
    registry.register("SaveV2", device, _save_v2, expensive=True)
    registry.register("RestoreV2", device, _restore_v2, expensive=True)
    registry.register("MergeV2Checkpoints", device, _merge, expensive=True)
    registry.register("ShardedFilename", device, _sharded_filename)

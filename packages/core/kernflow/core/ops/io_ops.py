"""Checkpoint I/O ops: SaveV2, RestoreV2, MergeV2Checkpoints and ShardedFilename.

These are the paper's Save and Restore nodes: stateful graph ops whose kernels write and read the
checkpoint files (format in kernflow.core.train.checkpoint_format, documented in
docs/checkpoint_format.md). `kf.train.Saver` builds them; CPU kernels are in
kernflow.kernels.cpu.io.

Example::

    save = save_v2("/tmp/m", ["w"], [""], [w])          # writes w's current value
    with kf.control_dependencies([save]):
        (w_again,) = restore_v2("/tmp/m", ["w"], [""], [kf.float32])
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["save_v2", "restore_v2", "merge_v2_checkpoints", "sharded_filename",
           "parse_shape_and_slice"]


def parse_shape_and_slice(spec):
    """Parses a TF shape-and-slice string such as ``"4 5 0,2:-"``.

    Returns:
        None for the empty spec (the whole tensor), else ``(full_shape, slices)`` where `slices` has
        one ``(start, length)`` per dimension (length -1 means "to the end").

    Raises:
        ValueError: if the spec does not parse or a slice falls outside the shape.
    """
    if isinstance(spec, bytes):
        spec = spec.decode("utf-8")
    spec = (spec or "").strip()
    if not spec:
        return None
    parts = spec.split(" ")
    try:
        full = [int(p) for p in parts[:-1]]
    except ValueError:
        raise ValueError(f"Invalid shape_and_slice spec {spec!r}: the shape must be integers") from None
    if any(d < 0 for d in full):
        raise ValueError(f"Invalid shape_and_slice spec {spec!r}: negative dimension")
    extents = parts[-1].split(":")
    if len(extents) != len(full):
        raise ValueError(f"Invalid shape_and_slice spec {spec!r}: {len(full)} dimensions but "
                         f"{len(extents)} slice extents")
    slices = []
    for dim, ext in zip(full, extents):
        if ext == "-":
            slices.append((0, -1))
            continue
        try:
            start, length = (int(x) for x in ext.split(","))
        except ValueError:
            raise ValueError(f"Invalid shape_and_slice spec {spec!r}: bad extent {ext!r} (want "
                             f"'start,length' or '-')") from None
        if start < 0 or length < 0 or start + length > dim:
            raise ValueError(f"Invalid shape_and_slice spec {spec!r}: extent {ext!r} outside a "
                             f"dimension of size {dim}")
        slices.append((start, length))
    return full, slices


def _slice_shape(parsed):
    full, slices = parsed
    return [d if ln < 0 else ln for d, (_, ln) in zip(full, slices)]


def _vector_of(shape: _ts.TensorShape, what: str, n: int | None):
    s = shape.with_rank(1) if shape.rank is not None else shape
    if n is not None and s.rank == 1 and s.dim_values[0] is not None and s.dim_values[0] != n:
        raise ValueError(f"{what} must have {n} elements (one per tensor), got shape {s}")


def _save_shape(op):
    prefix, names, slices = (t.shape for t in op.inputs[:3])
    if prefix.rank is not None and prefix.num_elements() not in (None, 1):
        raise ValueError(f"prefix must be a scalar string, got shape {prefix}")
    n = len(op.inputs) - 3
    _vector_of(names, "tensor_names", n)
    _vector_of(slices, "shape_and_slices", n)
    return []


def _restore_shape(op):
    prefix, names, slices = (t.shape for t in op.inputs)
    if prefix.rank is not None and prefix.num_elements() not in (None, 1):
        raise ValueError(f"prefix must be a scalar string, got shape {prefix}")
    n = len(op.outputs)
    _vector_of(names, "tensor_names", n)
    _vector_of(slices, "shape_and_slices", n)
    specs = tensor_util.constant_value(op.inputs[2])
    out = []
    for i in range(n):
        parsed = parse_shape_and_slice(specs.reshape(-1)[i]) if specs is not None else None
        out.append(_ts.TensorShape(_slice_shape(parsed)) if parsed else _ts.TensorShape(None))
    return out


def _merge_shape(op):
    op.inputs[0].shape.with_rank_at_most(1)
    op.inputs[1].shape.with_rank(0)
    return []


def _sharded_filename_shape(op):
    for t in op.inputs:
        t.shape.with_rank(0)
    return [_ts.TensorShape([])]


register_op("SaveV2", inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string",
                              "tensors: dtypes"],
            attrs=["dtypes: list(type)"], shape_fn=_save_shape, stateful=True,
            doc="Saves `tensors` as a checkpoint with prefix `prefix` (scalar string): the index "
                "`<prefix>.index` and the data file `<prefix>.data-00000-of-00001`, written "
                "atomically. `tensor_names[i]` names `tensors[i]`; `shape_and_slices` must be empty "
                "strings (whole tensors). See docs/checkpoint_format.md.")
register_op("RestoreV2", inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string"],
            outputs=["tensors: dtypes"], attrs=["dtypes: list(type)"], shape_fn=_restore_shape,
            stateful=True,
            doc="Reads the tensors `tensor_names` (of types `dtypes`) from the checkpoint `prefix`, "
                "verifying their checksums. A non-empty `shape_and_slices[i]` (\"4 5 0,2:-\") "
                "selects a slice of a tensor saved whole with that shape.")
register_op("MergeV2Checkpoints", inputs=["checkpoint_prefixes: string", "destination_prefix: string"],
            attrs=["delete_old_dirs: bool = true", "allow_missing_files: bool = false"],
            shape_fn=_merge_shape, stateful=True,
            doc="Merges the checkpoints `checkpoint_prefixes` (one per shard) into one checkpoint "
                "`destination_prefix`: data files are renamed, one merged index is written and the "
                "source indexes deleted (and their directories, if empty and `delete_old_dirs`).")
register_op("ShardedFilename", inputs=["basename: string", "shard: int32", "num_shards: int32"],
            outputs=["filename: string"], shape_fn=_sharded_filename_shape,
            doc="Returns the shard file name `<basename>-<shard>-of-<num_shards>` (five digits each).")


def _string_const(value, name):
    """A string tensor from a Tensor, a Python value or a list mixing both (packed)."""
    if isinstance(value, _ops.Tensor) or hasattr(value, "_as_graph_element"):
        return _ops.convert_to_tensor(value, dtype=_dtypes.string)
    return _ops.convert_to_tensor(value, dtype=_dtypes.string, name=name)


def save_v2(prefix, tensor_names, shape_and_slices, tensors, name=None):
    """Saves tensors in the kernflow checkpoint format (TF's `raw_ops.SaveV2`).

    Args:
        prefix: scalar string tensor (or str): the checkpoint prefix.
        tensor_names: 1-D strings, the names of `tensors` in the checkpoint.
        shape_and_slices: 1-D strings, one per tensor; must be "" (whole tensors).
        tensors: list of tensors (Variables save their current value).
        name: op name (default "SaveV2").

    Returns:
        The SaveV2 Operation (it has no outputs).
    """
    with _ops.name_scope(name, "SaveV2", []) as scope:
        p = _string_const(prefix, "prefix")
        n = _string_const(tensor_names, "tensor_names")
        s = _string_const(shape_and_slices, "shape_and_slices")
        ts = [t._ref() if hasattr(t, "_ref") and not isinstance(t, _ops.Tensor) else t
              for t in tensors]
        ts = [_ops.convert_to_tensor(t) for t in ts]
        return apply_op("SaveV2", [p, n, s, ts], {"dtypes": [t.dtype.base_dtype for t in ts]},
                        name=scope)


def restore_v2(prefix, tensor_names, shape_and_slices, dtypes, name=None):
    """Restores tensors from a checkpoint (TF's `raw_ops.RestoreV2`).

    Args:
        prefix: scalar string tensor (or str): the checkpoint prefix.
        tensor_names: 1-D strings naming the tensors to read.
        shape_and_slices: 1-D strings, "" for whole tensors (or TF slice specs).
        dtypes: list of DTypes, one per tensor (must match the stored dtypes).
        name: op name (default "RestoreV2").

    Returns:
        A list of tensors, one per name.
    """
    with _ops.name_scope(name, "RestoreV2", []) as scope:
        p = _string_const(prefix, "prefix")
        n = _string_const(tensor_names, "tensor_names")
        s = _string_const(shape_and_slices, "shape_and_slices")
        dts = [_dtypes.as_dtype(d).base_dtype for d in dtypes]
        return list(apply_op("RestoreV2", [p, n, s], {"dtypes": dts}, name=scope).outputs)


def merge_v2_checkpoints(checkpoint_prefixes, destination_prefix, delete_old_dirs=True,
                         allow_missing_files=False, name=None):
    """Merges per-shard checkpoints into one (TF's `raw_ops.MergeV2Checkpoints`).

    Returns:
        The MergeV2Checkpoints Operation.
    """
    with _ops.name_scope(name, "MergeV2Checkpoints", []) as scope:
        srcs = _string_const(checkpoint_prefixes, "checkpoint_prefixes")
        dest = _string_const(destination_prefix, "destination_prefix")
        return apply_op("MergeV2Checkpoints", [srcs, dest],
                        {"delete_old_dirs": delete_old_dirs, "allow_missing_files": allow_missing_files},
                        name=scope)


def sharded_filename(basename, shard, num_shards, name=None):
    """The file name ``<basename>-<shard:05d>-of-<num_shards:05d>`` as a string tensor."""
    return apply_op("ShardedFilename", [basename, shard, num_shards], {}, name=name).outputs[0]

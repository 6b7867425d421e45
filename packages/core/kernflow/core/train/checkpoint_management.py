"""The `checkpoint` state file of a directory and checkpoint-path helpers (TF1's
checkpoint_management): `latest_checkpoint`, `get_checkpoint_state`, `update_checkpoint_state`...

The state file is a `CheckpointState` protobuf in text format, replaced atomically (temporary
file, fsync, rename), so a reader sees either the old or the new state, never a torn one.

Example::

    kf.train.latest_checkpoint("/tmp/run")     # "/tmp/run/model-1000", or None
"""

from __future__ import annotations

import logging
import os
import re

from google.protobuf import text_format

from kernflow.core.protobuf import saver_pb2
from kernflow.core.train import checkpoint_format as _cf

__all__ = ["latest_checkpoint", "get_checkpoint_state", "update_checkpoint_state",
           "generate_checkpoint_state_proto", "checkpoint_exists", "get_checkpoint_mtimes",
           "remove_checkpoint", "meta_graph_filename", "CheckpointState"]

_log = logging.getLogger(__name__)

CheckpointState = saver_pb2.CheckpointState


def _fspath(p):
    if isinstance(p, bytes):
        return p.decode("utf-8")
    return os.fspath(p)


def _state_filename(save_dir, latest_filename=None) -> str:
    return os.path.join(save_dir, latest_filename or "checkpoint")


def generate_checkpoint_state_proto(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                                    all_model_checkpoint_timestamps=None,
                                    last_preserved_timestamp=None):
    """Builds a `CheckpointState` (paths made relative to `save_dir` when it is relative).

    `model_checkpoint_path` is appended to `all_model_checkpoint_paths` when it is not its last
    element.

    Raises:
        ValueError: if timestamps are given but their count differs from the paths'.
    """
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    if all_model_checkpoint_timestamps and len(all_model_checkpoint_timestamps) != len(paths):
        raise ValueError(f"Checkpoint timestamps, if provided, must match checkpoint paths (got "
                         f"paths {paths} and timestamps {all_model_checkpoint_timestamps})")
    save_dir = _fspath(save_dir)
    if not os.path.isabs(save_dir):
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        paths = [p if os.path.isabs(p) else os.path.relpath(p, save_dir) for p in paths]
    state = CheckpointState(model_checkpoint_path=model_checkpoint_path,
                            all_model_checkpoint_paths=paths)
    if all_model_checkpoint_timestamps:
        state.all_model_checkpoint_timestamps.extend(all_model_checkpoint_timestamps)
    if last_preserved_timestamp is not None:
        state.last_preserved_timestamp = last_preserved_timestamp
    return state


def update_checkpoint_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                            latest_filename=None, all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp=None):
    """Atomically writes the `checkpoint` state file of `save_dir`.

    Args:
        save_dir: the directory of the state file.
        model_checkpoint_path: the latest checkpoint prefix.
        all_model_checkpoint_paths: every kept prefix, oldest first.
        latest_filename: the state file's name (default "checkpoint").

    Raises:
        RuntimeError: if the state file would overwrite the checkpoint itself.
    """
    update_checkpoint_state_internal(save_dir, model_checkpoint_path, all_model_checkpoint_paths,
                                     latest_filename, save_relative_paths=False,
                                     all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
                                     last_preserved_timestamp=last_preserved_timestamp)


def update_checkpoint_state_internal(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                                     latest_filename=None, save_relative_paths=False,
                                     all_model_checkpoint_timestamps=None,
                                     last_preserved_timestamp=None):
    """`update_checkpoint_state`, optionally storing paths relative to `save_dir`."""
    save_dir = _fspath(save_dir)
    model_checkpoint_path = _fspath(model_checkpoint_path)
    paths = [_fspath(p) for p in (all_model_checkpoint_paths or [])]
    state_file = _state_filename(save_dir, latest_filename)
    if save_relative_paths:
        def rel(p):
            return os.path.relpath(p, save_dir) if os.path.isabs(p) else p
        state = generate_checkpoint_state_proto(save_dir, rel(model_checkpoint_path),
                                                [rel(p) for p in paths],
                                                all_model_checkpoint_timestamps,
                                                last_preserved_timestamp)
    else:
        state = generate_checkpoint_state_proto(save_dir, model_checkpoint_path, paths,
                                                all_model_checkpoint_timestamps,
                                                last_preserved_timestamp)
    if state_file == state.model_checkpoint_path:
        raise RuntimeError(f"Save path '{model_checkpoint_path}' conflicts with path used for "
                           f"checkpoint state.  Please use a different save path.")
    try:
        _cf.atomic_write_bytes(state_file, text_format.MessageToString(state).encode("utf-8"))
    except OSError as e:
        raise _cf.os_error(e, f"Failed to write checkpoint state {state_file}") from e


def get_checkpoint_state(checkpoint_dir, latest_filename=None):
    """Reads the `checkpoint` state file of `checkpoint_dir`.

    Relative paths in it are joined to `checkpoint_dir`.

    Returns:
        A `CheckpointState` (``model_checkpoint_path``, ``all_model_checkpoint_paths``), or None if
        there is no state file or it does not parse.

    Raises:
        ValueError: if the file parses but names no checkpoint.
    """
    checkpoint_dir = _fspath(checkpoint_dir)
    path = _state_filename(checkpoint_dir, latest_filename)
    try:
        with open(path, "rb") as f:
            content = f.read().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        _log.warning("%s: %s", type(e).__name__, e)
        return None
    state = CheckpointState()
    try:
        text_format.Merge(content, state)
    except text_format.ParseError as e:
        _log.warning("%s: %s", type(e).__name__, e)
        _log.warning("%s: Checkpoint ignored", path)
        return None
    if not state.model_checkpoint_path:
        raise ValueError("Invalid checkpoint state loaded from " + checkpoint_dir)
    if not os.path.isabs(state.model_checkpoint_path):
        state.model_checkpoint_path = os.path.join(checkpoint_dir, state.model_checkpoint_path)
    for i, p in enumerate(state.all_model_checkpoint_paths):
        if not os.path.isabs(p):
            state.all_model_checkpoint_paths[i] = os.path.join(checkpoint_dir, p)
    return state


def checkpoint_exists(checkpoint_prefix) -> bool:
    """True if a complete checkpoint with this prefix exists (its index file, renamed into place
    last, does)."""
    return _cf.bundle_exists(_fspath(checkpoint_prefix))


checkpoint_exists_internal = checkpoint_exists


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The prefix of the latest checkpoint in `checkpoint_dir`, or None.

    Uses the `checkpoint` state file; returns None when it is missing or names a checkpoint that
    does not exist (anymore).
    """
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state and state.model_checkpoint_path:
        if checkpoint_exists(state.model_checkpoint_path):
            return state.model_checkpoint_path
        _log.error("Couldn't match files for checkpoint %s", state.model_checkpoint_path)
    return None


def get_checkpoint_mtimes(checkpoint_prefixes):
    """The modification times (seconds since the epoch) of the existing checkpoints' indexes."""
    out = []
    for p in checkpoint_prefixes:
        try:
            out.append(os.path.getmtime(_cf.index_filename(_fspath(p))))
        except OSError:
            continue
    return out


def meta_graph_filename(checkpoint_filename, meta_graph_suffix="meta") -> str:
    """``<checkpoint prefix>.<suffix>`` (a trailing "-?????-of-?????" shard spec is dropped)."""
    basename = re.sub(r"-[\d\?]+-of-\d+$", "", _fspath(checkpoint_filename))
    return f"{basename}.{meta_graph_suffix}"


def remove_checkpoint(checkpoint_prefix, checkpoint_format_version=saver_pb2.SaverDef.V2,
                      meta_graph_suffix="meta") -> None:
    """Deletes a checkpoint: its index first (it stops existing at once), data files, meta graph."""
    prefix = _fspath(checkpoint_prefix)
    _cf.delete_bundle(prefix)
    try:
        os.remove(meta_graph_filename(prefix, meta_graph_suffix))
    except OSError:
        pass
    if checkpoint_format_version == saver_pb2.SaverDef.V1:
        try:
            os.remove(prefix)
        except OSError:
            pass

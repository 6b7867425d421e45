"""`kf.train.Saver` (TF1's tf.compat.v1.train.Saver) and the checkpoint helpers.

A Saver adds SaveV2/RestoreV2 ops for a set of variables to the graph once (under the name scope
"save"); `save` feeds the checkpoint prefix to ``save/Const`` and fetches the save op's output,
`restore` runs ``save/restore_all``. Checkpoint files are described in docs/checkpoint_format.md;
the `checkpoint` state file of the directory lists the kept checkpoints.

Example::

    w = kf.Variable(np.zeros((2, 3), np.float32), name="w")
    saver = kf.train.Saver(max_to_keep=3)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        path = saver.save(sess, "/tmp/run/model", global_step=100)   # "/tmp/run/model-100"
    with kf.Session() as sess:
        saver.restore(sess, kf.train.latest_checkpoint("/tmp/run"))

Every write is atomic (temporary files, fsync, rename), and old checkpoints are deleted only after
the new checkpoint and the state file are complete, so a process killed at any moment leaves
`latest_checkpoint` pointing at a complete, consistent checkpoint.
"""

from __future__ import annotations

import importlib
import logging
import os
import time

import numpy as np

from kernflow.core import telemetry
from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops
from kernflow.core.protobuf import saver_pb2
from kernflow.core.train import checkpoint_management as _cm
from kernflow.core.train.checkpoint_management import (CheckpointState, checkpoint_exists,
                                                        generate_checkpoint_state_proto,
                                                        get_checkpoint_mtimes, get_checkpoint_state,
                                                        latest_checkpoint, meta_graph_filename,
                                                        remove_checkpoint, update_checkpoint_state)
from kernflow.core.train.checkpoint_utils import (CheckpointReader, NewCheckpointReader,
                                                  list_variables, load_checkpoint, load_variable)
from kernflow.core.train.saver_builder import (SAVEABLE_OBJECTS, BaseSaverBuilder,
                                               BulkSaverBuilder, SaveableObject, SaveSpec)

# The names tf.compat.v1.train has (kf.train re-exports them); CheckpointReader, CheckpointState,
# the builders and SaveableObject stay importable from this module.
__all__ = ["Saver", "SaverDef", "latest_checkpoint", "get_checkpoint_state", "update_checkpoint_state",
           "generate_checkpoint_state_proto", "checkpoint_exists", "get_checkpoint_mtimes",
           "remove_checkpoint", "load_checkpoint", "list_variables", "load_variable",
           "NewCheckpointReader"]

_log = logging.getLogger(__name__)

SaverDef = saver_pb2.SaverDef


def _as_text(s) -> str:
    if isinstance(s, bytes):
        return s.decode("utf-8")
    if isinstance(s, np.ndarray):
        return _as_text(s.reshape(-1)[0])
    return os.fspath(s)


def _prepend_name_scope(name: str, scope: str) -> str:
    if not scope:
        return name
    return f"{scope.rstrip('/')}/{name}"


def _strip_name_scope(name: str, scope: str) -> str:
    prefix = scope.rstrip("/") + "/"
    return name[len(prefix):] if name.startswith(prefix) else name


def _all_saveable_objects():
    return (_ops.get_collection(_ops.GraphKeys.GLOBAL_VARIABLES)
            + _ops.get_collection(SAVEABLE_OBJECTS))


class Saver:
    """Saves and restores variables (TF1's `tf.compat.v1.train.Saver`).

    Args:
        var_list: None (every global variable and saveable object), a list of variables (each saved
            under its op name) or a dict {checkpoint name: variable}.
        reshape: restore into variables of a different shape (same number of elements).
        sharded: one SaveV2 per device, merged into one checkpoint.
        max_to_keep: how many recent checkpoints to keep (None or 0: keep all, track none).
        keep_checkpoint_every_n_hours: additionally keep one checkpoint per this many hours.
        name: the name scope of the ops (default "save").
        restore_sequentially: restore variables one after the other (less memory).
        saver_def: use the ops of this SaverDef instead of building new ones.
        builder: a `BaseSaverBuilder` (default `BulkSaverBuilder`).
        defer_build: build the ops only when `build()` is called.
        allow_empty: with no variables, make save/restore no-ops instead of raising.
        write_version: SaverDef.V2 (V1 is written as V2).
        pad_step_number: format global steps as 8 digits ("model-00000100").
        save_relative_paths: store paths relative to the directory in the state file.
        filename: the default prefix when none is fed.

    Raises:
        ValueError: no variables to save (and not allow_empty), duplicate names, or `var_list`
            given together with `defer_build`.
    """

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
                 saver_def=None, builder=None, defer_build=False, allow_empty=False,
                 write_version=saver_pb2.SaverDef.V2, pad_step_number=False,
                 save_relative_paths=False, filename=None):
        if var_list is not None and not isinstance(var_list, (list, tuple, set, dict)):
            raise TypeError(f"Variables to save should be passed in a dict or a list: {var_list}")
        if defer_build and var_list:
            raise ValueError("If `var_list` is provided then build cannot be deferred. Either set "
                             "defer_build=False or var_list=None.")
        if write_version == saver_pb2.SaverDef.V1:
            _log.warning("kernflow writes only the V2 checkpoint format; write_version=V1 ignored.")
            write_version = saver_pb2.SaverDef.V2
        self._var_list = var_list
        self._reshape = reshape
        self._sharded = sharded
        self._max_to_keep = max_to_keep
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._restore_sequentially = restore_sequentially
        self.saver_def = saver_def
        self._builder = builder
        self._is_built = False
        self._allow_empty = allow_empty
        self._is_empty = None
        self._write_version = write_version
        self._pad_step_number = pad_step_number
        self._filename = filename
        self._last_checkpoints = []
        self._checkpoints_to_be_deleted = []
        self._last_preserved_timestamp = None
        self._save_relative_paths = save_relative_paths
        self._next_checkpoint_time = time.time() + keep_checkpoint_every_n_hours * 3600
        if not defer_build:
            self.build()
        if self.saver_def:
            self._check_saver_def()
            self._write_version = self.saver_def.version

    # ------------------------------------------------------------------ building
    def build(self):
        """Adds the save and restore ops to the graph (once)."""
        self._build(self._filename, build_save=True, build_restore=True)

    def _build(self, checkpoint_path, build_save, build_restore):
        if self._is_built:
            return
        self._is_built = True
        if not self.saver_def:
            if self._builder is None:
                self._builder = BulkSaverBuilder(self._write_version)
            if self._var_list is None:
                self._var_list = _all_saveable_objects()
            if not self._var_list:
                if self._allow_empty:
                    self._is_empty = True
                    return
                raise ValueError("No variables to save")
            self._is_empty = False
            self.saver_def = self._builder._build_internal(
                self._var_list, reshape=self._reshape, sharded=self._sharded,
                max_to_keep=self._max_to_keep,
                keep_checkpoint_every_n_hours=self._keep_checkpoint_every_n_hours, name=self._name,
                restore_sequentially=self._restore_sequentially, filename=checkpoint_path,
                build_save=build_save, build_restore=build_restore)
        elif self._name:
            # `name` doubles as the import scope of a given SaverDef, as in TF.
            d = self.saver_def
            d.filename_tensor_name = _prepend_name_scope(d.filename_tensor_name, self._name)
            d.save_tensor_name = _prepend_name_scope(d.save_tensor_name, self._name)
            d.restore_op_name = _prepend_name_scope(d.restore_op_name, self._name)
        self._check_saver_def()
        self._next_checkpoint_time = time.time() + self.saver_def.keep_checkpoint_every_n_hours * 3600

    def _check_saver_def(self):
        if not isinstance(self.saver_def, saver_pb2.SaverDef):
            raise ValueError(f"saver_def must be a saver_pb2.SaverDef: {self.saver_def}")
        if not self.saver_def.save_tensor_name:
            raise ValueError(f"saver_def must specify the save_tensor_name: {self.saver_def}")
        if not self.saver_def.restore_op_name:
            raise ValueError(f"saver_def must specify the restore_op_name: {self.saver_def}")

    def as_saver_def(self):
        """The `SaverDef` naming this saver's tensors and ops."""
        return self.saver_def

    def to_proto(self, export_scope=None):
        """The SaverDef with `export_scope` stripped from its names (None if outside the scope)."""
        if export_scope is None:
            return self.saver_def
        d = self.saver_def
        names = (d.filename_tensor_name, d.save_tensor_name, d.restore_op_name)
        if not all(n.startswith(export_scope) for n in names):
            return None
        out = saver_pb2.SaverDef()
        out.CopyFrom(d)
        out.filename_tensor_name = _strip_name_scope(d.filename_tensor_name, export_scope)
        out.save_tensor_name = _strip_name_scope(d.save_tensor_name, export_scope)
        out.restore_op_name = _strip_name_scope(d.restore_op_name, export_scope)
        return out

    @staticmethod
    def from_proto(saver_def, import_scope=None):
        """A Saver using the ops named by `saver_def` (under `import_scope`)."""
        return Saver(saver_def=saver_def, name=import_scope)

    # ------------------------------------------------------------------ checkpoint bookkeeping
    @property
    def last_checkpoints(self):
        """The prefixes of the checkpoints this saver keeps, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints):
        """DEPRECATED in TF: sets the kept checkpoints (they never age out by time)."""
        if not isinstance(last_checkpoints, list):
            raise TypeError("last_checkpoints must be a list")
        self._last_checkpoints = [(s, np.inf) for s in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time):
        """Sets the kept checkpoints as a list of (prefix, timestamp)."""
        if not isinstance(last_checkpoints_with_time, list):
            raise TypeError("last_checkpoints_with_time must be a list")
        self._last_checkpoints = list(last_checkpoints_with_time)

    def recover_last_checkpoints(self, checkpoint_paths):
        """Takes over `checkpoint_paths` (e.g. from the state file) that still exist, with their
        modification times, so that max_to_keep also deletes them in time."""
        out = []
        for p in checkpoint_paths:
            mtime = get_checkpoint_mtimes([p])
            if mtime:
                out.append((p, mtime[0]))
        self.set_last_checkpoints_with_time(out)

    def _RecordLastCheckpoint(self, latest_save_path):  # noqa: N802 - TF name
        if not self.saver_def.max_to_keep:
            return
        self._last_checkpoints = [p for p in self._last_checkpoints if p[0] != latest_save_path]
        self._last_checkpoints.append((latest_save_path, time.time()))
        while len(self._last_checkpoints) > self.saver_def.max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _MaybeDeleteOldCheckpoints(self, meta_graph_suffix="meta"):  # noqa: N802 - TF name
        while self._checkpoints_to_be_deleted:
            path, stamp = self._checkpoints_to_be_deleted.pop(0)
            if stamp > self._next_checkpoint_time:
                self._next_checkpoint_time += self.saver_def.keep_checkpoint_every_n_hours * 3600
                self._last_preserved_timestamp = stamp
                continue
            try:
                remove_checkpoint(path, self.saver_def.version, meta_graph_suffix)
            except Exception as e:  # noqa: BLE001 - deleting old files must not fail a save
                _log.warning("Ignoring: %s", e)

    # ------------------------------------------------------------------ save / restore
    def save(self, sess, save_path, global_step=None, latest_filename=None, meta_graph_suffix="meta",
             write_meta_graph=True, write_state=True, strip_default_attrs=False,
             save_debug_info=False):
        """Saves the variables' current values; returns the checkpoint prefix written.

        Args:
            sess: the Session whose variable values are saved.
            save_path: the prefix (e.g. "/tmp/run/model"); its directory is created if missing.
            global_step: int, or a tensor/variable evaluated in `sess`; appended as "-<step>".
            latest_filename: the state file's name (default "checkpoint").
            meta_graph_suffix: extension of the meta graph file.
            write_meta_graph: also write ``<prefix>.meta`` when a meta graph exporter is installed
                (kf.train.export_meta_graph); skipped otherwise.
            write_state: update the state file and delete checkpoints beyond max_to_keep.

        Returns:
            The prefix written (str), or None for an empty saver.

        Raises:
            TypeError: `sess` is not a session.
            ValueError: bad `latest_filename`, or the parent directory cannot be used.
            RuntimeError: the saver was deferred and never built.
        """
        if not self._is_built:
            raise RuntimeError("`build()` should be called before save if defer_build==True")
        if latest_filename is None:
            latest_filename = "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = _as_text(save_path)
        if global_step is not None:
            if not isinstance(global_step, (int, np.integer)):
                global_step = int(sess.run(global_step))
            step = f"{int(global_step):08d}" if self._pad_step_number else str(int(global_step))
            checkpoint_file = f"{save_path}-{step}"
        else:
            checkpoint_file = save_path
            if os.path.basename(save_path) == latest_filename and not self._sharded:
                raise ValueError(f"'latest_filename' collides with 'save_path': '{latest_filename}' "
                                 f"and '{save_path}'")
        if not hasattr(sess, "run") or not hasattr(sess, "graph"):
            raise TypeError(f"'sess' must be a Session; {sess}")
        save_path_parent = os.path.dirname(save_path)
        model_checkpoint_path = None
        if not self._is_empty:
            try:
                with telemetry.checkpoint_timer("save"):   # kernflow.checkpoint.duration
                    model_checkpoint_path = _as_text(sess.run(
                        self.saver_def.save_tensor_name,
                        {self.saver_def.filename_tensor_name: checkpoint_file}))
                if write_state:
                    self._RecordLastCheckpoint(model_checkpoint_path)
                    paths = self.last_checkpoints
                    stamps = [t for _, t in self._last_checkpoints]
                    ok = paths and paths[-1] == model_checkpoint_path and np.all(np.isfinite(stamps))
                    _cm.update_checkpoint_state_internal(
                        save_path_parent, model_checkpoint_path, paths, latest_filename,
                        save_relative_paths=self._save_relative_paths,
                        all_model_checkpoint_timestamps=stamps if ok else None,
                        last_preserved_timestamp=self._last_preserved_timestamp)
                    self._MaybeDeleteOldCheckpoints(meta_graph_suffix=meta_graph_suffix)
            except (errors.FailedPreconditionError, errors.NotFoundError,
                    errors.PermissionDeniedError) as exc:
                if save_path_parent and not os.path.isdir(save_path_parent):
                    raise ValueError(f"Parent directory of {save_path} doesn't exist, can't "
                                     f"save.") from exc
                raise
        if write_meta_graph:
            meta_file = meta_graph_filename(checkpoint_file, meta_graph_suffix)
            if _meta_graph_exporter() is not None:
                with sess.graph.as_default():
                    self.export_meta_graph(meta_file, strip_default_attrs=strip_default_attrs,
                                           save_debug_info=save_debug_info)
        return None if self._is_empty else model_checkpoint_path

    def restore(self, sess, save_path):
        """Restores every variable of this saver from the checkpoint `save_path`.

        Raises:
            ValueError: `save_path` is None or not an existing checkpoint.
            NotFoundError: a variable is missing from the checkpoint (the message says so).
            InvalidArgumentError: a shape or dtype differs between graph and checkpoint.
            DataLossError: the checkpoint files are truncated or corrupted.
        """
        if self._is_empty:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        prefix = _as_text(save_path)
        if not checkpoint_exists(prefix):
            raise ValueError("The passed save_path is not a valid checkpoint: " + prefix)
        _log.info("Restoring parameters from %s", prefix)
        try:
            with telemetry.checkpoint_timer("restore"):   # kernflow.checkpoint.duration
                sess.run(self.saver_def.restore_op_name, {self.saver_def.filename_tensor_name: prefix})
        except errors.NotFoundError as err:
            raise _wrap_restore_error(err, "a Variable name or other graph key that is missing") \
                from err
        except errors.InvalidArgumentError as err:
            raise _wrap_restore_error(err, "a mismatch between the current graph and the graph") \
                from err

    def export_meta_graph(self, filename=None, collection_list=None, as_text=False,
                          export_scope=None, clear_devices=False, clear_extraneous_savers=False,
                          strip_default_attrs=False, save_debug_info=False):
        """Writes a MetaGraphDef holding this saver's SaverDef (needs kf.train.export_meta_graph).

        Raises:
            NotImplementedError: if no meta graph exporter is installed.
        """
        export = _meta_graph_exporter()
        if export is None:
            raise NotImplementedError("Saver.export_meta_graph needs kf.train.export_meta_graph, "
                                      "which this installation does not provide")
        return export(filename=filename, graph_def=_ops.get_default_graph().as_graph_def(add_shapes=True),
                      saver_def=self.saver_def, collection_list=collection_list, as_text=as_text,
                      export_scope=export_scope, clear_devices=clear_devices,
                      clear_extraneous_savers=clear_extraneous_savers,
                      strip_default_attrs=strip_default_attrs, save_debug_info=save_debug_info)


def _meta_graph_exporter():
    """kf.train.export_meta_graph when some module provides it, else None."""
    try:
        train = importlib.import_module("kernflow.core.train")
    except ImportError:
        return None
    return getattr(train, "export_meta_graph", None)


def _wrap_restore_error(err, what):
    msg = (f"Restoring from checkpoint failed. This is most likely due to {what} from the "
           f"checkpoint. Please ensure that you have not altered the graph expected based on the "
           f"checkpoint. Original error:\n\n{err.message}")
    return type(err)(err.node_def, err.op, msg)

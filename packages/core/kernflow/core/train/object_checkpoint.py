"""`kf.train.Checkpoint`: object-based checkpoints in graph mode (TF1's
tf.compat.v1.train.Checkpoint), and `kf.train.CheckpointOptions`.

A Checkpoint tracks the objects given to it as keyword arguments (or set later as public
attributes) and, recursively, their dependencies (`object_graph` says what counts). A save writes
each value under its *object path* rather than its graph name::

    model/w/.ATTRIBUTES/VARIABLE_VALUE
    model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE
    optimizer/beta1_power/.ATTRIBUTES/VARIABLE_VALUE
    save_counter/.ATTRIBUTES/VARIABLE_VALUE
    _CHECKPOINTABLE_OBJECT_GRAPH          (a serialized TrackableObjectGraph)

through SaveV2, in the format of docs/checkpoint_format.md, so the same program, rebuilt in a new
graph with other variable names, restores by structure.

Example::

    ckpt = kf.train.Checkpoint(model=model, optimizer=opt)
    status = ckpt.restore(kf.train.latest_checkpoint("/tmp/run"))   # None: nothing to restore
    train_op = opt.minimize(loss)                 # slots created after restore() are matched too
    with kf.Session() as sess:
        status.initialize_or_restore(sess)
        sess.run(train_op)
        ckpt.save("/tmp/run/ckpt", session=sess)  # "/tmp/run/ckpt-1"

Invariants:

* Every write goes through SaveV2 (temporary files, fsync, rename) and the `checkpoint` state
  file is replaced atomically after it: no checkpoint is ever half-written, and the state file
  only names complete checkpoints.
* Graph mode restores lazily, as TF's does: `restore()` reads the saved object graph; matching it
  against the live objects happens afresh in each assertion and in `run_restore_ops` /
  `initialize_or_restore`, so objects created after `restore()` (an optimizer's slots, a layer's
  weights) are restored when those run. An object created after the last of those calls is not
  restored until they run again (TF's eager restore-on-creation needs eager execution).
* Save and restore ops are built once per set of (key, variable) and cached; the object graph is
  fed, not baked into the graph.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from kernflow.core import telemetry
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops
from kernflow.core.ops import array_ops
from kernflow.core.protobuf import trackable_object_graph_pb2 as _pb
from kernflow.core.train import checkpoint_management as _cm
from kernflow.core.train import object_graph as _og
from kernflow.core.train.checkpoint_utils import NewCheckpointReader
from kernflow.core.train.saver_builder import (BulkSaverBuilder, SaveableObject, SaveSpec,
                                               validate_and_slice_inputs)

__all__ = ["Checkpoint", "CheckpointOptions"]

_log = logging.getLogger(__name__)


class CheckpointOptions:
    """Options of `Checkpoint.save`/`write`/`restore` and `CheckpointManager.save`
    (TF's tf.train.CheckpointOptions).

    Args:
        experimental_io_device: the device the SaveV2/RestoreV2 ops are placed on (e.g.
            "/job:localhost"), so files are read and written by that task; None (default) places
            them as a Saver does. Ops built for one device are cached apart from another's.
    """

    __slots__ = ("experimental_io_device",)

    def __init__(self, experimental_io_device=None):
        self.experimental_io_device = experimental_io_device

    def __repr__(self):
        return f"CheckpointOptions(experimental_io_device={self.experimental_io_device!r})"


def _io_device(options):
    return options.experimental_io_device if options is not None else None


def _session(session, what):
    from kernflow.core.client import session as _session_mod
    s = session or _session_mod.get_default_session()
    if s is None:
        raise ValueError(f"{what} needs a session when graph building: pass session= or call it "
                         f"inside `with sess.as_default():`")
    return s


def _as_text(value) -> str:
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0]
    return value.decode("utf-8") if isinstance(value, bytes) else os.fspath(value)


def _initializers(var):
    parts = list(var) if not hasattr(var, "initializer") else [var]
    return [p.initializer for p in parts]


class _ObjectGraphSaveable(SaveableObject):
    """The fed string tensor holding the serialized object graph (saved, never assigned back)."""

    def __init__(self, tensor):
        super().__init__(tensor, [SaveSpec(tensor, "", _og.OBJECT_GRAPH_KEY)], _og.OBJECT_GRAPH_KEY)

    def restore(self, restored_tensors, restored_shapes):
        raise NotImplementedError("the object graph is read with a CheckpointReader")


class _RestoreOps:
    """RestoreV2 + assign ops reading one checkpoint, built on demand and cached per variable.

    Args:
        save_path: the checkpoint prefix (a constant in the ops).
        io_device: where the RestoreV2 runs (None: the CPU, as a Saver's).
    """

    def __init__(self, save_path, io_device):
        self._save_path = save_path
        self._io_device = io_device
        self._built: dict[int, tuple] = {}     # id(variable) -> (variable, group op)

    def run(self, sess, keyed):
        """Restores `keyed` ({checkpoint key: variable}) in `sess`."""
        new = {k: v for k, v in keyed.items() if id(v) not in self._built}
        if new:
            with sess.graph.as_default(), _ops.name_scope("restore"), _ops.device(self._io_device):
                filename = array_ops.constant(self._save_path, dtype=_dtypes.string, name="filename")
                op = BulkSaverBuilder()._AddRestoreOps(filename, validate_and_slice_inputs(new),
                                                       False, False, name="restore_all")
            self._built.update({id(v): (v, op) for v in new.values()})
        ops = {id(self._built[id(v)][1]): self._built[id(v)][1] for v in keyed.values()}
        if ops:
            with telemetry.checkpoint_timer("restore"):   # kernflow.checkpoint.duration
                sess.run(list(ops.values()))


class Checkpoint:
    """Groups trackable objects, saving and restoring them by object path (TF1's
    tf.compat.v1.train.Checkpoint, graph mode).

    Args:
        **kwargs: the objects to track, by name: variables, optimizers, `kf.Module`s, layers, other
            Checkpoints, lists/dicts/plain Python objects holding them (see `object_graph`).

    Attributes set later on the Checkpoint (names not starting with "_") are tracked too.

    Raises:
        ValueError: a keyword names no trackable object, or is "save_counter".
    """

    def __init__(self, **kwargs):
        self._save_counter = None
        self._save_assign = None
        self._save_ops: dict = {}
        for name, value in sorted(kwargs.items()):
            if name == "save_counter":
                raise ValueError("'save_counter' is the Checkpoint's own counter and cannot be "
                                 "passed as an object to track")
            if not (_og.is_trackable(value) or _og.is_plain_object(value)
                    or isinstance(value, (list, tuple, dict))):
                raise ValueError(f"`Checkpoint` was expecting a trackable object (a variable, "
                                 f"optimizer, Module, layer, Checkpoint, or a container or plain "
                                 f"object holding them) for '{name}', got {value!r}.")
            setattr(self, name, value)

    def _kf_checkpoint_children(self):
        out = sorted((k, v) for k, v in vars(self).items() if not k.startswith("_"))
        if self._save_counter is not None:
            out.append(("save_counter", self._save_counter))
        return out

    # ------------------------------------------------------------------ the counter
    @property
    def save_counter(self):
        """An int64 variable counting `save()` calls and numbering their checkpoints (created, in
        the default graph, on first use)."""
        self._maybe_create_save_counter()
        return self._save_counter

    def _maybe_create_save_counter(self):
        if self._save_counter is None:
            from kernflow.core.ops.variables import Variable
            with _ops.device("/cpu:0"), _ops.name_scope(None):
                self._save_counter = Variable(np.int64(0), name="save_counter", trainable=False)
        return self._save_counter

    def _increment_save_counter(self, sess) -> int:
        """Adds 1 to save_counter in `sess` (initializing a counter created just now)."""
        created = self._save_counter is None
        with sess.graph.as_default():
            counter = self._maybe_create_save_counter()
            if created:
                sess.run(counter.initializer)
            if self._save_assign is None:
                with _ops.colocate_with(counter):
                    self._save_assign = counter.assign_add(1)
        return int(sess.run(self._save_assign))

    # ------------------------------------------------------------------ save
    def save(self, file_prefix, session=None, options=None):
        """Saves a numbered checkpoint and records it in the directory's `checkpoint` state file.

        Increments `save_counter`, writes ``<file_prefix>-<save_counter>`` and makes it the
        directory's latest checkpoint (the state file lists only it, with a path relative to the
        directory, as TF's does; use `CheckpointManager` to keep several).

        Args:
            file_prefix: e.g. "/tmp/run/ckpt"; its directory is created if missing.
            session: the session holding the values (default: the default session).
            options: a `CheckpointOptions`.

        Returns:
            The prefix written.
        """
        sess = _session(session, "Checkpoint.save")
        number = self._increment_save_counter(sess)
        path = self.write(f"{_as_text(file_prefix)}-{number}", session=sess, options=options)
        _cm.update_checkpoint_state_internal(os.path.dirname(path), path, [path],
                                             save_relative_paths=True)
        return path

    def write(self, file_prefix, session=None, options=None):
        """Writes a checkpoint at `file_prefix` exactly: no counter, no state file.

        Returns:
            `file_prefix`.

        Raises:
            ValueError: no session.
            errors.OpError: writing failed (nothing is left half-written).
        """
        sess = _session(session, "Checkpoint.write")
        view = _og.ObjectGraphView(self)
        filename, graph_tensor, save = self._save_op(sess.graph, view.saveables(),
                                                     _io_device(options))
        feed = {filename: _as_text(file_prefix), graph_tensor: view.to_proto().SerializeToString()}
        with telemetry.checkpoint_timer("save"):   # kernflow.checkpoint.duration
            return _as_text(sess.run(save, feed))

    def _save_op(self, graph, saveables, io_device):
        key = (id(graph), io_device, tuple((k, id(v)) for k, v in sorted(saveables.items())))
        cached = self._save_ops.get(key)
        if cached is None:
            with graph.as_default(), _ops.name_scope("save"), _ops.device(io_device):
                filename = array_ops.placeholder(_dtypes.string, shape=(), name="filename")
                graph_tensor = array_ops.placeholder(_dtypes.string, shape=(), name="object_graph")
                items = dict(saveables)
                items[_og.OBJECT_GRAPH_KEY] = _ObjectGraphSaveable(graph_tensor)
                save = BulkSaverBuilder()._AddSaveOps(filename, validate_and_slice_inputs(items))
            # (the variables are kept alive with the ops, so the ids in the key stay theirs)
            cached = self._save_ops[key] = (filename, graph_tensor, save, list(saveables.values()))
        return cached[:3]

    # ------------------------------------------------------------------ restore
    def restore(self, save_path, options=None):
        """Prepares restoring the tracked objects from `save_path`; returns a status.

        Nothing is assigned until the status's `run_restore_ops` or `initialize_or_restore` runs
        in a session. `save_counter` is created now (so those calls cover it).

        Args:
            save_path: a checkpoint prefix, or None (the status then only initializes).
            options: a `CheckpointOptions`.

        Returns:
            `CheckpointLoadStatus` for an object-based checkpoint, `NameBasedSaverStatus` for one
            written by a `kf.train.Saver` (matched by variable names, as TF does), or
            `InitializationOnlyStatus` when `save_path` is None.

        Raises:
            NotFoundError: no checkpoint at `save_path`.
            DataLossError: its files are corrupted.
        """
        self._maybe_create_save_counter()
        if save_path is None:
            return InitializationOnlyStatus(self)
        save_path = _as_text(save_path)
        reader = NewCheckpointReader(save_path)
        if not reader.has_tensor(_og.OBJECT_GRAPH_KEY):
            return NameBasedSaverStatus(self, save_path, reader, options)
        raw = reader.get_tensor(_og.OBJECT_GRAPH_KEY)
        raw = np.asarray(raw).reshape(-1)[0]
        saved = _pb.TrackableObjectGraph.FromString(raw if isinstance(raw, bytes) else raw.encode())
        return CheckpointLoadStatus(self, save_path, saved, options)

    def __repr__(self):
        names = [k for k, _ in self._kf_checkpoint_children()]
        return f"<kf.train.Checkpoint tracking {names}>"


# ---------------------------------------------------------------------------------- statuses
class _LoadStatus:
    """What `Checkpoint.restore` returns; every method returns the status (chainable)."""

    def __init__(self, checkpoint):
        self._root = checkpoint

    def _tracked_variables(self):
        view = _og.ObjectGraphView(self._root)
        return view, [view.nodes[i] for i in view.variable_nodes()]

    def expect_partial(self):
        """Silences the warning about checkpointed values left unused."""
        return self


class InitializationOnlyStatus(_LoadStatus):
    """`restore(None)`: nothing to restore; `initialize_or_restore` initializes every tracked
    variable (TF's status of the same name). The assertions raise AssertionError."""

    def _nothing(self):
        raise AssertionError("No checkpoint specified (save_path=None); nothing is being restored.")

    def assert_consumed(self):
        self._nothing()

    assert_existing_objects_matched = assert_nontrivial_match = assert_consumed

    def run_restore_ops(self, session=None):
        """Nothing to restore."""
        return self

    def initialize_or_restore(self, session=None):
        """Runs the initializers of the tracked variables (of those existing now)."""
        sess = _session(session, "initialize_or_restore")
        _, variables = self._tracked_variables()
        sess.run([op for v in variables for op in _initializers(v)])
        return self


def _value_key(node):
    for attr in node.attributes:
        if attr.name == _og.VARIABLE_VALUE:
            return attr.checkpoint_key
    return None


class CheckpointLoadStatus(_LoadStatus):
    """Restoring an object-based checkpoint (TF's CheckpointLoadStatus, graph mode).

    Each call matches the saved object graph against the objects reachable now (see the module
    invariants); the assertions raise AssertionError naming what does not match.
    """

    def __init__(self, checkpoint, save_path, saved, options):
        super().__init__(checkpoint)
        self._save_path = save_path
        self._saved = saved
        self._names = _og.saved_node_names(saved)
        self._ops = _RestoreOps(save_path, _io_device(options))
        self._partial = False

    def _bind(self):
        bound = _og.match_saved_graph(self._saved, self._root)
        keyed = {}
        for nid, obj in bound.items():
            key = _value_key(self._saved.nodes[nid])
            if key is not None and _og.is_variable(obj):
                keyed[key] = obj
        return bound, keyed

    def _unresolved(self, bound):
        return [self._names.get(n, f"node {n}") for n in range(len(self._saved.nodes)) if n not in bound]

    def _unused(self, bound):
        return [self._names.get(n, f"node {n}") for n, obj in bound.items()
                if _value_key(self._saved.nodes[n]) is not None and not _og.is_variable(obj)]

    def assert_consumed(self):
        """Asserts that every object and value of the checkpoint was matched, and every tracked
        object with a value has one in the checkpoint."""
        self.assert_existing_objects_matched()
        bound, _ = self._bind()
        unresolved = self._unresolved(bound)
        if unresolved:
            raise AssertionError(f"Unresolved objects in checkpoint {self._save_path} (nothing in "
                                 f"the program matches them): {unresolved}")
        unused = self._unused(bound)
        if unused:
            raise AssertionError(f"Unused attributes in these objects (the attributes exist in the "
                                 f"checkpoint but the matching objects hold no variable): {unused}")
        return self

    def assert_existing_objects_matched(self):
        """Asserts that every tracked variable existing now has a value in the checkpoint
        (the root's save_counter excepted: a `write()` before any `save()` has none)."""
        _, keyed = self._bind()
        restored = {id(v) for v in keyed.values()}
        view, _ = self._tracked_variables()
        missing = [f"{view.prefixes[i]} ({_og.full_name(view.nodes[i])})"
                   for i in view.variable_nodes()
                   if id(view.nodes[i]) not in restored
                   and view.nodes[i] is not self._root._save_counter]
        if missing:
            raise AssertionError(f"Some Python objects were not bound to checkpointed values, "
                                 f"likely due to changes in the Python program: {missing}")
        return self

    def assert_nontrivial_match(self):
        """Asserts that something besides the root (and its save_counter) matched."""
        bound, _ = self._bind()
        if any(n != 0 and obj is not self._root._save_counter for n, obj in bound.items()):
            return self
        view, variables = self._tracked_variables()
        others = [_og.full_name(v) for v in variables if v is not self._root._save_counter]
        if others:
            raise AssertionError(f"Nothing except the root object matched a checkpointed value. "
                                 f"Typically this means that the checkpoint does not match the "
                                 f"Python program. These objects have no matching checkpointed "
                                 f"value: {others}")
        raise AssertionError(f"Nothing to load. No dependencies have been added to {self._root} "
                             f"yet.")

    def expect_partial(self):
        self._partial = True
        return self

    def run_restore_ops(self, session=None):
        """Assigns the checkpointed values to the variables matched now.

        Raises:
            InvalidArgumentError: a value's dtype or shape differs from its variable's.
        """
        sess = _session(session, "run_restore_ops")
        bound, keyed = self._bind()
        self._ops.run(sess, keyed)
        if not self._partial:
            left = self._unresolved(bound) + self._unused(bound)
            if left:
                _log.warning("Checkpoint %s: values not restored (nothing in the program matches "
                             "them yet): %s. Call expect_partial() on the status to silence this.",
                             self._save_path, left)
        return self

    def initialize_or_restore(self, session=None):
        """Restores the matched variables and initializes the other tracked ones."""
        sess = _session(session, "initialize_or_restore")
        self.run_restore_ops(sess)
        _, keyed = self._bind()
        restored = {id(v) for v in keyed.values()}
        _, variables = self._tracked_variables()
        inits = [op for v in variables if id(v) not in restored for op in _initializers(v)]
        if inits:
            sess.run(inits)
        return self


class NameBasedSaverStatus(_LoadStatus):
    """Restoring a checkpoint written by `kf.train.Saver` (no object graph): the tracked variables
    are matched by their graph names, as a Saver keys them ("w", "w/Adam", "beta1_power"), which
    is what TF does. The root's save_counter is restored only if the checkpoint has it.

    Re-encode such checkpoints with `Checkpoint.save` as soon as possible: names are fragile.
    """

    def __init__(self, checkpoint, save_path, reader, options):
        super().__init__(checkpoint)
        self._save_path = save_path
        self._keys = set(reader.get_variable_to_shape_map())
        self._ops = _RestoreOps(save_path, _io_device(options))

    def _by_name(self):
        _, variables = self._tracked_variables()
        names = {_og.full_name(v): v for v in variables}
        counter = self._root._save_counter
        missing = sorted(n for n, v in names.items() if n not in self._keys and v is not counter)
        return {n: v for n, v in names.items() if n in self._keys}, missing

    def _missing_message(self, missing):
        return (f"Restoring a name-based kf.train.Saver checkpoint ({self._save_path} has no "
                f"object graph) through the object-based API matches variables by their graph "
                f"names, and these tracked variables are not in it: {missing}")

    def assert_consumed(self):
        """Asserts that every tracked variable's name is in the checkpoint."""
        _, missing = self._by_name()
        if missing:
            raise AssertionError(self._missing_message(missing))
        return self

    assert_existing_objects_matched = assert_nontrivial_match = assert_consumed

    def run_restore_ops(self, session=None):
        """Restores every tracked variable by name.

        Raises:
            NotFoundError: a tracked variable's name is not in the checkpoint (as a Saver's
                restore would).
        """
        sess = _session(session, "run_restore_ops")
        keyed, missing = self._by_name()
        if missing:
            raise errors.NotFoundError(None, None, self._missing_message(missing))
        _log.warning("Restoring the name-based checkpoint %s with kf.train.Checkpoint; re-encode "
                     "it with Checkpoint.save.", self._save_path)
        self._ops.run(sess, keyed)
        return self

    def initialize_or_restore(self, session=None):
        """`run_restore_ops`, then initializes the root's save_counter when the checkpoint lacks
        it (TF's alias would leave it uninitialized, failing the next `save`)."""
        sess = _session(session, "initialize_or_restore")
        self.run_restore_ops(sess)
        counter = self._root._save_counter
        if counter is not None and _og.full_name(counter) not in self._keys:
            sess.run(counter.initializer)
        return self

"""`kf.train.CheckpointManager`: numbered saves of a `kf.train.Checkpoint` into one directory,
keeping the most recent `max_to_keep` (TF's tf.train.CheckpointManager, graph mode).

Example::

    manager = kf.train.CheckpointManager(ckpt, "/tmp/run", max_to_keep=3)
    ckpt.restore(manager.latest_checkpoint).initialize_or_restore(sess)
    ...
    manager.save(session=sess)            # "/tmp/run/ckpt-<save_counter>"

Invariants:

* The directory's `checkpoint` state file lists the managed checkpoints, oldest first, with their
  timestamps and `last_preserved_timestamp`; it is replaced atomically.
* A checkpoint is deleted only after the checkpoint just saved and a state file that no longer
  names the deleted one are both complete: the state file never names a deleted checkpoint, and a
  crash while deleting leaves at worst unlisted files (kernflow's Saver order; TF's manager writes
  the state file before and after deleting).
* A new manager on the same directory takes over the list from the state file, so deletion
  continues across restarts; checkpoints older than the last preserved one are left alone.
"""

from __future__ import annotations

import collections
import logging
import os
import time

import numpy as np

from kernflow.core.train import checkpoint_management as _cm

__all__ = ["CheckpointManager"]

_log = logging.getLogger(__name__)


class CheckpointManager:
    """Saves a `Checkpoint` as ``<directory>/<checkpoint_name>-<n>`` and deletes old ones.

    Args:
        checkpoint: the `kf.train.Checkpoint` to save (its `write` is used).
        directory: where checkpoints and the `checkpoint` state file go.
        max_to_keep: how many recent checkpoints to keep; None keeps all (and the state file then
            lists them all).
        keep_checkpoint_every_n_hours: additionally keep (unlisted) one checkpoint per this many
            hours among those that age out.
        checkpoint_name: the file name prefix (default "ckpt").

    Raises:
        ValueError: `max_to_keep` is not None and not positive.
    """

    def __init__(self, checkpoint, directory, max_to_keep, keep_checkpoint_every_n_hours=None,
                 checkpoint_name="ckpt"):
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(f"Expected a positive integer or `None` for `max_to_keep`, got "
                             f"{max_to_keep}.")
        self._checkpoint = checkpoint
        self._max_to_keep = max_to_keep
        self._keep_every_s = (keep_checkpoint_every_n_hours * 3600.0
                              if keep_checkpoint_every_n_hours else None)
        self._directory = _cm._fspath(directory)
        self._prefix = os.path.join(self._directory, checkpoint_name)
        self._managed: collections.OrderedDict[str, float] = collections.OrderedDict()
        self._latest = None
        self._recover(time.time())

    def _recover(self, now):
        state = _cm.get_checkpoint_state(self._directory)
        if state is None:
            # A little in the past, so that a manager re-created at once does not preserve.
            self._last_preserved = now - 1.0
            return
        self._latest = state.model_checkpoint_path
        self._last_preserved = state.last_preserved_timestamp
        if self._last_preserved > now:
            _log.warning("time.time() is %f s behind the last preserved checkpoint timestamp; "
                         "clamping the recorded timestamps to now.", self._last_preserved - now)
            self._last_preserved = now
        paths = list(state.all_model_checkpoint_paths)
        stamps = list(state.all_model_checkpoint_timestamps) or [self._last_preserved] * len(paths)
        for path, stamp in zip(paths, stamps):
            stamp = min(stamp, now)
            if stamp > self._last_preserved:
                self._managed[path] = stamp

    @property
    def directory(self):
        return self._directory

    @property
    def latest_checkpoint(self):
        """The prefix of the newest checkpoint (saved or recovered), or None."""
        return self._latest

    @property
    def checkpoints(self):
        """The managed checkpoints' prefixes, oldest first."""
        return list(self._managed)

    def save(self, checkpoint_number=None, session=None, options=None):
        """Saves a checkpoint, records it, and deletes those beyond `max_to_keep`.

        Args:
            checkpoint_number: an int, or an integer variable/tensor evaluated in the session,
                numbering the checkpoint; None uses `checkpoint.save_counter`. The counter is
                incremented in either case.
            session: the session holding the values (default: the default session).
            options: a `kf.train.CheckpointOptions`.

        Returns:
            The prefix written (also `latest_checkpoint`).
        """
        from kernflow.core.train.object_checkpoint import _session
        sess = _session(session, "CheckpointManager.save")
        number = self._checkpoint._increment_save_counter(sess)
        if checkpoint_number is not None:
            number = checkpoint_number if isinstance(checkpoint_number, (int, np.integer)) \
                else sess.run(checkpoint_number)
        path = self._checkpoint.write(f"{self._prefix}-{int(number)}", session=sess, options=options)
        self._managed.pop(path, None)     # re-saved under the same number: now the newest
        self._managed[path] = time.time()
        self._latest = path
        doomed = self._sweep()
        self._record_state()
        for old in doomed:
            try:
                _cm.remove_checkpoint(old)
            except OSError as e:  # deleting old files must not fail a save
                _log.warning("Ignoring: %s", e)
        return path

    def _sweep(self):
        """Drops the checkpoints beyond max_to_keep from the list; returns those to delete."""
        doomed = []
        while self._max_to_keep and len(self._managed) > self._max_to_keep:
            path, stamp = self._managed.popitem(last=False)
            if self._keep_every_s and stamp - self._keep_every_s >= self._last_preserved:
                self._last_preserved = stamp     # kept on disk, no longer listed
                continue
            doomed.append(path)
        return doomed

    def _record_state(self):
        _cm.update_checkpoint_state_internal(
            self._directory, self._latest, list(self._managed),
            all_model_checkpoint_timestamps=list(self._managed.values()),
            last_preserved_timestamp=self._last_preserved, save_relative_paths=True)

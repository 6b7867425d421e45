"""`kf.train.SessionManager`: creates sessions that are initialized or restored (TF1).

The chief calls `prepare_session`, which restores the latest checkpoint of `checkpoint_dir` when
there is one and runs `init_op` / `init_fn` otherwise; other workers call `wait_for_session`, which
polls `ready_op` until the chief has initialized the shared variables (a cluster target: variables
live on the servers and outlive sessions): every 0.25 s at first, backing off to every
`recovery_wait_secs` (TF1 waits `recovery_wait_secs`, 30 s, before every check).

Readiness: a ready op returns the names of uninitialized variables (`kf.report_uninitialized_variables`);
the model is ready when it returns an empty array. `local_init_op` (local variables, tables) runs in
every new session, once `ready_for_local_init_op` says the global variables it may read are ready.

Example::

    sm = kf.train.SessionManager(ready_op=kf.report_uninitialized_variables())
    sess = sm.prepare_session("", init_op=init, saver=saver, checkpoint_dir="/tmp/run")  # chief
    sess = sm.wait_for_session(server.target, max_wait_secs=600)                          # worker
"""

from __future__ import annotations

import logging
import time

import numpy as np

from kernflow.core.client.session import Session
from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops
from kernflow.core.train import checkpoint_management as _cm

__all__ = ["SessionManager"]

_log = logging.getLogger(__name__)

# The first pause while waiting for the model or a checkpoint (see SessionManager._waits).
FIRST_WAIT_S = 0.25


def _maybe_name(obj) -> str:
    if obj is None:
        return "None"
    return getattr(obj, "name", None) or f"<no name for {type(obj).__name__}>"


def _ready(op, sess, msg):
    """(True, None) if `op` is None or returns an empty array in `sess`; (False, why) otherwise."""
    if op is None:
        return True, None
    try:
        value = sess.run(op)
    except errors.FailedPreconditionError as e:
        if "uninitialized" not in str(e):
            _log.warning("%s : error [%s]", msg, e)
            raise
        return False, str(e)
    # An int32 value or None also counts as ready, for ready ops that predate the name list.
    value = None if value is None else np.asarray(value)
    if value is None or value.dtype == np.int32 or value.size == 0:
        return True, None
    names = ", ".join(v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in value.reshape(-1))
    return False, "Variables not initialized: " + names


class _CountDownTimer:
    def __init__(self, duration_secs):
        self._deadline = time.monotonic() + duration_secs

    def secs_remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())


class SessionManager:
    """Restores or initializes a model when creating a session, or waits for another process to.

    Args:
        local_init_op: op run in every new session once `ready_for_local_init_op` passes (local
            variables, tables).
        ready_op: op returning the names of uninitialized variables (empty: ready); None skips
            the check.
        ready_for_local_init_op: the same check for what `local_init_op` needs (usually the
            global variables).
        graph: the graph (default: the default graph).
        recovery_wait_secs: the longest pause between checks while waiting for a checkpoint or a
            model (the first is `FIRST_WAIT_S`, then it doubles up to this).
        local_init_run_options: `RunOptions` for `local_init_op`.
        local_init_feed_dict: feeds for `local_init_op`.

    Raises:
        ValueError: `ready_for_local_init_op` without `local_init_op`.
    """

    def __init__(self, local_init_op=None, ready_op=None, ready_for_local_init_op=None, graph=None,
                 recovery_wait_secs=30, local_init_run_options=None, local_init_feed_dict=None):
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError("If you pass a ready_for_local_init_op you must also pass a "
                             f"local_init_op, ready_for_local_init_op [{ready_for_local_init_op}]")
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph if graph is not None else _ops.get_default_graph()
        self._recovery_wait_secs = recovery_wait_secs
        self._target = None
        self._local_init_run_options = local_init_run_options
        self._local_init_feed_dict = local_init_feed_dict

    # ------------------------------------------------------------------ restoring
    def _restore_checkpoint(self, master, saver=None, checkpoint_dir=None,
                            checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                            max_wait_secs=7200, config=None):
        """Creates a session and restores into it; returns (session, restored)."""
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError("Can not provide both checkpoint_dir and checkpoint_filename_with_path.")
        self._target = master
        sess = Session(self._target, graph=self._graph, config=config)
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return sess, True
        ckpt = self._wait_for_checkpoint_state(checkpoint_dir, wait_for_checkpoint, max_wait_secs)
        if ckpt is None:
            return sess, False
        saver.restore(sess, ckpt.model_checkpoint_path)
        saver.recover_last_checkpoints(list(ckpt.all_model_checkpoint_paths))
        return sess, True

    def _wait_for_checkpoint_state(self, checkpoint_dir, wait_for_checkpoint, max_wait_secs):
        """The checkpoint state of `checkpoint_dir`, polling up to `max_wait_secs` if asked; or None."""
        waited = 0.0
        waits = self._waits()
        ckpt = _cm.get_checkpoint_state(checkpoint_dir)
        while not ckpt or not ckpt.model_checkpoint_path:
            if not wait_for_checkpoint or waited >= max_wait_secs:
                return None
            _log.info("Waiting for checkpoint to be available.")
            wait = next(waits)
            time.sleep(wait)
            waited += wait
            ckpt = _cm.get_checkpoint_state(checkpoint_dir)
        return ckpt

    def prepare_session(self, master, init_op=None, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None, init_feed_dict=None, init_fn=None):
        """Creates a session, restores the latest checkpoint if there is one, else initializes.

        Args:
            master: the session target.
            init_op: op run when nothing was restored.
            saver: the `Saver` restoring the checkpoint.
            checkpoint_dir: the directory whose latest checkpoint is restored.
            checkpoint_filename_with_path: a checkpoint prefix to restore instead.
            wait_for_checkpoint: wait for a checkpoint to appear in `checkpoint_dir`.
            max_wait_secs: how long to wait for it.
            config: the session's `ConfigProto`.
            init_feed_dict: feeds for `init_op`.
            init_fn: fn(session) called after `init_op` when nothing was restored.

        Returns:
            The ready `Session`.

        Raises:
            RuntimeError: nothing to initialize with, or the model is not ready afterwards.
            ValueError: both `checkpoint_dir` and `checkpoint_filename_with_path`.
        """
        sess, restored = self._restore_checkpoint(
            master, saver, checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs, config=config)
        try:
            if not restored:
                self._initialize(sess, init_op, init_feed_dict, init_fn)
            ok, msg = self._try_run_local_init_op(sess)
            if not ok:
                raise RuntimeError(f"Init operations did not make model ready for local_init.  Init "
                                   f"op: {_maybe_name(init_op)}, init fn: {init_fn}, error: {msg}")
            ok, msg = self._model_ready(sess)
            if not ok:
                raise RuntimeError(f"Init operations did not make model ready.  Init op: "
                                   f"{_maybe_name(init_op)}, init fn: {init_fn}, local_init_op: "
                                   f"{_maybe_name(self._local_init_op)}, error: {msg}")
        except BaseException:
            _safe_close(sess)
            raise
        return sess

    def _initialize(self, sess, init_op, init_feed_dict, init_fn):
        if init_op is None and not init_fn and self._local_init_op is None:
            raise RuntimeError("Model is not initialized and no init_op or init_fn or local_init_op "
                               "was given")
        if init_op is not None:
            sess.run(init_op, feed_dict=init_feed_dict)
        if init_fn:
            init_fn(sess)

    def recover_session(self, master, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint=False,
                        max_wait_secs=7200, config=None):
        """Creates a session and restores the latest checkpoint if there is one (no init_op).

        Returns:
            (session, initialized): `initialized` is True when a checkpoint was restored and the
            model is ready.
        """
        sess, restored = self._restore_checkpoint(
            master, saver, checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint, max_wait_secs=max_wait_secs, config=config)
        local_ok, msg = self._try_run_local_init_op(sess)
        if not restored:
            return sess, False
        source = checkpoint_dir or checkpoint_filename_with_path
        if not local_ok:
            _log.info("Restoring model from %s did not make model ready for local init: %s", source, msg)
            return sess, False
        ready, msg = self._model_ready(sess)
        if not ready:
            _log.info("Restoring model from %s did not make model ready: %s", source, msg)
            return sess, False
        _log.info("Restored model from %s", source)
        return sess, True

    # ------------------------------------------------------------------ waiting
    def wait_for_session(self, master, config=None, max_wait_secs=float("Inf")):
        """Creates a session once the model is ready (another process initialized it).

        Each attempt creates a session, runs `local_init_op` when allowed and checks `ready_op`;
        a failed attempt closes the session and tries again after a pause (0.25 s, doubling up to
        `recovery_wait_secs`).

        Args:
            master: the session target.
            config: the session's `ConfigProto`.
            max_wait_secs: give up when another wait would pass this many seconds (None: never).

        Returns:
            The ready `Session`.

        Raises:
            DeadlineExceededError: the model was not ready in time.
        """
        self._target = master
        if max_wait_secs is None:
            max_wait_secs = float("Inf")
        timer = _CountDownTimer(max_wait_secs)
        waits = self._waits()
        while True:
            sess = Session(self._target, graph=self._graph, config=config)
            not_ready_msg = None
            local_ok, not_ready_local_msg = self._try_run_local_init_op(sess)
            if local_ok:
                ready, not_ready_msg = self._model_ready(sess)
                if ready:
                    return sess
            _safe_close(sess)
            wait = next(waits)
            if timer.secs_remaining() - wait < 0:
                raise errors.DeadlineExceededError(
                    None, None, f"Session was not ready after waiting {max_wait_secs} secs. Not "
                    f"ready for local init: {not_ready_local_msg}; not ready: {not_ready_msg}")
            _log.info("Waiting for model to be ready.  Ready_for_local_init_op:  %s, ready: %s",
                      not_ready_local_msg, not_ready_msg)
            time.sleep(wait)

    def _waits(self):
        """The pauses between checks: from `FIRST_WAIT_S`, doubling up to `recovery_wait_secs`.

        TF1 sleeps `recovery_wait_secs` (30 s) before every check, so a worker that started a
        moment before its chief idles 30 s, and so does every worker after a ps restart; polling
        fast at first and backing off to the same ceiling costs a few cheap checks instead.
        """
        wait = min(FIRST_WAIT_S, self._recovery_wait_secs)
        while True:
            yield wait
            wait = min(wait * 2, self._recovery_wait_secs)

    # ------------------------------------------------------------------ readiness
    def _model_ready(self, sess):
        return _ready(self._ready_op, sess, "Model not ready")

    def _model_ready_for_local_init(self, sess):
        return _ready(self._ready_for_local_init_op, sess, "Model not ready for local init")

    def _try_run_local_init_op(self, sess):
        """Runs `local_init_op` if the model is ready for it; returns (ran or not needed, why not)."""
        if self._local_init_op is None:
            return True, None
        ready, msg = self._model_ready_for_local_init(sess)
        if not ready:
            return False, msg
        _log.info("Running local_init_op.")
        sess.run(self._local_init_op, feed_dict=self._local_init_feed_dict,
                 options=self._local_init_run_options)
        _log.info("Done running local_init_op.")
        return True, None


def _safe_close(sess) -> None:
    """Closes `sess`, ignoring errors (a session that failed to become ready)."""
    try:
        sess.close()
    except Exception:  # noqa: BLE001 - the session is discarded anyway
        pass

"""`kf.train.Coordinator`: stops a set of threads together and reports the first error (TF1).

Example::

    coord = kf.train.Coordinator()
    threads = kf.train.start_queue_runners(sess, coord=coord)
    try:
        while not coord.should_stop():
            sess.run(train_op)
    except Exception as e:
        coord.request_stop(e)
    finally:
        coord.request_stop()
        coord.join(threads)      # re-raises the first error a thread reported
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time

from kernflow.core.framework import errors

__all__ = ["Coordinator", "LooperThread"]

_log = logging.getLogger(__name__)


class Coordinator:
    """Coordinates the termination of threads.

    Args:
        clean_stop_exception_types: exception types that request a stop without being reported
            as errors (default: ``(OutOfRangeError,)``, the end of an input queue).
    """

    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise = None
        self._joined = False
        self._registered_threads = set()

    def _filter_exception(self, ex):
        """None for clean-stop exceptions; `ex` otherwise."""
        value = ex[1] if isinstance(ex, tuple) else ex
        if isinstance(value, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex=None) -> None:
        """Requests that the threads stop; the first non-clean `ex` is re-raised by `join`.

        Args:
            ex: an exception, an ``exc_info`` tuple, or None.

        Raises:
            `ex` itself when the coordinator was already joined (it would be lost otherwise).
        """
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined and ex is not None:
                exc = ex[1] if isinstance(ex, tuple) else ex
                raise exc
            if self._stop_event.is_set():
                return
            if ex is not None and self._exc_info_to_raise is None:
                if isinstance(ex, tuple):
                    info = ex
                elif isinstance(ex, BaseException):
                    info = (type(ex), ex, ex.__traceback__)
                else:
                    info = sys.exc_info()
                if len(info) != 3 or info[1] is None:
                    bad = ValueError(f"ex must be an exception or an exc_info tuple, got {ex!r}")
                    info = (ValueError, bad, None)
                _log.info("Error reported to Coordinator: %s: %s", info[0].__name__, info[1])
                self._exc_info_to_raise = info
            self._stop_event.set()

    def clear_stop(self) -> None:
        """Clears the stop flag and any reported error, so the coordinator can be reused."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        """True once a stop was requested."""
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """A context in which any exception requests a stop (and is reported through `join`)."""
        try:
            yield
        except:  # noqa: E722 - every exception, as TF (including KeyboardInterrupt)
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout=None) -> bool:
        """Waits until a stop is requested; returns True if it was (False on timeout)."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread) -> None:
        """Adds `thread` to the threads `join` waits for."""
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False) -> None:
        """Waits for the threads (registered ones and `threads`) to terminate.

        Returns once all are done, or, after a stop is requested, once they end or
        `stop_grace_period_secs` passed.

        Raises:
            The first exception passed to `request_stop`, if any. RuntimeError: threads are still
            alive after the grace period (unless `ignore_live_threads`).
        """
        with self._lock:
            threads = set(threads or ()) | self._registered_threads
        threads = list(threads)
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(0.05):
            for t in threads:
                if t.is_alive():
                    t.join(0.05)
                    break
        deadline = time.monotonic() + stop_grace_period_secs
        pause = 0.001
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
            pause = min(2 * pause, 0.1)
        stragglers = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            info = self._exc_info_to_raise
        if info is not None:
            raise info[1].with_traceback(info[2])
        if stragglers:
            if ignore_live_threads:
                _log.info("Coordinator stopped with threads still running: %s", " ".join(stragglers))
            else:
                raise RuntimeError("Coordinator stopped with threads still running: "
                                   + " ".join(stragglers))

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self) -> None:
        """Raises the exception reported through `request_stop`, if any."""
        with self._lock:
            info = self._exc_info_to_raise
        if info is not None:
            raise info[1].with_traceback(info[2])

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Starts a `LooperThread` calling `target(*args, **kwargs)` every `timer_interval_secs`."""
        looper = LooperThread(self, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper


class LooperThread(threading.Thread):
    """A thread that runs code repeatedly until its coordinator stops (TF1's LooperThread).

    Args:
        coord: the `Coordinator`.
        timer_interval_secs: seconds between calls (None: call back to back).
        target: the callable (or override `run_loop`).
        args, kwargs: its arguments.
    """

    def __init__(self, coord, timer_interval_secs, target=None, args=None, kwargs=None):
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord}")
        super().__init__()
        self.daemon = True
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target_fn = target
        if self._target_fn:
            self._args = args or ()
            self._kwargs = kwargs or {}
        elif args or kwargs:
            raise ValueError("'args' and 'kwargs' argument require that you also pass 'target'")
        self._coord.register_thread(self)

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None):
        """Starts and returns a LooperThread."""
        looper = LooperThread(coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper

    def run(self):
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_at = time.monotonic()
                while not self._coord.wait_for_stop(max(next_at - time.monotonic(), 0.0)):
                    next_at += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self):
        """Called once before the loop."""

    def stop_loop(self):
        """Called once after the loop."""

    def run_loop(self):
        """One iteration: calls the target."""
        if self._target_fn:
            self._target_fn(*self._args, **self._kwargs)

"""Mutex kernels for kf.CriticalSection: MutexV2, MutexLock, ConsumeMutexLock.

A mutex lives in its device's resource manager under (container, shared_name or the node name); the
value of its handle is the `Mutex` itself. It is a `BlockingResource` (kernflow.kernels.cpu.blocking)
with one line, the MutexLock attempts, served in arrival order: a waiting MutexLock holds no thread,
takes the mutex on the thread that released it (after the resource lock is released) and fails
with its step's cancellation error (session closed, deadline, another kernel failed).

Invariants (under the mutex's lock):

* `holder` is the serial of the `MutexLockValue` holding the mutex, or None when it is free; only
  the head of the line may take a free mutex.
* A lock is released at most once, and only while it is the holder: by ConsumeMutexLock, by its
  step's cancellation (registered when MutexLock starts), or by the reaper once the lock value was
  garbage-collected without either (a step that took the lock but pruned ConsumeMutexLock away).
  Releasing a lock that is no longer the holder does nothing.
"""

from __future__ import annotations

import itertools
import queue
import threading

from kernflow.core.framework import errors
from kernflow.kernels.cpu.blocking import COMPLETE, NO_PROGRESS, Attempt, BlockingResource

__all__ = ["Mutex", "MutexLockValue", "register"]

DEVICE = "CPU"
_serials = itertools.count(1)


class _Reaper:
    """Releases the mutexes of lock values that were garbage-collected while still holding them.

    `MutexLockValue.__del__` may run on any thread at any allocation (even one holding a mutex's
    lock), so it only puts the pair on a `queue.SimpleQueue` (whose put is reentrant); one daemon
    thread releases them.
    """

    def __init__(self):
        self._queue = queue.SimpleQueue()
        self._started = False
        self._start_lock = threading.Lock()

    def put(self, mutex, serial: int) -> None:
        self._queue.put((mutex, serial))
        if not self._started:
            self._start()

    def _start(self) -> None:
        with self._start_lock:
            if not self._started:
                threading.Thread(target=self._loop, name="kernflow-mutex-reaper", daemon=True).start()
                self._started = True

    def _loop(self) -> None:
        while True:
            mutex, serial = self._queue.get()
            mutex.release(serial)


_reaper = _Reaper()


class MutexLockValue:
    """The value of a MutexLock tensor: a claim on `mutex`, released when consumed or dropped."""

    __slots__ = ("mutex", "serial")

    def __init__(self, mutex):
        self.mutex = mutex
        self.serial = next(_serials)

    def __repr__(self):
        return f"<MutexLock #{self.serial} of Mutex '{self.mutex.name}'>"

    def __del__(self):
        if self.mutex.holder == self.serial:   # an unlocked read; the reaper checks again
            _reaper.put(self.mutex, self.serial)


class _Acquire(Attempt):
    """A MutexLock waiting for the mutex to be free."""

    __slots__ = ("lock",)

    def __init__(self, done, lock):
        super().__init__(done)
        self.lock = lock

    def step(self, mutex) -> int:
        if mutex.holder is not None:
            return NO_PROGRESS
        mutex.holder = self.lock.serial
        self.result = self.lock
        return COMPLETE


class Mutex(BlockingResource):
    """A mutex resource: who holds it and the line of MutexLocks waiting for it."""

    def __init__(self, name: str):
        super().__init__("Mutex", name, 1)
        self.holder = None

    def __repr__(self):
        return f"<Mutex '{self.name}' holder={self.holder}>"

    def lock(self, step_ctx, done) -> None:
        """Completes ``done(MutexLockValue)`` once the mutex is taken for the step (or with the
        step's cancellation error). The lock is released when the step is cancelled, too."""
        cm = step_ctx.cancellation
        value = MutexLockValue(self)
        serial = value.serial   # (the callback must not keep the value alive: see __del__)
        token = cm.register(lambda err: self.release(serial))
        if token is None:
            done(cm.error or errors.CancelledError(None, None, "Step was cancelled"))
            return

        def acquired(result):
            # A cancel that ran its release callback before the mutex was taken released nothing.
            if not isinstance(result, Exception) and cm.is_cancelled:
                self.release(serial)
                result = cm.error
            done(result)
        self.start(_Acquire(acquired, value), 0, step_ctx)

    def release(self, serial: int) -> bool:
        """Frees the mutex if the lock `serial` holds it, letting the next MutexLock take it."""
        with self._lock:
            if self.holder != serial:
                return False
            self.holder = None
            finished = self._flush_locked()
        self._complete(finished)
        return True


def _invalid(node: str, msg: str):
    return errors.InvalidArgumentError(None, None, f"{node}: {msg}")


def _mutex_op(ctx):
    container = ctx.get_attr("container")
    key = ctx.get_attr("shared_name") or ctx.name

    def check(found):
        if not isinstance(found, Mutex):
            raise _invalid(ctx.name, f"resource '{key}' in container '{container}' is a "
                           f"{type(found).__name__}, not a Mutex")
    return ctx.resource_mgr.cached_getter(container, key, lambda: Mutex(key), check)


def _mutex_lock(ctx):
    node = ctx.name

    def compute(step, inputs, done):
        mutex = inputs[0]
        if not isinstance(mutex, Mutex):
            raise _invalid(node, f"input 0 is not a mutex handle (got {type(mutex).__name__})")
        mutex.lock(step, done)
    return compute


def _consume_mutex_lock(ctx):
    node = ctx.name

    def compute(lock):
        if not isinstance(lock, MutexLockValue):
            raise _invalid(node, f"input 0 is not a mutex lock (got {type(lock).__name__})")
        lock.mutex.release(lock.serial)
    return compute


def register(registry) -> None:
    """Registers the CPU mutex kernels (kf.CriticalSection)."""
    registry.register("MutexV2", DEVICE, _mutex_op)
    registry.register("MutexLock", DEVICE, _mutex_lock, is_async=True)
    registry.register("ConsumeMutexLock", DEVICE, _consume_mutex_lock)

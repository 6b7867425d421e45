"""Fixtures shared by the core tests."""

import threading
import time

import pytest


@pytest.fixture
def in_thread():
    """``in_thread(fn)`` starts fn() in a daemon thread and returns ``(thread, box)``; box gets
    ``("ok", value)``, or ``("err", exception, time.monotonic() when it was raised)``."""
    def start(fn):
        box = []

        def target():
            try:
                box.append(("ok", fn()))
            except Exception as e:  # noqa: BLE001 - handed to the test
                box.append(("err", e, time.monotonic()))
        t = threading.Thread(target=target, daemon=True)
        t.start()
        return t, box
    return start

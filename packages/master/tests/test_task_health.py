"""`TaskHealth`: the master logs a task going unreachable (WARNING) and coming back (INFO) once each."""

from __future__ import annotations

import logging

import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.master.plugin import _registration_health
from kernflow.master.task_health import DOWN, UP, TaskHealth

T1 = "/job:worker/replica:0/task:1"
LOGGER = "kernflow.master"


def _transitions(caplog):
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def test_each_transition_is_logged_once(caplog):
    h = TaskHealth()
    down = errors.UnavailableError(None, None, "connection refused")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        h.observe(T1, down)                     # never reached yet: CreateSession reports those
        h.observe(T1, None)
        h.observe(T1, None)
        for _ in range(3):
            h.observe(T1, down)
        h.observe(T1, errors.InvalidArgumentError(None, None, "it answered"))   # still down
        h.observe(T1, None)
        h.observe(T1, None)
    assert _transitions(caplog) == [
        ("INFO", f"task {T1} is reachable"),
        ("WARNING", f"task {T1} is unreachable: GetStatus failed: connection refused"),
        ("INFO", f"task {T1} is reachable again"),
    ]
    assert h.state(T1) == UP and h.unreachable() == []


def test_an_error_answer_is_not_unreachability():
    h = TaskHealth()
    h.observe(T1, None)
    h.observe(T1, errors.PermissionDeniedError(None, None, "bad token"))
    assert h.state(T1) == UP
    h.observe(T1, errors.DeadlineExceededError(None, None, "no answer"))
    assert h.state(T1) == DOWN and h.unreachable() == [T1]


class _Table:
    def __init__(self):
        self.now = {}

    def entries(self):
        return dict(self.now)


def test_etcd_registrations_going_and_coming_are_transitions(caplog):
    h, table = TaskHealth(), _Table()
    listener = _registration_health(h)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        table.now = {T1: {"address": "127.0.0.1:5000"}}
        listener(table)                          # first registration: up, nothing to say
        listener(table)                          # another task's change: nothing about this one
        table.now = {}
        listener(table)
        listener(table)
        table.now = {T1: {"address": "127.0.0.1:5001"}}
        listener(table)
    assert _transitions(caplog) == [
        ("WARNING", f"task {T1} is unreachable: its registration in etcd went away (the task stopped, "
                    "or its lease expired)"),
        ("INFO", f"task {T1} is reachable again (registered in etcd at 127.0.0.1:5001)"),
    ]


def test_master_health_checks_log_a_dead_task_once_and_its_return_once(make_cluster, caplog):
    c = make_cluster()

    def down(req):
        raise errors.UnavailableError(None, None, "connection refused")
    g = kf.Graph()
    with g.as_default(), kf.device("/job:worker/task:1"):
        out = kf.constant(2.0) + 1.0
    s = c.session(g)                             # every task answered: up
    with caplog.at_level(logging.INFO, logger=LOGGER):
        c.spies[T1].hooks["get_status"] = down
        for _ in range(3):                       # every failed step re-checks the task
            with pytest.raises(errors.UnavailableError):
                s.run(out)
        assert c.spies[T1].calls["get_status"] >= 4
        del c.spies[T1].hooks["get_status"]
        assert s.run(out) == 3.0
        assert s.run(out) == 3.0
    assert _transitions(caplog) == [
        ("WARNING", f"task {T1} is unreachable: GetStatus failed: connection refused"),
        ("INFO", f"task {T1} is reachable again"),
    ]
    assert c.master.task_health.state(T1) == UP

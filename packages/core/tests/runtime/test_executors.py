"""The executor interface (runtime/execution.py): the straight line, the dataflow executor and the
frames executor run the same graphs to the same bits, the frames executor being the reference.

Each case builds a graph in a fresh session (fresh kernels and resources, so seeded random ops and
variables start from the same state), compiles the step the session would run, and runs each of its
partitions through one executor: the reference (frames, loops not compiled), then every other
executor a partition accepts (with loops compiled into loop nodes and without), the inline path and
the session itself. Every fetched value must equal the reference's byte for byte.
"""

import threading

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.runtime import execution
from kernflow.core.runtime import loops
from kernflow.core.runtime.execution import (DATAFLOW, EXECUTORS, FRAMES, REFERENCE, SEGMENTED,
                                             STRAIGHT_LINE)
from kernflow.core.runtime.rendezvous import LocalRendezvous

# CPU devices only (a GPU plugin, when installed, would add partitions and device arrays).
CPU = kf.ConfigProto(device_count={"GPU": 0})
TWO_CPUS = kf.ConfigProto(device_count={"CPU": 2, "GPU": 0})
THREE_CPUS = kf.ConfigProto(device_count={"CPU": 3, "GPU": 0})


# ---------------------------------------------------------------------------- the graphs
def _elementwise():
    r = np.random.RandomState(7)   # the same values in every session
    x = kf.placeholder(kf.float32, [64, 64], name="x")
    y = kf.tanh(x * 2.0 + 1.0)
    z = kf.nn.relu(y - 0.5)                      # 4,096 elements: buffers are forwarded in place
    return [z, kf.reduce_sum(z, axis=0), kf.reduce_mean(z)], {x: r.randn(64, 64).astype(np.float32)}


def _mlp():
    r = np.random.RandomState(7)   # the same values in every session
    x = kf.placeholder(kf.float32, [32, 16], name="x")
    w = kf.constant(r.randn(16, 10).astype(np.float32))
    b = kf.constant(r.randn(10).astype(np.float32))
    logits = kf.matmul(x, w) + b
    probs = kf.nn.softmax(logits)
    return [probs, kf.argmax(logits, 1), kf.cast(logits > 0.0, kf.int32)], \
        {x: r.randn(32, 16).astype(np.float32)}


def _gradients():
    r = np.random.RandomState(7)   # the same values in every session
    x = kf.placeholder(kf.float64, [8, 5], name="x")
    w = kf.constant(r.randn(5, 3))
    h = kf.sigmoid(kf.matmul(x, w))
    loss = kf.reduce_sum(h * h) + kf.reduce_mean(kf.exp(-h))
    return [loss] + kf.gradients(loss, [x, w]), {x: r.randn(8, 5)}


def _multi_output():
    r = np.random.RandomState(7)   # the same values in every session
    x = kf.placeholder(kf.int32, [6, 4], name="x")
    a, b, c = kf.split(x, 3, axis=0)
    rows = kf.unstack(kf.concat([c, a, b], 0))
    s = kf.identity(kf.add_n(rows))
    return [s, s, kf.stack(rows[::-1]), kf.transpose(x)], {x: r.randint(-50, 50, (6, 4)).astype(np.int32)}


def _variables():
    v = kf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="v")
    up = kf.assign_add(v, kf.ones([2, 3]) * 0.5)
    with kf.control_dependencies([up]):
        read = kf.identity(v.read_value() * 3.0)
    return [up, read], {}


def _seeded_random():
    r = kf.random_normal([50], seed=3)
    u = kf.random_uniform([4, 4], seed=5)
    return [r, u, kf.reduce_max(r)], {}


def _queue():
    q = kf.FIFOQueue(4, [kf.float32], shapes=[[3]])
    x = kf.placeholder(kf.float32, [3], name="x")
    enq = q.enqueue([x * 2.0])
    with kf.control_dependencies([enq]):
        out = q.dequeue() + 1.0
    return [out], {x: np.array([1.5, -2.0, 4.0], np.float32)}


def _cond(taken):
    def build():
        r = np.random.RandomState(7)   # the same values in every session
        p = kf.placeholder(kf.bool, [], name="p")
        x = kf.placeholder(kf.float32, [5], name="x")
        y = kf.cond(p, lambda: kf.square(x) + 1.0, lambda: kf.sqrt(kf.abs(x)) * 2.0)
        return [y, kf.reduce_sum(y)], {p: taken, x: r.randn(5).astype(np.float32)}
    return build


def _while_loop():
    r = np.random.RandomState(7)   # the same values in every session
    x = kf.placeholder(kf.float32, [4], name="x")
    i, acc = kf.while_loop(lambda i, a: i < 7, lambda i, a: (i + 1, a * 0.9 + kf.sin(a)),
                           [kf.constant(0), x])
    return [i, acc], {x: r.randn(4).astype(np.float32)}


def _nested_while():
    def outer(i, a):
        _, b = kf.while_loop(lambda j, b: j < 3, lambda j, b: (j + 1, b + kf.cast(j, kf.float32)),
                             [kf.constant(0), a])
        return i + 1, b * 0.5
    i, a = kf.while_loop(lambda i, a: i < 4, outer, [kf.constant(0), kf.constant([1.0, 2.0])])
    return [i, a], {}


def _while_gradient():
    r = np.random.RandomState(7)   # the same values in every session
    x = kf.placeholder(kf.float64, [3], name="x")
    _, y = kf.while_loop(lambda i, y: i < 5, lambda i, y: (i + 1, kf.tanh(y) * 1.5 + y * 0.1),
                         [kf.constant(0), x])
    loss = kf.reduce_sum(y * y)
    return [loss] + kf.gradients(loss, [x]), {x: r.randn(3)}


def _two_devices():
    r = np.random.RandomState(7)   # the same values in every session
    x = kf.placeholder(kf.float32, [16, 16], name="x")
    with kf.device("/cpu:1"):
        a = kf.matmul(x, x) * 0.01
    with kf.device("/cpu:0"):
        b = kf.tanh(a) + x
    with kf.device("/cpu:1"):
        c = kf.reduce_sum(b, axis=1)
    return [b, c], {x: r.randn(16, 16).astype(np.float32)}


def _sharded_training():
    """Weights on two devices, the model on a third: Recvs with different keys, gradients sent
    back, updates whose control outputs return (an asynchronous-training worker's partition)."""
    r = np.random.RandomState(7)
    x = kf.placeholder(kf.float32, [8, 6], name="x")
    with kf.device("/cpu:1"):
        w1 = kf.Variable(r.randn(6, 5).astype(np.float32), name="w1")
        b1 = kf.Variable(np.zeros(5, np.float32), name="b1")
    with kf.device("/cpu:2"):
        w2 = kf.Variable(r.randn(5, 3).astype(np.float32), name="w2")
    with kf.device("/cpu:0"):
        h = kf.tanh(kf.matmul(x, w1) + b1)
        loss = kf.reduce_mean(kf.square(kf.matmul(h, w2)))
        train = kf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with kf.device("/cpu:1"), kf.control_dependencies([train]):
        after = kf.identity(w1)
    with kf.device("/cpu:0"), kf.control_dependencies([train]):
        done = kf.identity(loss)
    return [done, after], {x: r.randn(8, 6).astype(np.float32)}


def _control_from_another_device():
    """A Recv of a control edge only, and a Recv started after another Recv arrived."""
    r = np.random.RandomState(7)
    x = kf.placeholder(kf.float32, [4], name="x")
    with kf.device("/cpu:1"):
        v = kf.Variable(np.ones(4, np.float32), name="v")
        bump = kf.assign_add(v, x)
    with kf.device("/cpu:0"):
        with kf.control_dependencies([bump]):
            y = kf.identity(x * 2.0)
        z = y + kf.reduce_sum(x)
    with kf.device("/cpu:1"):
        w = bump * 1.0 + z
    return [y, z, w], {x: r.randn(4).astype(np.float32)}


ALL = set(EXECUTORS)
SCHEDULED = {DATAFLOW, FRAMES}
RECVS = {SEGMENTED, DATAFLOW, FRAMES}
# name: (graph builder, session config, the executors some partition of it must go through)
CASES = {
    "elementwise": (_elementwise, CPU, ALL),
    "mlp": (_mlp, CPU, ALL),
    "gradients": (_gradients, CPU, ALL),
    "multi_output": (_multi_output, CPU, ALL),
    "variables": (_variables, CPU, ALL),
    "seeded_random": (_seeded_random, CPU, ALL),
    "queue": (_queue, CPU, SCHEDULED),
    "cond_true": (_cond(True), CPU, {FRAMES}),
    "cond_false": (_cond(False), CPU, {FRAMES}),
    "while_loop": (_while_loop, CPU, ALL),         # (its loop compiled: every executor)
    "nested_while": (_nested_while, CPU, ALL),
    "while_gradient": (_while_gradient, CPU, ALL),
    "two_devices": (_two_devices, TWO_CPUS, RECVS),
    "sharded_training": (_sharded_training, THREE_CPUS, RECVS),
    "control_from_another_device": (_control_from_another_device, TWO_CPUS, RECVS),
}


# ---------------------------------------------------------------------------- running
def _session(build, config):
    """A fresh graph and session: (session, fetches, feeds), variables initialized."""
    g = kf.Graph()
    with g.as_default():
        fetches, feeds = build()
        init = kf.global_variables_initializer()
    sess = kf.Session(graph=g, config=config)
    sess.run(init)
    return sess, fetches, feeds


def _step(sess, fetches, feeds, compile_loops):
    """The session's compiled step (plans per partition) for these fetches and feeds."""
    saved = loops.ENABLED
    loops.ENABLED = compile_loops
    try:
        key = (tuple(t.name for t in feeds), tuple(t.name for t in fetches), ())
        return sess._impl._step(key), [feeds[t] for t in feeds]
    finally:
        loops.ENABLED = saved


def _run_step(step, values, executor):
    """Runs every partition with `executor` where it accepts it, else with the reference."""
    rdv = LocalRendezvous()
    runs = []
    for plan in step.plans:
        ctx = execution.StepContext(1, rdv, plan.device)
        chosen = executor if executor in plan.executors() else REFERENCE
        runs.append(plan.new_state([values[i] for i in plan.arg_indices], ctx, executor=chosen))
    # Straight lines run to the end in start(): begin with the partitions that wait for them.
    for st in sorted(runs, key=lambda r: r.executor == STRAIGHT_LINE):
        st.start()
    out = [None] * step.num_fetches
    for st in runs:
        assert st.wait(30), f"{st.executor} run did not finish"
        for i, v in zip(st.plan.retval_indices, st.results()):
            # (a fetched reference is the variable itself: keep a copy of its value)
            out[i] = np.array(v.read()) if hasattr(v, "read") else v
    return out, {st.executor for st in runs}


def _assert_same_bits(got, want, what):
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        a, b = np.asarray(a), np.asarray(b)
        assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{what}: fetch {k}"
        assert a.tobytes() == b.tobytes(), f"{what}: fetch {k} differs from the reference"


def _variants(build, config, compile_loops):
    """(executor, results, executors used) of every executor accepted by some partition."""
    out = []
    for executor in EXECUTORS:
        sess, fetches, feeds = _session(build, config)
        with sess:
            step, values = _step(sess, fetches, feeds, compile_loops)
            if any(executor in p.executors() for p in step.plans):
                got, used = _run_step(step, values, executor)
                out.append((executor, got, used))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_executor_matches_the_reference_bit_for_bit(case):
    build, config, expected = CASES[case]
    sess, fetches, feeds = _session(build, config)
    with sess:
        step, values = _step(sess, fetches, feeds, compile_loops=False)
        reference, used = _run_step(step, values, REFERENCE)
        assert used == {FRAMES}
    seen = set()
    for compile_loops in (False, True):
        for executor, got, used in _variants(build, config, compile_loops):
            _assert_same_bits(got, reference, f"{executor} (loops compiled: {compile_loops})")
            seen |= used
    assert seen == expected
    # The production paths, each in a fresh session: the inline path when the step has one, and
    # Session.run.
    for compile_loops in (False, True):
        sess, fetches, feeds = _session(build, config)
        with sess:
            step, values = _step(sess, fetches, feeds, compile_loops)
            if step.run_inline is not None:
                ctx = execution.StepContext(2, None, step.plans[0].device)
                got = [np.array(v.read()) if hasattr(v, "read") else v for v in step.run_inline(values, ctx)]
                _assert_same_bits(got, reference, "the inline path")
        sess, fetches, feeds = _session(build, config)
        with sess:
            saved = loops.ENABLED
            loops.ENABLED = compile_loops
            try:
                _assert_same_bits(sess.run(fetches, feeds), reference, "Session.run")
            finally:
                loops.ENABLED = saved


@pytest.mark.parametrize("case,expected", [
    ("elementwise", EXECUTORS), ("queue", (DATAFLOW, FRAMES)), ("while_loop", (FRAMES,))])
def test_each_plan_names_the_executors_that_accept_it(case, expected):
    build, config, _ = CASES[case]
    sess, fetches, feeds = _session(build, config)
    with sess:
        step, _ = _step(sess, fetches, feeds, compile_loops=False)
        assert [p.executors() for p in step.plans] == [expected]
        assert step.plans[0].inline == (expected == EXECUTORS)


def test_compiled_loops_leave_a_plan_every_executor_accepts():
    sess, fetches, feeds = _session(_while_loop, CPU)
    with sess:
        step, _ = _step(sess, fetches, feeds, compile_loops=True)
        (plan,) = step.plans
        assert plan.control_flow is None and plan.executors() == EXECUTORS
        assert not plan.inline    # a loop node must see the step's cancellation: never inline


def _plan_of(build):
    sess, fetches, feeds = _session(build, CPU)
    step, values = _step(sess, fetches, feeds, compile_loops=False)
    return sess, step.plans[0], values


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_kernel_error_is_the_same_from_every_executor(executor):
    def build():
        a = kf.placeholder(kf.float32, None, name="a")
        b = kf.placeholder(kf.float32, None, name="b")
        return [kf.matmul(a, b) + 1.0], {a: np.ones((2, 3), np.float32), b: np.ones((4, 5), np.float32)}
    sess, plan, values = _plan_of(build)
    with sess:
        errs = []
        for ex in (REFERENCE, executor):
            st = plan.new_state(values, execution.StepContext(1, LocalRendezvous(), plan.device), executor=ex)
            st.start()
            assert st.wait(10)
            with pytest.raises(errors.InvalidArgumentError) as e:
                st.results()
            errs.append((type(e.value), e.value.message))
        assert errs[0] == errs[1]
        assert "MatMul" in errs[0][1]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_run_aborted_before_start_runs_nothing_and_reports_the_error(executor):
    sess, plan, values = _plan_of(_variables)
    with sess:
        done = []
        st = plan.new_state(values, execution.StepContext(1, LocalRendezvous(), plan.device),
                            done=done.append, executor=executor)
        err = errors.CancelledError(None, None, "stopped before it began")
        st.abort(err)
        st.abort(errors.AbortedError(None, None, "a later error"))   # the first error wins
        st.start()
        assert st.wait(5) and st.finished.is_set() and done == [st]
        with pytest.raises(errors.CancelledError, match="stopped before it began"):
            st.results()
        assert st.executor == executor and isinstance(st, execution.Execution)
        # Nothing ran: the variable was not incremented.
        np.testing.assert_array_equal(sess.run("v:0"), np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("executor", [DATAFLOW, FRAMES])
def test_abort_wakes_a_run_blocked_in_an_asynchronous_kernel(executor):
    def build():
        q = kf.FIFOQueue(2, [kf.float32], shapes=[[]])
        return [q.dequeue()], {}
    sess, plan, values = _plan_of(build)
    with sess:
        st = plan.new_state(values, execution.StepContext(1, LocalRendezvous(), plan.device),
                            executor=executor)
        threading.Thread(target=st.start, daemon=True).start()
        assert not st.wait(0.2)     # blocked in the dequeue, holding no result
        st.abort(errors.CancelledError(None, None, "client went away"))
        assert st.wait(5)
        with pytest.raises(errors.CancelledError, match="client went away"):
            st.results()


def test_an_executor_that_cannot_run_a_plan_is_refused_by_name():
    sess, plan, values = _plan_of(_while_loop)
    with sess:
        ctx = execution.StepContext(1, LocalRendezvous(), plan.device)
        for ex in (STRAIGHT_LINE, DATAFLOW):
            with pytest.raises(errors.InvalidArgumentError,
                               match=f"the '{ex}' executor cannot run plan .*: the plan has control "
                                     f"flow; executors that can run it: frames$"):
                plan.new_state(values, ctx, executor=ex)
        with pytest.raises(errors.InvalidArgumentError,
                           match="the 'fast' executor .* no such executor \\(expected one of "
                                 "straight_line, segmented, dataflow, frames\\)"):
            plan.new_state(values, ctx, executor="fast")
        with pytest.raises(errors.InternalError, match="does not run inline"):
            plan.run_inline(values, execution.StepContext(1, None, plan.device))


def test_the_frames_executor_is_the_declared_reference():
    from kernflow.core.runtime.control_flow_executor import FrameDataflowState
    assert REFERENCE == FRAMES == FrameDataflowState.executor
    assert "reference" in FrameDataflowState.__doc__

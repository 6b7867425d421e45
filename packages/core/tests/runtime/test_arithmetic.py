"""The arithmetic simplification (kernflow/core/runtime/arithmetic.py): x + 0, x - 0 and x * 1 run
as a Snapshot (a copy) where the result is x bit for bit; everything else is left alone.

Each case runs a step and reads the partition graphs to see what ran, with the pass (the default)
and with `global_jit_level=OFF` (no rewrite), and compares the values.
"""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.rewrites import CPU, rewrites_off, run_step
from kernflow.core.train import training_util

OFF = rewrites_off()


def _both(graph, fetches, feeds=None, init=None):
    """(values, ops) with the pass, after checking the values equal those without it."""
    out, ops = run_step(graph, fetches, feeds, init=init)
    plain, plain_ops = run_step(graph, fetches, feeds, OFF, init=init)
    assert "Snapshot" not in plain_ops
    for a, b in zip(out, plain):
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == np.asarray(b).dtype
        # bit for bit: the sign of a zero too
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    return out, ops


@pytest.mark.parametrize("dtype", [kf.int32, kf.int64, kf.uint8])
def test_integer_plus_zero_runs_as_a_copy(dtype):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(dtype, [None], name="x")
        y = x + 0
        z = kf.add(kf.constant(0, dtype), x)     # zero on the left: Add
    out, ops = _both(g, [y, z], {x: np.array([1, 2, 3])})
    assert ops.count("Snapshot") == 2 and "AddV2" not in ops and "Add" not in ops


def test_float_minus_zero_and_times_one_run_as_copies_plus_zero_does_not():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None], name="x")
        fetches = [x - 0.0, x * 1.0, 1.0 * x, x + 0.0, 0.0 - x]
    values = np.array([-0.0, 0.0, 1.5, np.nan, -np.inf], np.float32)
    out, ops = _both(g, fetches, {x: values})
    assert ops.count("Snapshot") == 3
    assert ops.count("AddV2") == 1 and ops.count("Sub") == 1      # -0.0 + 0.0 is +0.0; 0 - x
    assert np.signbit(out[0][0]) and not np.signbit(out[3][0])


def test_what_is_not_the_neutral_element_or_not_a_scalar_const_stays():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.int64, [2], name="x")
        zero = kf.placeholder_with_default(np.int64(0), [])
        fetches = [x + 1, x * 0, x + kf.constant([0, 0], kf.int64), x + zero,
                   kf.reshape(x, [2, 1]) + kf.zeros([1, 3], kf.int64)]   # a zero that broadcasts
    out, ops = _both(g, fetches, {x: np.array([4, 5])})
    assert "Snapshot" not in ops
    assert out[4].shape == (2, 3)


def test_the_copy_is_taken_where_the_add_ran_not_when_the_step_ends():
    # TF1's global-step read for hooks: `step + 0` in the same step as the update. The fetched
    # value is a copy: a later in-place update of the variable does not show through it.
    g = kf.Graph()
    with g.as_default():
        step = kf.train.get_or_create_global_step()
        read = training_util.get_or_create_global_step_read()     # step.read_value() + 0
        with kf.control_dependencies([read]):
            inc = kf.assign_add(step, 1)
        init = kf.global_variables_initializer()
    with kf.Session(graph=g, config=CPU) as s:
        s.run(init)
        meta = kf.RunMetadata()
        got = s.run([read, inc], options=kf.RunOptions(output_partition_graphs=True), run_metadata=meta)
        assert "Snapshot" in [nd.op for p in meta.partition_graphs for nd in p.node]
        assert got == [0, 1]
        assert s.run([read, inc]) == [1, 2]


def test_a_constant_read_elsewhere_stays_and_one_read_only_there_goes():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.int32, [None], name="x")
        zero = kf.constant(0, name="zero")
        one = kf.constant(1, name="one")
    with kf.Session(graph=g, config=CPU) as s:
        meta = kf.RunMetadata()
        opts = kf.RunOptions(output_partition_graphs=True)
        out = s.run([x + zero, zero, x * one], {x: [7]}, options=opts, run_metadata=meta)
        names = {nd.name: nd.op for p in meta.partition_graphs for nd in p.node}
    assert [o.tolist() if hasattr(o, "tolist") else o for o in out] == [[7], 0, [7]]
    assert names["zero"] == "Const" and "one" not in names      # fetched: kept; else dropped
    assert list(names.values()).count("Snapshot") == 2


def test_control_inputs_of_the_rewritten_node_still_run_first():
    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(0, dtype=kf.int32)
        x = kf.placeholder(kf.int32, [], name="x")
        with kf.control_dependencies([kf.assign(v, 5)]):
            y = x + 0
        init = kf.global_variables_initializer()
    with kf.Session(graph=g, config=CPU) as s:
        s.run(init)
        assert s.run(y, {x: 3}) == 3
        assert s.run(v) == 5


def test_the_snapshot_gradient_passes_the_gradient_through():
    g = kf.Graph()
    with g.as_default():
        from kernflow.core.framework.op_def_library import apply_op
        x = kf.constant([1.0, 2.0])
        y = apply_op("Snapshot", [x]).outputs[0]
        (dx,) = kf.gradients(kf.reduce_sum(y * y), [x])
    with kf.Session(graph=g, config=CPU) as s:
        np.testing.assert_allclose(s.run(dx), [2.0, 4.0])

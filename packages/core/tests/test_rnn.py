"""RNN cells (ops/rnn_cell_impl.py) and drivers (ops/rnn.py) against numpy re-computations."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.ops import rnn
from kernflow.core.ops import rnn_cell_impl as rc
from kernflow.core.testing import gradient_checker


# ------------------------------------------------------------------------------ numpy references
def sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_basic_rnn(x, h, w):
    out = np.tanh(np.concatenate([x, h], 1) @ w["kernel"] + w["bias"])
    return out, out


def np_basic_lstm(x, state, w, forget_bias=1.0):
    c, h = state
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ w["kernel"] + w["bias"], 4, axis=1)
    new_c = c * sig(f + forget_bias) + sig(i) * np.tanh(j)
    new_h = np.tanh(new_c) * sig(o)
    return new_h, (new_c, new_h)


def np_gru(x, h, w):
    r, u = np.split(sig(np.concatenate([x, h], 1) @ w["gates/kernel"] + w["gates/bias"]), 2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ w["candidate/kernel"] + w["candidate/bias"])
    new_h = u * h + (1 - u) * c
    return new_h, new_h


def np_lstm(x, state, w, cell_clip=None, proj_clip=None, forget_bias=1.0):
    c, m = state
    i, j, f, o = np.split(np.concatenate([x, m], 1) @ w["kernel"] + w["bias"], 4, axis=1)
    c = (sig(f + forget_bias + w["w_f_diag"] * c) * c + sig(i + w["w_i_diag"] * c) * np.tanh(j))
    if cell_clip is not None:
        c = np.clip(c, -cell_clip, cell_clip)
    m = sig(o + w["w_o_diag"] * c) * np.tanh(c)
    m = m @ w["projection/kernel"]
    if proj_clip is not None:
        m = np.clip(m, -proj_clip, proj_clip)
    return m, (c, m)


def np_dynamic(step, xs, state, lengths, w):
    """A numpy loop over batch-major xs [B, T, D]: zero outputs and frozen state past lengths."""
    outs = []
    for t in range(xs.shape[1]):
        out, new_state = step(xs[:, t], state, w)
        alive = (t < lengths)[:, None]
        outs.append(np.where(alive, out, 0.0))
        state = _np_where_struct(alive, new_state, state)
    return np.stack(outs, 1), state


def _np_where_struct(alive, new, old):
    if isinstance(new, tuple):
        return tuple(_np_where_struct(alive, n, o) for n, o in zip(new, old))
    return np.where(alive, new, old)


def fetch_weights(sess, prefix):
    """{suffix: value} of the global variables whose names start with prefix + '/'."""
    out = {}
    for v in kf.global_variables():
        name = v.name[:-2]
        if name.startswith(prefix + "/"):
            out[name[len(prefix) + 1:]] = sess.run(v)
    return out


def var_names():
    return sorted(v.name[:-2] for v in kf.global_variables())


@pytest.fixture
def graph():
    with kf.Graph().as_default() as g:
        kf.set_random_seed(1)
        yield g


RNG = np.random.RandomState(0)
LENGTHS = np.array([4, 1, 3], np.int32)


def rand(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


# ------------------------------------------------------------------------------ cells
@pytest.mark.parametrize("name, make, np_step, scope", [
    ("basic_rnn", lambda: rc.BasicRNNCell(4), np_basic_rnn, "basic_rnn_cell"),
    ("gru", lambda: rc.GRUCell(4), np_gru, "gru_cell"),
    ("basic_lstm", lambda: rc.BasicLSTMCell(4), np_basic_lstm, "basic_lstm_cell"),
])
def test_cell_one_step_matches_numpy(graph, name, make, np_step, scope):
    cell = make()
    x = kf.placeholder(kf.float32, [None, 3])
    state = cell.zero_state(kf.shape(x)[0], kf.float32)
    out, new_state = cell(x, state)
    assert cell.output_size == 4
    x_val = rand(2, 3)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        w = fetch_weights(sess, scope)
        got_out, got_state = sess.run([out, new_state], {x: x_val})
    zeros = np.zeros((2, 4), np.float32)
    want_out, want_state = np_step(x_val, (zeros, zeros) if name == "basic_lstm" else zeros, w)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_state), np.asarray(want_state), rtol=1e-5, atol=1e-6)


def test_cell_variable_names(graph):
    x = kf.zeros([2, 3])
    # One scope: as in TF, re-opening "rnn" resets its sub-scope counts, so a second cell
    # there would collide with the first's variables.
    with kf.variable_scope("rnn"):
        for cell in (rc.BasicRNNCell(4), rc.GRUCell(4), rc.BasicLSTMCell(4),
                     rc.LSTMCell(4, use_peepholes=True, num_proj=2), rc.BasicLSTMCell(4)):
            cell(x, cell.zero_state(2, kf.float32))
    assert var_names() == sorted([
        "rnn/basic_rnn_cell/kernel", "rnn/basic_rnn_cell/bias",
        "rnn/gru_cell/gates/kernel", "rnn/gru_cell/gates/bias",
        "rnn/gru_cell/candidate/kernel", "rnn/gru_cell/candidate/bias",
        "rnn/basic_lstm_cell/kernel", "rnn/basic_lstm_cell/bias",
        "rnn/lstm_cell/kernel", "rnn/lstm_cell/bias", "rnn/lstm_cell/w_f_diag",
        "rnn/lstm_cell/w_i_diag", "rnn/lstm_cell/w_o_diag", "rnn/lstm_cell/projection/kernel",
        "rnn/basic_lstm_cell_1/kernel", "rnn/basic_lstm_cell_1/bias"])
    shapes = {v.name[:-2]: v.shape.as_list() for v in kf.global_variables()}
    assert shapes["rnn/lstm_cell/kernel"] == [3 + 2, 16]
    assert shapes["rnn/gru_cell/gates/kernel"] == [7, 8]


def test_gru_gate_bias_starts_at_one(graph):
    cell = rc.GRUCell(2)
    cell(kf.zeros([1, 3]), kf.zeros([1, 2]))
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        np.testing.assert_array_equal(fetch_weights(sess, "gru_cell")["gates/bias"], np.ones(4))


def test_lstm_cell_peepholes_projection_clips(graph):
    cell = rc.LSTMCell(4, use_peepholes=True, cell_clip=0.5, num_proj=3, proj_clip=0.2,
                       forget_bias=0.5, initializer=kf.random_uniform_initializer(-1, 1, seed=3))
    assert cell.state_size == rc.LSTMStateTuple(4, 3) and cell.output_size == 3
    x = kf.placeholder(kf.float32, [2, 5])
    state = rc.LSTMStateTuple(kf.constant(rand(2, 4)), kf.constant(rand(2, 3)))
    out, new_state = cell(x, state)
    x_val = rand(2, 5)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        w = fetch_weights(sess, "lstm_cell")
        got_out, got_state, s0 = sess.run([out, new_state, state], {x: x_val})
    want_out, want_state = np_lstm(x_val, s0, w, cell_clip=0.5, proj_clip=0.2, forget_bias=0.5)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state.c, want_state[0], rtol=1e-5, atol=1e-6)
    assert isinstance(got_state, rc.LSTMStateTuple)
    assert np.abs(got_state.c).max() <= 0.5 and np.abs(got_out).max() <= 0.2 + 1e-7


def test_basic_lstm_concatenated_state(graph):
    cell = rc.BasicLSTMCell(3, state_is_tuple=False)
    assert cell.state_size == 6
    x = kf.constant(rand(2, 2))
    state = kf.constant(rand(2, 6))
    out, new_state = cell(x, state)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        w = fetch_weights(sess, "basic_lstm_cell")
        got_out, got_state, x_val, s0 = sess.run([out, new_state, x, state])
    want_out, (c, h) = np_basic_lstm(x_val, (s0[:, :3], s0[:, 3:]), w)
    np.testing.assert_allclose(got_state, np.concatenate([c, h], 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ dynamic_rnn
def test_dynamic_rnn_variable_lengths_matches_numpy(graph):
    cell = rc.BasicLSTMCell(4)
    x = kf.placeholder(kf.float32, [None, None, 3])
    seq = kf.placeholder(kf.int32, [None])
    outputs, state = rnn.dynamic_rnn(cell, x, sequence_length=seq, dtype=kf.float32)
    assert outputs.shape.as_list() == [None, None, 4]
    assert isinstance(state, rc.LSTMStateTuple)
    x_val = rand(3, 6, 3)   # time 6 > the longest length 4: the loop stops at 4, zeros after
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        w = fetch_weights(sess, "rnn/basic_lstm_cell")
        got_out, got_state = sess.run([outputs, state], {x: x_val, seq: LENGTHS})
    zeros = np.zeros((3, 4), np.float32)
    want_out, want_state = np_dynamic(np_basic_lstm, x_val, (zeros, zeros), LENGTHS, w)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state.c, want_state[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state.h, want_state[1], rtol=1e-5, atol=1e-6)
    assert (got_out[1, 1:] == 0).all()
    np.testing.assert_allclose(got_state.h[1], got_out[1, 0], rtol=1e-6)


def test_dynamic_rnn_time_major_and_initial_state(graph):
    cell = rc.GRUCell(4)
    x = kf.placeholder(kf.float32, [5, 3, 2])     # [time, batch, depth]
    h0 = kf.constant(rand(3, 4))
    outputs, state = rnn.dynamic_rnn(cell, x, sequence_length=LENGTHS, initial_state=h0,
                                     time_major=True)
    assert outputs.shape.as_list() == [5, 3, 4]
    x_val = rand(5, 3, 2)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        w = fetch_weights(sess, "rnn/gru_cell")
        got_out, got_state, h0_val = sess.run([outputs, state, h0], {x: x_val})
    want_out, want_state = np_dynamic(np_gru, x_val.transpose(1, 0, 2), h0_val, LENGTHS, w)
    np.testing.assert_allclose(got_out, want_out.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state, want_state, rtol=1e-5, atol=1e-6)


def test_dynamic_rnn_without_lengths_and_errors(graph):
    cell = rc.BasicRNNCell(3)
    x = kf.constant(rand(2, 4, 3))
    outputs, state = rnn.dynamic_rnn(cell, x, dtype=kf.float32, scope="my_rnn")
    assert var_names() == ["my_rnn/basic_rnn_cell/bias", "my_rnn/basic_rnn_cell/kernel"]
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        w = fetch_weights(sess, "my_rnn/basic_rnn_cell")
        got_out, got_state, x_val = sess.run([outputs, state, x])
    want_out, want_state = np_dynamic(np_basic_rnn, x_val, np.zeros((2, 3)), np.full(2, 4), w)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state, got_out[:, -1], rtol=1e-6)
    with pytest.raises(ValueError, match="must give a dtype"):
        rnn.dynamic_rnn(cell, x)
    with pytest.raises(ValueError, match="sequence_length must be a vector"):
        rnn.dynamic_rnn(cell, x, sequence_length=[[1]], dtype=kf.float32)
    with pytest.raises(TypeError, match="not an RNNCell"):
        rnn.dynamic_rnn(object(), x, dtype=kf.float32)


class _PairCell(rc.RNNCell):
    """A cell with nested inputs (a, b), nested output (sum, diff) and a tuple state."""

    @property
    def state_size(self):
        return (2, rc.LSTMStateTuple(2, 2))

    @property
    def output_size(self):
        return {"sum": 2, "diff": 2}

    def call(self, inputs, state):
        a, b = inputs
        s, st = state
        new_s = s + a
        return {"sum": new_s, "diff": a - b}, (new_s, rc.LSTMStateTuple(st.c + b, st.h - b))


def test_dynamic_rnn_nested_inputs_outputs_and_state(graph):
    a, b = kf.constant(rand(3, 4, 2)), kf.constant(rand(3, 4, 2))
    outputs, state = rnn.dynamic_rnn(_PairCell(), (a, b), sequence_length=LENGTHS,
                                     dtype=kf.float32)
    with kf.Session() as sess:
        got_out, got_state, a_val, b_val = sess.run([outputs, state, a, b])
    mask = (np.arange(4)[None, :] < LENGTHS[:, None])[..., None]
    cum = np.cumsum(a_val * mask, 1)
    np.testing.assert_allclose(got_out["sum"], cum * mask, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_out["diff"], (a_val - b_val) * mask, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state[0], cum[:, -1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state[1].h, -(b_val * mask).sum(1), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ stacking, reuse
def test_multi_rnn_cell_names_reuse_and_values(graph):
    cell = rc.MultiRNNCell([rc.BasicLSTMCell(4), rc.BasicLSTMCell(3)])
    assert cell.state_size == (rc.LSTMStateTuple(4, 4), rc.LSTMStateTuple(3, 3))
    x = kf.constant(rand(3, 5, 2))
    outputs, state = rnn.dynamic_rnn(cell, x, sequence_length=LENGTHS, dtype=kf.float32)
    names = var_names()
    assert names == sorted(["rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel",
                            "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias",
                            "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/kernel",
                            "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/bias"])
    # A second use of the built cell, anywhere, reuses the same variables.
    with kf.variable_scope("elsewhere"):
        rnn.static_rnn(cell, kf.unstack(x, axis=1), dtype=kf.float32)
    assert var_names() == names
    assert len(cell.variables) == 4
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        w0 = fetch_weights(sess, "rnn/multi_rnn_cell/cell_0/basic_lstm_cell")
        w1 = fetch_weights(sess, "rnn/multi_rnn_cell/cell_1/basic_lstm_cell")
        got_out, got_state, x_val = sess.run([outputs, state, x])

    def step(xt, st, _):
        o0, s0 = np_basic_lstm(xt, st[0], w0)
        o1, s1 = np_basic_lstm(o0, st[1], w1)
        return o1, (s0, s1)
    z4, z3 = np.zeros((3, 4)), np.zeros((3, 3))
    want_out, want_state = np_dynamic(step, x_val, ((z4, z4), (z3, z3)), LENGTHS, None)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state[1].h, want_state[1][1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_state[0].c, want_state[0][0], rtol=1e-5, atol=1e-6)


def test_multi_rnn_cell_concatenated_state(graph):
    cell = rc.MultiRNNCell([rc.GRUCell(2), rc.GRUCell(3)], state_is_tuple=False)
    assert cell.state_size == 5
    outputs, state = rnn.dynamic_rnn(cell, kf.constant(rand(2, 3, 2)), dtype=kf.float32)
    assert state.shape.as_list() == [2, 5] and outputs.shape.as_list() == [2, 3, 3]
    with pytest.raises(ValueError, match="state_is_tuple"):
        rc.MultiRNNCell([rc.BasicLSTMCell(2)], state_is_tuple=False)


def test_static_rnn_equals_dynamic_rnn(graph):
    cell = rc.LSTMCell(4, use_peepholes=True, num_proj=3)
    x = kf.constant(rand(3, 5, 2))
    dyn_out, dyn_state = rnn.dynamic_rnn(cell, x, sequence_length=LENGTHS, dtype=kf.float32)
    n_vars = len(kf.global_variables())
    st_out, st_state = rnn.static_rnn(cell, kf.unstack(x, axis=1), sequence_length=LENGTHS,
                                      dtype=kf.float32)
    assert len(st_out) == 5 and len(kf.global_variables()) == n_vars
    # static_rnn with a fresh cell creates one set of variables, reused over the steps.
    rnn.static_rnn(rc.GRUCell(2), kf.unstack(x, axis=1), dtype=kf.float32, scope="fresh")
    assert [n for n in var_names() if n.startswith("fresh/")] == [
        "fresh/gru_cell/candidate/bias", "fresh/gru_cell/candidate/kernel",
        "fresh/gru_cell/gates/bias", "fresh/gru_cell/gates/kernel"]
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        a, b, sa, sb = sess.run([dyn_out, kf.stack(st_out, 1), dyn_state, st_state])
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sa.c, sb.c, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sa.h, sb.h, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ bidirectional
def test_reverse_sequence(graph):
    x_val = rand(3, 5, 2)
    bm = rnn.reverse_sequence(kf.constant(x_val), LENGTHS, seq_axis=1, batch_axis=0)
    tm = rnn.reverse_sequence(kf.constant(x_val.transpose(1, 0, 2)), LENGTHS, 0, 1)
    with kf.Session() as sess:
        got_bm, got_tm = sess.run([bm, tm])
    want = x_val.copy()
    for b, n in enumerate(LENGTHS):
        want[b, :n] = x_val[b, :n][::-1]
    np.testing.assert_array_equal(got_bm, want)
    np.testing.assert_array_equal(got_tm, want.transpose(1, 0, 2))


def test_bidirectional_dynamic_rnn_matches_numpy(graph):
    fw, bw = rc.GRUCell(3), rc.BasicRNNCell(2)
    x = kf.placeholder(kf.float32, [None, 5, 2])
    (out_fw, out_bw), (st_fw, st_bw) = rnn.bidirectional_dynamic_rnn(
        fw, bw, x, sequence_length=LENGTHS, dtype=kf.float32)
    assert var_names() == sorted([
        "bidirectional_rnn/fw/gru_cell/gates/kernel", "bidirectional_rnn/fw/gru_cell/gates/bias",
        "bidirectional_rnn/fw/gru_cell/candidate/kernel",
        "bidirectional_rnn/fw/gru_cell/candidate/bias",
        "bidirectional_rnn/bw/basic_rnn_cell/kernel", "bidirectional_rnn/bw/basic_rnn_cell/bias"])
    x_val = rand(3, 5, 2)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        wf = fetch_weights(sess, "bidirectional_rnn/fw/gru_cell")
        wb = fetch_weights(sess, "bidirectional_rnn/bw/basic_rnn_cell")
        got = sess.run([out_fw, out_bw, st_fw, st_bw], {x: x_val})
    want_fw, want_st_fw = np_dynamic(np_gru, x_val, np.zeros((3, 3)), LENGTHS, wf)
    x_rev = x_val.copy()
    for b, n in enumerate(LENGTHS):
        x_rev[b, :n] = x_val[b, :n][::-1]
    rev_out, want_st_bw = np_dynamic(np_basic_rnn, x_rev, np.zeros((3, 2)), LENGTHS, wb)
    want_bw = rev_out.copy()
    for b, n in enumerate(LENGTHS):
        want_bw[b, :n] = rev_out[b, :n][::-1]
    for g, w in zip(got, [want_fw, want_bw, want_st_fw, want_st_bw]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_static_bidirectional_equals_dynamic(graph):
    fw, bw = rc.BasicLSTMCell(3), rc.GRUCell(2)
    x = kf.constant(rand(3, 4, 2))
    (dfw, dbw), (dsf, dsb) = rnn.bidirectional_dynamic_rnn(fw, bw, x, sequence_length=LENGTHS,
                                                          dtype=kf.float32)
    outs, ssf, ssb = rnn.static_bidirectional_rnn(fw, bw, kf.unstack(x, axis=1), dtype=kf.float32,
                                                  sequence_length=LENGTHS)
    assert outs[0].shape.as_list() == [3, 5]
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        d, s, a, b = sess.run([kf.concat([dfw, dbw], 2), kf.stack(outs, 1), (dsf, dsb), (ssf, ssb)])
    np.testing.assert_allclose(d, s, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a[0].h, b[0].h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ raw_rnn
def test_raw_rnn_equals_dynamic_rnn(graph):
    cell = rc.BasicLSTMCell(3)
    x_val = rand(3, 5, 2)
    x_tm = kf.constant(x_val.transpose(1, 0, 2))
    inputs_ta = kf.TensorArray(kf.float32, size=5).unstack(x_tm)
    lengths = kf.constant(LENGTHS)

    def loop_fn(time, cell_output, cell_state, loop_state):
        if cell_output is None:
            next_state = cell.zero_state(3, kf.float32)
            emit = None
        else:
            next_state, emit = cell_state, cell_output
        finished = time >= lengths
        next_input = kf.cond(kf.reduce_all(finished), lambda: kf.zeros([3, 2]),
                             lambda: inputs_ta.read(time))
        next_input.set_shape([3, 2])
        return finished, next_input, next_state, emit, None

    emit_ta, final_state, final_loop_state = rnn.raw_rnn(cell, loop_fn)
    assert final_loop_state is None
    raw_out = emit_ta.stack()
    dyn_out, dyn_state = rnn.dynamic_rnn(cell, x_tm, sequence_length=lengths, time_major=True,
                                         dtype=kf.float32)
    assert var_names() == ["rnn/basic_lstm_cell/bias", "rnn/basic_lstm_cell/kernel"]
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        r, d, rs, ds = sess.run([raw_out, dyn_out, final_state, dyn_state])
    assert r.shape == (4, 3, 3)    # the loop stops once every row is finished
    np.testing.assert_allclose(r, d[:4], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rs.c, ds.c, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="loop_fn must be a callable"):
        rnn.raw_rnn(cell, None)


# ------------------------------------------------------------------------------ wrappers
def test_dropout_wrapper(graph):
    base = rc.BasicLSTMCell(50)
    x = kf.ones([4, 3])
    state = rc.LSTMStateTuple(kf.ones([4, 50]), kf.ones([4, 50]))
    plain_out, plain_state = base(x, state)
    kept = rc.DropoutWrapper(base, input_keep_prob=1.0, output_keep_prob=1.0)
    same_out, _ = kept(x, state)
    drop = rc.DropoutWrapper(base, output_keep_prob=0.5, state_keep_prob=0.5, seed=3)
    d_out, d_state = drop(x, state)
    assert len(kf.global_variables()) == 2      # wrappers reuse the wrapped cell's variables
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        p, s, o, ds, ps = sess.run([plain_out, same_out, d_out, d_state, plain_state])
    np.testing.assert_allclose(p, s, rtol=1e-6)
    dropped = o == 0
    assert 0.25 < dropped.mean() < 0.75
    np.testing.assert_allclose(o[~dropped], 2 * p[~dropped], rtol=1e-5)
    np.testing.assert_allclose(ds.c, ps.c, rtol=1e-6)  # the memory cell is never dropped
    assert 0.25 < (ds.h == 0).mean() < 0.75


def test_dropout_wrapper_variational_shares_mask_over_time(graph):
    cell = rc.DropoutWrapper(rc.BasicRNNCell(40), output_keep_prob=0.5, input_keep_prob=0.99,
                             input_size=3, variational_recurrent=True, dtype=kf.float32, seed=1)
    outputs, _ = rnn.dynamic_rnn(cell, kf.ones([2, 4, 3]), dtype=kf.float32)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        out = sess.run(outputs)
    zero = out == 0
    assert zero.any() and not zero.all()
    assert (zero == zero[:1, :1]).all()     # one [1, units] mask for every row and step
    with pytest.raises(ValueError, match="dtype must be provided"):
        rc.DropoutWrapper(rc.GRUCell(2), variational_recurrent=True)


def test_residual_and_device_wrappers(graph):
    inner = rc.GRUCell(3)
    cell = rc.DeviceWrapper(rc.ResidualWrapper(inner), "/cpu:0")
    x = kf.constant(rand(2, 3))
    out, state = cell(x, cell.zero_state(2, kf.float32))
    assert out.op.device.lower().endswith("cpu:0")
    assert var_names()[0].startswith("gru_cell/")
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        o, s, xv = sess.run([out, state, x])
    np.testing.assert_allclose(o, xv + s, rtol=1e-6)


# ------------------------------------------------------------------------------ gradients
def test_dynamic_rnn_gradient_check(graph):
    cell = rc.GRUCell(2, kernel_initializer=kf.random_uniform_initializer(-0.5, 0.5, seed=2))
    x = kf.placeholder(kf.float64, [2, 3, 2])
    outputs, state = rnn.dynamic_rnn(cell, x, sequence_length=[3, 2], dtype=kf.float64)
    y = kf.reduce_sum(outputs * outputs, axis=2) + kf.reduce_sum(state)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        error = gradient_checker.compute_gradient_error(x, [2, 3, 2], y, [2, 3],
                                                        x_init_value=rand(2, 3, 2).astype(float))
        kernel = [v for v in kf.global_variables() if v.name.endswith("gates/kernel:0")][0]
        error_w = gradient_checker.compute_gradient_error(
            kernel, [4, 4], y, [2, 3], extra_feed_dict={x: rand(2, 3, 2).astype(float)})
    assert error < 1e-6 and error_w < 1e-6


def test_training_a_sequence_model_lowers_the_loss(graph):
    # Predict the running sum's sign of a scalar sequence, variable lengths.
    rng = np.random.RandomState(4)
    xs = rng.uniform(-1, 1, (16, 6, 1)).astype(np.float32)
    lengths = rng.randint(2, 7, size=16).astype(np.int32)
    mask = (np.arange(6)[None] < lengths[:, None]).astype(np.float32)
    targets = (np.cumsum(xs[..., 0] * mask, 1) > 0).astype(np.float32)
    cell = rc.MultiRNNCell([rc.BasicLSTMCell(8), rc.GRUCell(8)])
    outputs, _ = rnn.dynamic_rnn(cell, kf.constant(xs), sequence_length=lengths, dtype=kf.float32)
    w = kf.get_variable("w_out", [8, 1])
    logits = kf.reshape(kf.matmul(kf.reshape(outputs, [-1, 8]), w), [16, 6])
    loss = kf.reduce_sum(kf.nn.sigmoid_cross_entropy_with_logits(labels=targets, logits=logits)
                         * mask) / mask.sum()
    train = kf.train.AdamOptimizer(0.05).minimize(loss)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(40):
            sess.run(train)
        last = sess.run(loss)
    assert last < 0.6 * first


def test_bidirectional_gradient_check(graph):
    init = kf.random_uniform_initializer(-0.5, 0.5, seed=5)
    with kf.variable_scope("bi", initializer=init):
        x = kf.placeholder(kf.float64, [2, 3, 2])
        (out_fw, out_bw), _ = rnn.bidirectional_dynamic_rnn(
            rc.BasicRNNCell(2), rc.BasicLSTMCell(2), x, sequence_length=[3, 2], dtype=kf.float64)
    y = kf.reduce_sum(out_fw * out_bw, axis=2)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        error = gradient_checker.compute_gradient_error(x, [2, 3, 2], y, [2, 3],
                                                        x_init_value=rand(2, 3, 2).astype(float))
    assert error < 1e-6


def test_scope_argument_and_public_namespace(graph):
    from kernflow.core.ops import rnn_cell
    assert rnn_cell.BasicLSTMCell is rc.BasicLSTMCell and len(rnn_cell.__all__) == 10
    cell = rnn_cell.BasicRNNCell(2)
    with kf.variable_scope("outer"):
        cell(kf.zeros([1, 3]), kf.zeros([1, 2]), scope="mine")
    cell(kf.zeros([1, 3]), kf.zeros([1, 2]), scope="ignored_once_built")
    assert var_names() == ["outer/mine/bias", "outer/mine/kernel"]
    assert cell.scope_name == "outer/mine"

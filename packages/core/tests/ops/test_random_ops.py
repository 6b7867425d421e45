"""Python-level behaviour of the random op wrappers: seeds, names, shapes, statistics, errors."""

import threading

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def _run(fetches, graph, runs=1):
    with kf.Session(graph=graph) as sess:
        return [sess.run(fetches) for _ in range(runs)]


def _build_seeded(graph_seed, op_seed=None):
    g = kf.Graph()
    with g.as_default():
        if graph_seed is not None:
            kf.set_random_seed(graph_seed)
        kf.constant(1.0)  # ops before the random ops shift the op-count seeds alike
        a = kf.random_normal([50], seed=op_seed)
        b = kf.random_uniform([50], seed=op_seed)
        c = kf.truncated_normal([50], seed=op_seed)
        d = kf.random_uniform([50], maxval=100, dtype=kf.int64, seed=op_seed)
        e = kf.random_shuffle(np.arange(50), seed=op_seed)
    return g, [a, b, c, d, e]


# ---------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("graph_seed,op_seed", [(42, None), (None, 7), (3, 9)])
def test_same_seeds_same_construction_give_same_values(graph_seed, op_seed):
    g1, t1 = _build_seeded(graph_seed, op_seed)
    g2, t2 = _build_seeded(graph_seed, op_seed)
    v1, v2 = _run(t1, g1)[0], _run(t2, g2)[0]
    for x, y in zip(v1, v2):
        np.testing.assert_array_equal(x, y)


def test_successive_runs_differ_and_fresh_session_repeats():
    g, ts = _build_seeded(42)
    first = _run(ts, g, runs=2)
    again = _run(ts, g, runs=2)
    for i in range(len(ts)):
        assert not np.array_equal(first[0][i], first[1][i]), f"tensor {i} repeated across runs"
        np.testing.assert_array_equal(first[0][i], again[0][i])
        np.testing.assert_array_equal(first[1][i], again[1][i])


def test_different_op_seeds_differ():
    g = kf.Graph()
    with g.as_default():
        a = kf.random_normal([100], seed=1)
        b = kf.random_normal([100], seed=2)
        kf.set_random_seed(5)
        c = kf.random_normal([100])
        d = kf.random_normal([100])
    va, vb, vc, vd = _run([a, b, c, d], g)[0]
    assert not np.array_equal(va, vb)
    assert not np.array_equal(vc, vd)


def test_graph_seed_changes_values():
    g1, t1 = _build_seeded(1)
    g2, t2 = _build_seeded(2)
    assert not np.array_equal(_run(t1[0], g1)[0], _run(t2[0], g2)[0])


def test_unseeded_ops_are_nondeterministic():
    g = kf.Graph()
    with g.as_default():
        x = kf.random_uniform([100])
    assert (x.op.get_attr("seed"), x.op.get_attr("seed2")) == (0, 0)
    assert not np.array_equal(_run(x, g)[0], _run(x, g)[0])


def test_concurrent_runs_share_one_stream():
    g = kf.Graph()
    with g.as_default():
        x = kf.random_uniform([4], seed=1)
    out, errs = [], []
    with kf.Session(graph=g) as sess:
        def work():
            try:
                for _ in range(25):
                    out.append(sess.run(x))
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errs.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errs
    assert len({v.tobytes() for v in out}) == 100


# ---------------------------------------------------------------------------- statistics
def test_random_normal_mean_stddev():
    with kf.Graph().as_default() as g:
        x = kf.random_normal([100_000], mean=3.0, stddev=0.5, dtype=kf.float64, seed=1)
    v = _run(x, g)[0]
    assert v.dtype == np.float64
    assert abs(v.mean() - 3.0) < 0.01 and abs(v.std() - 0.5) < 0.01


def test_random_uniform_range_float_and_int():
    with kf.Graph().as_default() as g:
        f = kf.random_uniform([100_000], minval=-2.0, maxval=6.0, seed=1)
        h = kf.random_uniform([100_000], maxval=4, dtype=kf.float16, seed=2)
        i = kf.random_uniform([100_000], minval=-5, maxval=5, dtype=kf.int32, seed=3)
    vf, vh, vi = _run([f, h, i], g)[0]
    assert vf.dtype == np.float32 and vh.dtype == np.float16 and vi.dtype == np.int32
    assert vf.min() >= -2 and vf.max() < 6 and abs(vf.mean() - 2.0) < 0.05
    assert vh.min() >= 0 and vh.max() < 4 and abs(vh.astype(np.float64).mean() - 2.0) < 0.05
    assert vi.min() == -5 and vi.max() == 4 and abs(vi.mean() + 0.5) < 0.05


def test_truncated_normal_bound():
    with kf.Graph().as_default() as g:
        x = kf.truncated_normal([100_000], mean=1.0, stddev=3.0, seed=4)
    v = _run(x, g)[0].astype(np.float64)
    assert v.min() >= 1.0 - 6.0 - 1e-5 and v.max() <= 1.0 + 6.0 + 1e-5
    assert abs(v.mean() - 1.0) < 0.05
    assert abs(v.std() - 3.0 * 0.8796) < 0.05


def test_random_shuffle_is_a_permutation_of_rows():
    data = np.arange(40).reshape(20, 2)
    with kf.Graph().as_default() as g:
        x = kf.random_shuffle(data, seed=1)
    v = _run(x, g)[0]
    np.testing.assert_array_equal(np.sort(v[:, 0]), data[:, 0])
    np.testing.assert_array_equal(v[:, 1], v[:, 0] + 1)
    assert not np.array_equal(v, data)


def test_multinomial_and_categorical():
    logits = np.log(np.array([[0.1, 0.9], [0.5, 0.5]]))
    with kf.Graph().as_default() as g:
        m = kf.multinomial(logits, 10_000, seed=1)
        c = kf.random.categorical(logits.astype(np.float32), 10_000, dtype=kf.int32, seed=2)
    assert m.op.name == "multinomial" and c.op.name == "categorical"
    assert m.shape.as_list() == [2, 10_000] and m.dtype == kf.int64 and c.dtype == kf.int32
    vm, vc = _run([m, c], g)[0]
    for v in (vm, vc):
        assert abs(v[0].mean() - 0.9) < 0.02 and abs(v[1].mean() - 0.5) < 0.02


# ---------------------------------------------------------------------------- names and attrs
def test_default_names_and_attrs():
    with kf.Graph().as_default():
        n = kf.random_normal([2])
        t = kf.truncated_normal([2])
        u = kf.random_uniform([2])
        u2 = kf.random_uniform([2], maxval=3.0)
        u3 = kf.random_uniform([2], minval=1.0)
        i = kf.random_uniform([2], maxval=3, dtype=kf.int32)
        s = kf.random_shuffle([1, 2, 3])
        named = kf.random_normal([2], name="noise")
    assert n.op.name == "random_normal" and n.op.type == "AddV2"
    assert n.op.inputs[0].op.inputs[0].op.type == "RandomStandardNormal"
    assert n.op.inputs[0].op.inputs[0].op.name == "random_normal/RandomStandardNormal"
    assert t.op.name == "truncated_normal"
    assert u.op.name == "random_uniform/RandomUniform"
    assert u2.op.name == "random_uniform_1/Mul"
    assert u3.op.name == "random_uniform_2"
    assert i.op.name == "random_uniform_3" and i.op.type == "RandomUniformInt"
    assert i.op.get_attr("Tout") == kf.int32
    assert s.op.name == "RandomShuffle"
    assert named.op.name == "noise"
    assert n.op.inputs[0].op.inputs[0].op.get_attr("T") == kf.int32


def test_random_ops_are_stateful():
    with kf.Graph().as_default():
        x = kf.random_uniform([2])
    assert x.op.op_def.stateful


def test_aliases():
    with kf.Graph().as_default():
        assert kf.random.normal([2]).op.name == "random_normal"
        assert kf.random.uniform([2]).op.name == "random_uniform/RandomUniform"
        assert kf.random.truncated_normal([2]).op.name == "truncated_normal"
        assert kf.random.shuffle([1, 2]).op.type == "RandomShuffle"


# ---------------------------------------------------------------------------- static shapes
def test_static_shapes():
    with kf.Graph().as_default():
        assert kf.random_normal([2, 3]).shape.as_list() == [2, 3]
        assert kf.random_uniform((4,), dtype=kf.float64).shape.as_list() == [4]
        assert kf.random_uniform([]).shape.as_list() == []
        assert kf.truncated_normal(kf.TensorShape([5, 1])).shape.as_list() == [5, 1]
        assert kf.random_uniform(np.array([3, 2], np.int64)).op.inputs[0].dtype == kf.int64
        p = kf.placeholder(kf.int32, [3])
        assert kf.random_normal(p).shape.as_list() == [None, None, None]
        q = kf.placeholder(kf.int32)
        assert kf.random_uniform(q).shape.rank is None
        assert kf.random_shuffle(kf.placeholder(kf.float32, [None, 4])).shape.as_list() == [None, 4]


def test_unknown_shape_runs():
    with kf.Graph().as_default() as g:
        p = kf.placeholder(kf.int32, [None])
        x = kf.random_normal(p, seed=1)
    with kf.Session(graph=g) as sess:
        assert sess.run(x, {p: [2, 5]}).shape == (2, 5)
        assert sess.run(x, {p: [7]}).shape == (7,)


def test_bad_shape_rank_is_value_error():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="rank 1"):
            kf.random_normal(kf.placeholder(kf.int32, [2, 2]))
        with pytest.raises(ValueError, match="rank 0"):
            kf.random_uniform([2], minval=kf.placeholder(kf.int32, [2]), maxval=3, dtype=kf.int32)


# ---------------------------------------------------------------------------- errors
def test_int_uniform_requires_maxval():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="maxval"):
            kf.random_uniform([2], dtype=kf.int32)


def test_invalid_dtypes():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="int32"):
            kf.random_normal([2], dtype=kf.int32)
        with pytest.raises(ValueError, match="bool"):
            kf.random_uniform([2], dtype=kf.bool)
        with pytest.raises(TypeError):
            kf.random_uniform(kf.placeholder(kf.float32, [2]))


def test_runtime_errors_name_the_node():
    with kf.Graph().as_default() as g:
        p = kf.placeholder(kf.int32, [None])
        x = kf.random_uniform(p, name="u")
        lo = kf.placeholder(kf.int32, [])
        i = kf.random_uniform([3], minval=lo, maxval=2, dtype=kf.int32, name="ints")
    with kf.Session(graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match=r"u/RandomUniform.*negative"):
            sess.run(x, {p: [2, -1]})
        with pytest.raises(errors.InvalidArgumentError, match=r"ints.*minval < maxval: 5 >= 2"):
            sess.run(i, {lo: 5})

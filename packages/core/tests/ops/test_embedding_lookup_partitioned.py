"""embedding_lookup over partitioned parameters (kernflow/core/ops/nn_ops_impl.py): lookups,
gradients and optimizer updates over 1, 2 and 3 shards equal the unpartitioned model's."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.framework.indexed_slices import IndexedSlices

ROWS, DIM = 11, 3
FULL = np.random.RandomState(0).uniform(-1, 1, (ROWS, DIM)).astype(np.float32)
IDS = np.array([[0, 4, 4], [10, 7, 2]], np.int64)
TOUCHED = sorted(set(IDS.ravel()))
OPTIMIZERS = {"sgd": lambda: kf.train.GradientDescentOptimizer(0.5),
              "adagrad": lambda: kf.train.AdagradOptimizer(0.5),
              "adam": lambda: kf.train.AdamOptimizer(0.1)}


def _mod_layout(n):
    return [FULL[p::n] for p in range(n)]


def _model(shards, strategy, opt, max_norm=None):
    """(graph, lookup, full-value tensor, grads, train op); shards=0 is the plain variable."""
    g = kf.Graph()
    with g.as_default():
        if shards == 0:
            params = kf.get_variable("emb", initializer=FULL)
            full = params.value()
        elif strategy == "div":
            params = kf.get_variable("emb", initializer=FULL,
                                     partitioner=kf.fixed_size_partitioner(shards))
            full = params.as_tensor()
        else:
            params = [kf.get_variable(f"emb_{p}", initializer=v)
                      for p, v in enumerate(_mod_layout(shards))]
            full = None
        x = kf.nn.embedding_lookup(params, IDS, partition_strategy=strategy, max_norm=max_norm)
        loss = kf.reduce_sum(x * x * kf.constant(np.arange(DIM, dtype=np.float32) + 1.0))
        var_list = kf.trainable_variables()
        grads = kf.gradients(loss, var_list)
        train = OPTIMIZERS[opt]().minimize(loss) if opt else None
    return g, x, full, grads, train, var_list


def _dense(grads, session):
    out = []
    for gr in grads:
        if isinstance(gr, IndexedSlices):
            vals, idx, shape = session.run([gr.values, gr.indices, gr.dense_shape])
            d = np.zeros(shape, vals.dtype)
            np.add.at(d, idx, vals)
            out.append(d)
        else:
            out.append(session.run(gr))
    return out


def _full_from_parts(parts, strategy):
    if strategy == "div":
        return np.concatenate(parts)
    out = np.zeros((ROWS, DIM), np.float32)
    for p, v in enumerate(parts):
        out[p::len(parts)] = v
    return out


@pytest.mark.parametrize("strategy", ["div", "mod"])
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_lookup_and_gradients_match_unpartitioned(shards, strategy):
    g0, x0, _, grads0, _, _ = _model(0, strategy, None)
    with g0.as_default(), kf.Session() as s:
        s.run(kf.global_variables_initializer())
        want_x, want_g = s.run(x0), _dense(grads0, s)[0]
    g, x, _, grads, _, var_list = _model(shards, strategy, None)
    assert len(var_list) == shards
    assert all(isinstance(gr, IndexedSlices) for gr in grads)
    with g.as_default(), kf.Session() as s:
        s.run(kf.global_variables_initializer())
        np.testing.assert_allclose(s.run(x), want_x, rtol=1e-6)
        got = _full_from_parts(_dense(grads, s), strategy)
    np.testing.assert_allclose(got, want_g, rtol=1e-6)


def test_each_shard_gather_is_colocated_with_its_shard():
    g = kf.Graph()
    with g.as_default():
        with kf.device(kf.train.replica_device_setter(ps_tasks=3)):
            w = kf.get_variable("emb", shape=[ROWS, DIM], partitioner=kf.fixed_size_partitioner(3))
            kf.nn.embedding_lookup(w, IDS, partition_strategy="div")
        parts = {v.op.name for v in w}
        gathers = [op for op in g.get_operations() if op.type in ("Gather", "GatherV2")
                   and op.inputs[0].op.name.split("/read")[0] in parts]
    assert [op.device for op in gathers] == [v.device for v in w]
    assert [v.device for v in w] == [f"/job:ps/task:{i}" for i in range(3)]


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
@pytest.mark.parametrize("shards", [1, 2, 3])
def test_optimizer_updates_match_unpartitioned(opt, shards):
    results = {}
    for n in (0, shards):
        g, _, full, _, train, var_list = _model(n, "div", opt)
        with g.as_default(), kf.Session() as s:
            s.run(kf.global_variables_initializer())
            s.run(train)
            first = s.run(full)
            for _ in range(2):
                s.run(train)
            results[n] = first, s.run(full)
    untouched = [r for r in range(ROWS) if r not in TOUCHED]
    np.testing.assert_array_equal(results[shards][0][untouched], FULL[untouched])
    assert not np.allclose(results[shards][0][TOUCHED], FULL[TOUCHED])
    for a, b in zip(results[0], results[shards]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_optimizer_slots_are_partitioned_like_the_variable():
    g, _, _, _, _, var_list = _model(3, "div", None)
    with g.as_default():
        opt = kf.train.AdamOptimizer(0.1)
        loss = kf.reduce_sum(kf.nn.embedding_lookup(var_list, IDS, partition_strategy="div"))
        opt.minimize(loss)
        slots = [opt.get_slot(v, "m") for v in var_list]
    assert [s.op.name for s in slots] == [f"emb/part_{i}/Adam" for i in range(3)]
    assert [s.get_shape() for s in slots] == [v.get_shape() for v in var_list]
    assert all(s._save_slice_info.full_name == "emb/Adam" for s in slots)
    assert [s._save_slice_info.var_offset for s in slots] == \
        [v._save_slice_info.var_offset for v in var_list]


@pytest.mark.parametrize("shards", [1, 3])
def test_max_norm_clips_like_unpartitioned(shards):
    outs = []
    for n in (0, shards):
        g, x, _, grads, _, _ = _model(n, "div", None, max_norm=0.5)
        with g.as_default(), kf.Session() as s:
            s.run(kf.global_variables_initializer())
            outs.append((s.run(x), _full_from_parts(_dense(grads, s), "div")))
    np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-6)
    np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-5, atol=1e-7)
    assert np.all(np.linalg.norm(outs[1][0], axis=-1) <= 0.5 + 1e-6)


@pytest.mark.parametrize("strategy", ["div", "mod"])
@pytest.mark.parametrize("bad", [ROWS, ROWS + 20, -1])
def test_out_of_range_ids_raise_invalid_argument(strategy, bad):
    g = kf.Graph()
    with g.as_default():
        w = kf.get_variable("emb", shape=[ROWS, DIM], partitioner=kf.fixed_size_partitioner(3))
        x = kf.nn.embedding_lookup(w, [0, bad], partition_strategy=strategy)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            with pytest.raises(errors.InvalidArgumentError, match=rf"embedding_lookup.*\[{bad}\]"):
                s.run(x)


def test_out_of_range_row_in_a_shard_names_the_gather():
    g = kf.Graph()
    with g.as_default():
        params = [kf.Variable(np.zeros((2, DIM), np.float32)),
                  kf.Variable(np.zeros((2, DIM), np.float32))]
        ids = kf.placeholder(kf.int64, [None])
        x = kf.nn.embedding_lookup(params, ids, validate_indices=False)
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            with pytest.raises(errors.InvalidArgumentError, match=r"GatherV2.*indices\[0\] = 2"):
                s.run(x, feed_dict={ids: [5]})

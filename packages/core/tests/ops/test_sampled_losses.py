"""Sparse embedding lookups and sampled losses (kernflow/core/ops/nn_ops_sampled.py) against
numpy: combiners, weights, shards (mod/div), invalid ids, rank-3 ids, sparse gradients, nce_loss
and sampled_softmax_loss with fixed sampled values, and an nce model that learns."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.testing.gradient_checker import compute_gradient

ROWS, DIM = 10, 3
EMB = np.random.RandomState(0).uniform(-1, 1, (ROWS, DIM))
# Row 0: ids 1, 4, 4; row 1: empty; row 2: 9, 0 (last row with ids: 2 -> 3 output rows).
IND = np.array([[0, 0], [0, 1], [0, 2], [2, 0], [2, 1]], np.int64)
IDS = np.array([1, 4, 4, 9, 0], np.int64)
WTS = np.array([2.0, 0.5, 1.0, 3.0, 1.5])
SHAPE = np.array([4, 3], np.int64)


def _shards(n, strategy, value=EMB):
    if strategy == "mod":
        return [value[p::n] for p in range(n)]
    sizes = [ROWS // n + (1 if p < ROWS % n else 0) for p in range(n)]
    return np.split(value, np.cumsum(sizes)[:-1])


def _dense(combiner, weights, rows=3, ind=IND, ids=IDS):
    out = np.zeros((rows, DIM))
    w = np.ones(len(ids)) if weights is None else weights
    for r in range(rows):
        sel = ind[:, 0] == r
        if not sel.any():
            continue
        s = (EMB[ids[sel]] * w[sel, None]).sum(0)
        out[r] = {"sum": s, "mean": s / w[sel].sum(), "sqrtn": s / np.sqrt((w[sel] ** 2).sum())}[combiner]
    return out


@pytest.mark.parametrize("shards", [1, 2, 3])
@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_lookup_sparse_matches_dense(shards, strategy, combiner, weighted):
    with kf.Graph().as_default():
        params = [kf.Variable(v) for v in _shards(shards, strategy)]
        sp_ids = kf.SparseTensor(IND, IDS, SHAPE)
        sp_w = kf.SparseTensor(IND, WTS, SHAPE) if weighted else None
        out = kf.nn.embedding_lookup_sparse(params, sp_ids, sp_w, partition_strategy=strategy,
                                            combiner=combiner)
        grads = kf.gradients(kf.reduce_sum(out * out), params)
        assert all(isinstance(g, IndexedSlices) for g in grads)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            got = sess.run(out)
    expected = _dense(combiner, WTS if weighted else None)
    if weighted and combiner != "sum":
        expected[1] = np.nan      # as TF: an empty row's weight sum is 0, and 0 / 0 is NaN
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.parametrize("weighted", [False, True])
def test_embedding_lookup_sparse_gradient_is_numerically_right(weighted):
    with kf.Graph().as_default():
        params = [kf.Variable(v) for v in _shards(2, "mod")]
        sp_w = kf.SparseTensor(IND, WTS, SHAPE) if weighted else None
        out = kf.nn.embedding_lookup_sparse(params, kf.SparseTensor(IND, IDS, SHAPE), sp_w,
                                            combiner="sum" if weighted else "sqrtn")
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            for p, v in zip(params, _shards(2, "mod")):
                theo, num = compute_gradient(p, v.shape, out, [3, DIM], x_init_value=v)
                np.testing.assert_allclose(theo, num, atol=1e-6)


def test_embedding_lookup_sparse_errors():
    with kf.Graph().as_default():
        sp = kf.SparseTensor(IND, IDS, SHAPE)
        with pytest.raises(ValueError, match="combiner must be one of"):
            kf.nn.embedding_lookup_sparse(EMB, sp, None, combiner="max")
        with pytest.raises(TypeError, match="sp_ids must be SparseTensor"):
            kf.nn.embedding_lookup_sparse(EMB, IDS, None)
        with pytest.raises(TypeError, match="sp_weights must be either None or SparseTensor"):
            kf.nn.embedding_lookup_sparse(EMB, sp, WTS)


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("default_id", [None, 5])
@pytest.mark.parametrize("combiner", ["sum", "mean"])
def test_safe_embedding_lookup_sparse_prunes_and_fills(strategy, default_id, combiner):
    ids = np.array([1, -1, 4, 9, 0], np.int64)            # -1 is dropped
    wts = np.array([2.0, 1.0, 0.0, 3.0, 1.5])              # weight 0 dropped unless "sum"
    keep = (ids >= 0) & ((wts > 0) | (combiner == "sum"))
    expected = _dense(combiner, wts[keep], rows=4, ind=IND[keep], ids=ids[keep])
    for r in (1, 3):                                       # empty rows
        expected[r] = 0 if default_id is None else EMB[default_id]
    with kf.Graph().as_default():
        params = [kf.Variable(v) for v in _shards(3, strategy)]
        out = kf.nn.safe_embedding_lookup_sparse(
            params, kf.SparseTensor(IND, ids, SHAPE), kf.SparseTensor(IND, wts, SHAPE),
            combiner=combiner, default_id=default_id, partition_strategy=strategy)
        assert out.shape.as_list()[1:] == [DIM]
        grads = kf.gradients(kf.reduce_sum(out), params)
        assert all(isinstance(g, IndexedSlices) for g in grads)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            np.testing.assert_allclose(sess.run(out), expected, rtol=1e-10)


def test_safe_embedding_lookup_sparse_rank3_ids():
    ind = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0]], np.int64)
    ids = np.array([2, 3, 7], np.int64)
    with kf.Graph().as_default():
        out = kf.nn.safe_embedding_lookup_sparse(kf.constant(EMB), kf.SparseTensor(ind, ids, [2, 2, 2]))
        assert out.shape.as_list()[2:] == [DIM]
        with kf.Session() as sess:
            got = sess.run(out)
    expected = np.zeros((2, 2, DIM))
    expected[0, 0] = EMB[[2, 3]].mean(0)
    expected[1, 1] = EMB[7]
    np.testing.assert_allclose(got, expected, rtol=1e-10)


# ---------------------------------------------------------------------------- sampled losses
B, D, C, NT = 4, 5, 12, 2
RS = np.random.RandomState(1)
W = RS.normal(size=(C, D))
BIAS = RS.normal(size=C)
X = RS.normal(size=(B, D))
LABELS = np.array([[0, 3], [5, 1], [7, 7], [11, 2]], np.int64)
SAMPLED = np.array([3, 8, 1, 9, 4], np.int64)
TRUE_EC = RS.uniform(0.1, 1, (B, NT))
SAMPLED_EC = RS.uniform(0.1, 1, SAMPLED.size)


def _np_logits(remove_hits):
    true_logits = np.einsum("bd,bkd->bk", X, W[LABELS]) + BIAS[LABELS] - np.log(TRUE_EC)
    sampled_logits = X @ W[SAMPLED].T + BIAS[SAMPLED] - np.log(SAMPLED_EC)
    if remove_hits:
        for i in range(B):
            for j, s in enumerate(SAMPLED):
                if s in LABELS[i]:
                    sampled_logits[i, j] += -np.finfo(np.float32).max
    logits = np.concatenate([true_logits, sampled_logits], 1)
    labels = np.concatenate([np.full((B, NT), 1.0 / NT), np.zeros((B, SAMPLED.size))], 1)
    return logits, labels


def _np_nce(remove_hits):
    z, y = _np_logits(remove_hits)
    return (np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))).sum(1)


def _np_sampled_softmax(remove_hits):
    z, y = _np_logits(remove_hits)
    z = z - z.max(1, keepdims=True)
    return -(y * (z - np.log(np.exp(z).sum(1, keepdims=True)))).sum(1)


def _loss_graph(fn, shards, strategy, remove_hits):
    ws = [kf.Variable(v) for v in _shards_of(W, shards, strategy)]
    bs = [kf.Variable(v) for v in _shards_of(BIAS, shards, strategy)]
    sv = (kf.constant(SAMPLED), kf.constant(TRUE_EC, kf.float32), kf.constant(SAMPLED_EC, kf.float32))
    loss = fn(ws, bs, LABELS, kf.constant(X), SAMPLED.size, C, num_true=NT, sampled_values=sv,
              remove_accidental_hits=remove_hits, partition_strategy=strategy)
    return ws, bs, loss


def _shards_of(v, n, strategy):
    if strategy == "mod":
        return [v[p::n] for p in range(n)]
    sizes = [C // n + (1 if p < C % n else 0) for p in range(n)]
    return np.split(v, np.cumsum(sizes)[:-1])


@pytest.mark.parametrize("shards,strategy", [(1, "mod"), (2, "mod"), (3, "div")])
@pytest.mark.parametrize("remove_hits", [False, True])
@pytest.mark.parametrize("which", ["nce", "softmax"])
def test_sampled_losses_match_numpy(shards, strategy, remove_hits, which):
    fn, ref = {"nce": (kf.nn.nce_loss, _np_nce),
               "softmax": (kf.nn.sampled_softmax_loss, _np_sampled_softmax)}[which]
    with kf.Graph().as_default():
        ws, bs, loss = _loss_graph(fn, shards, strategy, remove_hits)
        assert loss.shape.as_list() == [B]
        grads = kf.gradients(kf.reduce_sum(loss), ws + bs)
        assert all(isinstance(g, IndexedSlices) for g in grads)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            got, gv = sess.run([loss, grads])
    # Expected counts are float32 in TF too: compare at float32 precision of log(count).
    np.testing.assert_allclose(got, ref(remove_hits), rtol=1e-6, atol=1e-6)
    touched = set(LABELS.ravel()) | set(SAMPLED)
    rows = set()
    for p, g in enumerate(gv[:shards]):
        rows |= {int(i) * shards + p if strategy == "mod" else None for i in g.indices}
    if strategy == "mod":
        assert rows <= touched


def test_sampled_loss_gradient_is_numerically_right():
    with kf.Graph().as_default():
        ws, bs, loss = _loss_graph(kf.nn.nce_loss, 2, "mod", True)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            for w, v in zip(ws, _shards_of(W, 2, "mod")):
                theo, num = compute_gradient(w, v.shape, loss, [B], x_init_value=v)
                np.testing.assert_allclose(theo, num, atol=1e-6)


def test_sampled_loss_errors():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="num_true is 1"):
            kf.nn.nce_loss(W, BIAS, LABELS, X, 3, C)
        with pytest.raises(ValueError, match="inputs must be a"):
            kf.nn.sampled_softmax_loss(W, BIAS, LABELS[:, :1], X[0], 3, C)


def test_nce_training_lowers_the_loss():
    rs = np.random.RandomState(3)
    feats = rs.normal(size=(64, 8)).astype(np.float32)
    labels = (np.argmax(feats[:, :4], 1) * 5).reshape(-1, 1).astype(np.int64)
    with kf.Graph().as_default():
        kf.set_random_seed(1)
        w = [kf.Variable(rs.normal(scale=0.1, size=(10, 8)).astype(np.float32)) for _ in range(2)]
        b = kf.Variable(np.zeros(20, np.float32))
        loss = kf.reduce_mean(kf.nn.nce_loss(w, b, labels, feats, 6, 20))
        train = kf.train.GradientDescentOptimizer(0.5).minimize(loss)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            first = np.mean([sess.run(loss) for _ in range(5)])
            for _ in range(200):
                sess.run(train)
            last = np.mean([sess.run(loss) for _ in range(5)])
    assert last < 0.5 * first, (first, last)

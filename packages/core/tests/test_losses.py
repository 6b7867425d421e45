"""kf.losses (kernflow/core/losses.py) against numpy re-computations of TF1's formulas."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import losses
from kernflow.core.testing import gradient_checker

R = losses.Reduction


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = kf.Graph()
    with g.as_default():
        yield g


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


def _reduce(per_element, weights, reduction):
    """numpy reference of compute_weighted_loss."""
    w = np.broadcast_to(np.asarray(weights, np.float64), per_element.shape)
    weighted = per_element * w
    if reduction == R.NONE:
        return weighted
    total = weighted.sum()
    den = {R.SUM: 1.0, R.MEAN: w.sum(), R.SUM_OVER_BATCH_SIZE: per_element.size,
           R.SUM_BY_NONZERO_WEIGHTS: float(np.count_nonzero(w))}[reduction]
    return 0.0 if den == 0 else total / den


RNG = np.random.RandomState(0)
LABELS = RNG.uniform(size=(3, 4)).astype(np.float32)
PREDS = RNG.uniform(size=(3, 4)).astype(np.float32)
BIN = (RNG.uniform(size=(3, 4)) > 0.5).astype(np.float32)
LOGITS = RNG.normal(size=(3, 4)).astype(np.float32)
WEIGHTS = [1.0, 2.5, np.array([[0.0], [1.0], [2.0]], np.float32),
           np.array([[1.0, 0.0, 2.0, 0.5]], np.float32), RNG.uniform(size=(3, 4)).astype(np.float32)]
REDUCTIONS = [R.NONE, R.SUM, R.MEAN, R.SUM_OVER_BATCH_SIZE, R.SUM_BY_NONZERO_WEIGHTS]


def _huber(e, delta=1.0):
    a = np.abs(e)
    q = np.minimum(a, delta)
    return 0.5 * q * q + delta * (a - q)


def _sigmoid_xent(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


ELEMENTWISE = {
    "absolute_difference": (lambda w, r: losses.absolute_difference(LABELS, PREDS, w, reduction=r),
                            lambda: np.abs(PREDS - LABELS)),
    "mean_squared_error": (lambda w, r: losses.mean_squared_error(LABELS, PREDS, w, reduction=r),
                           lambda: (PREDS - LABELS) ** 2),
    "hinge_loss": (lambda w, r: losses.hinge_loss(BIN, LOGITS, w, reduction=r),
                   lambda: np.maximum(0, 1 - (2 * BIN - 1) * LOGITS)),
    "huber_loss": (lambda w, r: losses.huber_loss(LABELS, LOGITS, w, delta=0.7, reduction=r),
                   lambda: _huber(LOGITS - LABELS, 0.7)),
    "log_loss": (lambda w, r: losses.log_loss(BIN, PREDS, w, reduction=r),
                 lambda: -BIN * np.log(PREDS + 1e-7) - (1 - BIN) * np.log(1 - PREDS + 1e-7)),
    "sigmoid_cross_entropy": (lambda w, r: losses.sigmoid_cross_entropy(BIN, LOGITS, w, reduction=r),
                              lambda: _sigmoid_xent(BIN, LOGITS)),
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("widx", range(len(WEIGHTS)))
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_losses_match_numpy(name, widx, reduction):
    build, ref = ELEMENTWISE[name]
    w = WEIGHTS[widx]
    loss = build(w, reduction)
    expected = _reduce(ref().astype(np.float64), w, reduction)
    np.testing.assert_allclose(_run(loss), expected, rtol=1e-5, atol=1e-6)
    assert loss.dtype == kf.float32
    if reduction != R.NONE:
        assert loss.shape.ndims == 0


def test_default_reduction_is_sum_by_nonzero_weights_and_names():
    w = np.array([[0.0], [1.0], [3.0]], np.float32)
    loss = losses.absolute_difference(LABELS, PREDS, w)
    per = np.abs(PREDS - LABELS) * w
    np.testing.assert_allclose(_run(loss), per.sum() / 8, rtol=1e-5)
    assert loss.op.name == "absolute_difference/value"
    assert R.SUM_OVER_NONZERO_WEIGHTS == R.SUM_BY_NONZERO_WEIGHTS
    assert set(R.all()) == {R.NONE, R.SUM, R.MEAN, R.SUM_OVER_BATCH_SIZE, R.SUM_BY_NONZERO_WEIGHTS}


def test_all_zero_weights_give_zero_loss():
    for r in (R.MEAN, R.SUM_BY_NONZERO_WEIGHTS):
        assert _run(losses.mean_squared_error(LABELS, PREDS, 0.0 * np.ones((3, 1)), reduction=r)) == 0.0


def test_compute_weighted_loss_keeps_the_input_dtype():
    loss = losses.compute_weighted_loss(np.array([1.0, 2.0, 3.0]), [1.0, 0.0, 1.0])
    assert loss.dtype == kf.float64
    np.testing.assert_allclose(_run(loss), 2.0)


def test_cosine_distance():
    lab = LABELS / np.linalg.norm(LABELS, axis=1, keepdims=True)
    pred = PREDS / np.linalg.norm(PREDS, axis=1, keepdims=True)
    w = np.array([[1.0], [0.0], [2.0]], np.float32)
    per = 1 - (lab * pred).sum(1, keepdims=True)
    for r in REDUCTIONS:
        got = _run(losses.cosine_distance(lab, pred, axis=1, weights=w, reduction=r))
        np.testing.assert_allclose(got, _reduce(per, w, r), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_run(losses.cosine_distance(lab, pred, dim=1)), per.mean(), rtol=1e-5)
    with pytest.raises(ValueError, match="axis"):
        losses.cosine_distance(lab, pred)
    with pytest.raises(ValueError, match="both"):
        losses.cosine_distance(lab, pred, axis=1, dim=1)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_softmax_cross_entropy(smoothing, reduction):
    onehot = np.eye(4, dtype=np.float32)[[1, 3, 0]]
    w = np.array([2.0, 0.0, 1.0], np.float32)
    smooth = onehot * (1 - smoothing) + smoothing / 4
    per = -(smooth * np.log(_softmax(LOGITS.astype(np.float64)))).sum(-1)
    loss = losses.softmax_cross_entropy(onehot, LOGITS, w, label_smoothing=smoothing,
                                        reduction=reduction)
    np.testing.assert_allclose(_run(loss), _reduce(per, w, reduction), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_sigmoid_cross_entropy_label_smoothing(smoothing):
    smooth = BIN * (1 - smoothing) + 0.5 * smoothing
    loss = losses.sigmoid_cross_entropy(BIN, LOGITS, label_smoothing=smoothing)
    np.testing.assert_allclose(_run(loss), _sigmoid_xent(smooth, LOGITS).mean(), rtol=1e-5)


@pytest.mark.parametrize("labels_shape", [(3,), (3, 1)])
def test_sparse_softmax_cross_entropy(labels_shape):
    ids = np.array([1, 3, 0], np.int32)
    w = np.array([0.5, 1.0, 0.0], np.float32)
    per = -np.log(_softmax(LOGITS.astype(np.float64)))[np.arange(3), ids]
    loss = losses.sparse_softmax_cross_entropy(ids.reshape(labels_shape), LOGITS,
                                               w.reshape(labels_shape))
    np.testing.assert_allclose(_run(loss), _reduce(per, w, R.SUM_BY_NONZERO_WEIGHTS), rtol=1e-5)
    none = losses.sparse_softmax_cross_entropy(ids, LOGITS, reduction=R.NONE)
    np.testing.assert_allclose(_run(none), per, rtol=1e-5)


def _pairwise_ref(lab, pred, w):
    total = 0.0
    for b in range(lab.shape[0]):
        d = (pred[b] - lab[b]).reshape(-1)
        n = d.size
        pair = sum((d[i] - d[j]) ** 2 for i in range(n) for j in range(n)) / (n * (n - 1))
        total += pair * np.asarray(w).reshape(-1)[b if np.size(w) > 1 else 0]
    return total


def test_mean_pairwise_squared_error():
    loss = losses.mean_pairwise_squared_error(LABELS, PREDS)
    np.testing.assert_allclose(_run(loss), _pairwise_ref(LABELS, PREDS, 1.0), rtol=1e-4)
    w = np.array([[2.0], [0.0], [1.5]], np.float32)
    loss = losses.mean_pairwise_squared_error(LABELS, PREDS, weights=w)
    np.testing.assert_allclose(_run(loss), _pairwise_ref(LABELS, PREDS, w), rtol=1e-4)
    assert loss in kf.get_collection(kf.GraphKeys.LOSSES)


# ---------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("fn", [losses.absolute_difference, losses.mean_squared_error,
                                losses.hinge_loss, losses.huber_loss, losses.log_loss,
                                losses.sigmoid_cross_entropy, losses.softmax_cross_entropy,
                                losses.mean_pairwise_squared_error])
def test_shape_mismatch_raises_value_error(fn):
    with pytest.raises(ValueError):
        fn(np.zeros((3, 4), np.float32), np.zeros((3, 5), np.float32))


def test_none_inputs_and_bad_weights_and_reduction():
    with pytest.raises(ValueError, match="labels must not be None"):
        losses.mean_squared_error(None, PREDS)
    with pytest.raises(ValueError, match="predictions must not be None"):
        losses.absolute_difference(LABELS, None)
    with pytest.raises(ValueError, match="can not be broadcast"):
        losses.mean_squared_error(LABELS, PREDS, weights=np.ones((3,), np.float32))
    with pytest.raises(ValueError, match="can not be broadcast"):
        losses.mean_squared_error(LABELS, PREDS, weights=np.ones((2, 4), np.float32))
    with pytest.raises(ValueError, match="Invalid Reduction Key"):
        losses.mean_squared_error(LABELS, PREDS, reduction="bogus")


# ----------------------------------------------------------------------------- collections
def test_loss_collection_and_total_loss():
    l1 = losses.mean_squared_error(LABELS, PREDS)
    l2 = losses.absolute_difference(LABELS, PREDS, loss_collection="mine")
    l3 = losses.huber_loss(LABELS, PREDS, loss_collection=None)
    assert losses.get_losses() == [l1]
    assert losses.get_losses(loss_collection="mine") == [l2]
    assert l3 not in losses.get_losses()
    reg = kf.multiply(0.5, kf.constant(3.0), name="reg")
    kf.add_to_collection(kf.GraphKeys.REGULARIZATION_LOSSES, reg)
    losses.add_loss(kf.constant(1.0, name="extra"))
    assert losses.get_regularization_losses() == [reg]
    total = losses.get_total_loss()
    no_reg = losses.get_total_loss(add_regularization_losses=False, name="no_reg")
    assert total.op.name == "total_loss"
    v1, t, nr, rl = _run([l1, total, no_reg, losses.get_regularization_loss()])
    np.testing.assert_allclose([t, nr, rl], [v1 + 1.0 + 1.5, v1 + 1.0, 1.5], rtol=1e-6)


def test_scoped_losses_and_empty_cases():
    with kf.name_scope("tower_0"):
        a = losses.mean_squared_error(LABELS, PREDS)
    with kf.name_scope("tower_1"):
        losses.mean_squared_error(LABELS, PREDS)
    assert losses.get_losses(scope="tower_0") == [a]
    assert _run(losses.get_regularization_loss()) == 0.0
    with pytest.raises(ValueError):
        losses.get_total_loss(scope="nowhere")


def test_variable_regularizer_feeds_total_loss():
    w = kf.get_variable("w", initializer=np.float32(2.0), regularizer=lambda v: kf.multiply(v, v))
    loss = losses.mean_squared_error([1.0], kf.reshape(w, [1]))
    total = losses.get_total_loss()
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        np.testing.assert_allclose(sess.run([loss, total]), [1.0, 5.0])


# ------------------------------------------------------------------------------- gradients
GRAD_CASES = {
    "mean_squared_error": lambda x: losses.mean_squared_error(LABELS, x, WEIGHTS[3]),
    "absolute_difference": lambda x: losses.absolute_difference(LABELS, x, reduction=R.SUM),
    "huber_loss": lambda x: losses.huber_loss(LABELS, x * 3.0, WEIGHTS[4], delta=0.5),
    "log_loss": lambda x: losses.log_loss(BIN, x * 0.8 + 0.1, reduction=R.MEAN),
    "sigmoid_cross_entropy": lambda x: losses.sigmoid_cross_entropy(BIN, x, WEIGHTS[2],
                                                                    label_smoothing=0.1),
    "softmax_cross_entropy": lambda x: losses.softmax_cross_entropy(
        np.eye(4, dtype=np.float32)[[1, 3, 0]], x, [1.0, 2.0, 0.0], label_smoothing=0.1),
    "sparse_softmax_cross_entropy": lambda x: losses.sparse_softmax_cross_entropy(
        np.array([1, 3, 0]), x, reduction=R.SUM_OVER_BATCH_SIZE),
    "hinge_loss": lambda x: losses.hinge_loss(BIN, x * 4.0 - 2.0),
    "cosine_distance": lambda x: losses.cosine_distance(LABELS, x, axis=1),
    "mean_pairwise_squared_error": lambda x: losses.mean_pairwise_squared_error(LABELS, x),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_loss_gradients_match_finite_differences(name):
    x = kf.placeholder(kf.float64, (3, 4))
    loss = kf.cast(GRAD_CASES[name](kf.cast(x, kf.float32)), kf.float64)
    x0 = np.random.RandomState(1).uniform(0.05, 0.95, size=(3, 4))
    err = gradient_checker.compute_gradient_error(x, (3, 4), loss, (), x_init_value=x0, delta=1e-3)
    assert err < 2e-3, err


def test_no_gradient_into_softmax_labels():
    onehot = kf.placeholder(kf.float32, (3, 4))
    loss = losses.softmax_cross_entropy(onehot, LOGITS)
    assert kf.gradients(loss, onehot) == [None]

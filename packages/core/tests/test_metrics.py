"""kf.metrics (kernflow/core/metrics/): streaming values against numpy over several batches."""

import numpy as np
import pytest

import kernflow.core as kf
import kernflow.core.metrics as metrics

LOCAL = kf.GraphKeys.LOCAL_VARIABLES
METRIC = kf.GraphKeys.METRIC_VARIABLES


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = kf.Graph()
    with g.as_default():
        yield g


def _stream(metric_fn, batches, **kwargs):
    """Builds metric_fn on placeholders, runs update_op per batch; returns the update values,
    the final value and a reset value check. batches: list of dicts of arrays (feeds)."""
    phs = {k: kf.placeholder(kf.as_dtype(v.dtype), (None,) + v.shape[1:])
           for k, v in batches[0].items()}
    value, update_op = metric_fn(**phs, **kwargs)
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        updates = [sess.run(update_op, {phs[k]: v for k, v in b.items()}) for b in batches]
        final = sess.run(value)
        assert np.allclose(sess.run(value), final, equal_nan=True)  # reading does not update
        sess.run(kf.local_variables_initializer())
        reset = sess.run(value)
    return updates, final, reset


def _cat(batches, key):
    return np.concatenate([b[key] for b in batches])


RNG = np.random.RandomState(0)


def _batches(n=3, size=6, weights=True, binary=True, classes=None):
    out = []
    for _ in range(n):
        if classes:
            b = {"labels": RNG.randint(0, classes, size).astype(np.int64),
                 "predictions": RNG.randint(0, classes, size).astype(np.int64)}
        elif binary:
            b = {"labels": (RNG.uniform(size=size) > 0.5).astype(np.float32),
                 "predictions": RNG.uniform(size=size).astype(np.float32)}
        else:
            b = {"labels": RNG.normal(size=size).astype(np.float32),
                 "predictions": RNG.normal(size=size).astype(np.float32)}
        if weights:
            b["weights"] = (RNG.uniform(size=size) * (RNG.uniform(size=size) > 0.3)).astype(np.float32)
        out.append(b)
    return out


def _prefix_means(batches, per_elem):
    vals, num, den = [], 0.0, 0.0
    for b in batches:
        w = b.get("weights", np.ones(len(b["labels"]), np.float32))
        num += (per_elem(b) * w).sum()
        den += w.sum()
        vals.append(num / den if den else 0.0)
    return vals


# -------------------------------------------------------------------------------- mean family
MEANS = {
    "mean_absolute_error": lambda b: np.abs(b["predictions"] - b["labels"]),
    "mean_squared_error": lambda b: (b["predictions"] - b["labels"]) ** 2,
}


@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("name", sorted(MEANS))
def test_error_means_stream(name, weights):
    batches = _batches(weights=weights, binary=False)
    updates, final, reset = _stream(getattr(metrics, name), batches)
    expected = _prefix_means(batches, MEANS[name])
    np.testing.assert_allclose(updates, expected, rtol=1e-5)
    np.testing.assert_allclose(final, expected[-1], rtol=1e-5)
    assert reset == 0.0


@pytest.mark.parametrize("weights", [False, True])
def test_root_mean_squared_error(weights):
    batches = _batches(weights=weights, binary=False)
    updates, final, _ = _stream(metrics.root_mean_squared_error, batches)
    expected = np.sqrt(_prefix_means(batches, MEANS["mean_squared_error"]))
    np.testing.assert_allclose(updates, expected, rtol=1e-5)


@pytest.mark.parametrize("weights", [False, True])
def test_mean_and_percentage_below(weights):
    batches = [{"values": b["predictions"], **({"weights": b["weights"]} if weights else {})}
               for b in _batches(binary=False)]
    for b in batches:
        b["labels"] = b["values"]  # for _prefix_means
    feeds = [{k: v for k, v in b.items() if k != "labels"} for b in batches]
    updates, final, reset = _stream(metrics.mean, feeds)
    np.testing.assert_allclose(updates, _prefix_means(batches, lambda b: b["values"]), rtol=1e-5)
    updates, _, _ = _stream(metrics.percentage_below, feeds, threshold=0.2)
    np.testing.assert_allclose(updates, _prefix_means(batches, lambda b: b["values"] < 0.2), rtol=1e-5)


def test_accuracy_streams_names_and_collections():
    labels = kf.placeholder(kf.int64, [None])
    preds = kf.placeholder(kf.int64, [None])
    acc, update = metrics.accuracy(labels, preds, metrics_collections=["m"],
                                   updates_collections=["u"])
    assert [v.op.name for v in kf.get_collection(LOCAL)] == ["accuracy/total", "accuracy/count"]
    assert kf.get_collection(METRIC) == kf.get_collection(LOCAL)
    assert kf.global_variables() == [] and kf.trainable_variables() == []
    assert kf.get_collection("m") == [acc] and kf.get_collection("u") == [update]
    acc2, _ = metrics.accuracy(labels, preds, name="acc2")
    assert "acc2/total:0" in [v.name for v in kf.get_collection(METRIC)]
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        assert sess.run(acc) == 0.0
        assert sess.run(update, {labels: [1, 2, 3, 4], preds: [1, 2, 0, 4]}) == 0.75
        assert sess.run(update, {labels: [1, 2], preds: [0, 0]}) == 0.5
        assert sess.run(acc) == 0.5 and sess.run(acc2) == 0.0
        sess.run(kf.local_variables_initializer())
        assert sess.run(acc) == 0.0


def test_accuracy_weights_and_squeezing():
    labels = np.array([[1], [2], [3], [4]])
    preds = np.array([1, 2, 0, 4])
    acc, update = metrics.accuracy(labels, preds, weights=[[1.0], [0.0], [2.0], [1.0]])
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        np.testing.assert_allclose(sess.run(update), 0.5)


def test_mean_tensor_streams_elementwise():
    x = kf.placeholder(kf.float32, [2, 2])
    w = kf.placeholder(kf.float32, [2, 1])
    value, update = metrics.mean_tensor(x, w)
    assert {v.op.name for v in kf.get_collection(METRIC)} == {"mean/total_tensor", "mean/count_tensor"}
    a, b = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[5.0, 6.0], [7.0, 8.0]])
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        sess.run(update, {x: a, w: [[1.0], [0.0]]})
        got = sess.run(update, {x: b, w: [[3.0], [1.0]]})
        np.testing.assert_allclose(got, [[(1 + 15) / 4, (2 + 18) / 4], [7.0, 8.0]])
        np.testing.assert_allclose(sess.run(value), got)


def test_mean_relative_error_and_cosine_distance():
    labels = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    preds = np.array([2.0, 2.0, 1.0, 5.0], np.float32)
    norm = np.array([1.0, 0.0, 2.0, 4.0], np.float32)
    value, update = metrics.mean_relative_error(labels, preds, norm)
    lab = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    pred = np.array([[0.6, 0.8], [0.0, 1.0]], np.float32)
    cos, cos_update = metrics.mean_cosine_distance(lab, pred, dim=1)
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        np.testing.assert_allclose(sess.run(update), (1.0 + 0.0 + 1.0 + 0.25) / 4)
        np.testing.assert_allclose(sess.run(cos_update), 1 - (0.6 + 1.0) / 2, rtol=1e-6)
        np.testing.assert_allclose(sess.run(cos), 1 - (0.6 + 1.0) / 2, rtol=1e-6)


# ---------------------------------------------------------------------------- confusion counts
def _counts(b, thr=0.5):
    lab = b["labels"] > 0.5
    pred = b["predictions"] > thr
    w = b.get("weights", np.ones(len(lab)))
    return {"tp": (w * (lab & pred)).sum(), "fp": (w * (~lab & pred)).sum(),
            "tn": (w * (~lab & ~pred)).sum(), "fn": (w * (lab & ~pred)).sum()}


def _bool_batches(weights):
    out = _batches(weights=weights)
    for b in out:
        b["predictions"] = (b["predictions"] > 0.5).astype(np.float32)
    return out


COUNT_METRICS = {"true_positives": "tp", "false_positives": "fp", "true_negatives": "tn",
                 "false_negatives": "fn"}


@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("name", sorted(COUNT_METRICS))
def test_confusion_counts_stream(name, weights):
    batches = _bool_batches(weights)
    updates, final, reset = _stream(getattr(metrics, name), batches)
    expected = np.cumsum([_counts(b)[COUNT_METRICS[name]] for b in batches])
    np.testing.assert_allclose(updates, expected, rtol=1e-5)
    assert final == pytest.approx(expected[-1]) and reset == 0.0
    assert [v.op.name for v in kf.get_collection(METRIC)] == [f"{name}/count"]


@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("name,key", [("precision", "fp"), ("recall", "fn")])
def test_precision_recall_stream(name, key, weights):
    batches = _bool_batches(weights)
    updates, final, _ = _stream(getattr(metrics, name), batches)
    tp = np.cumsum([_counts(b)["tp"] for b in batches])
    other = np.cumsum([_counts(b)[key] for b in batches])
    np.testing.assert_allclose(updates, tp / (tp + other), rtol=1e-5)
    names = {v.op.name for v in kf.get_collection(METRIC)}
    other_name = {"fp": "false_positives", "fn": "false_negatives"}[key]
    assert names == {f"{name}/true_positives/count", f"{name}/{other_name}/count"}


def test_precision_is_zero_without_positives():
    value, update = metrics.precision([1, 0], [0, 0])
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        assert sess.run(update) == 0.0 and sess.run(value) == 0.0


THRESHOLDS = [0.0, 0.25, 0.5, 0.9]


@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("key", ["tp", "fp", "tn", "fn"])
def test_counts_at_thresholds(key, weights):
    name = {v: k for k, v in COUNT_METRICS.items()}[key] + "_at_thresholds"
    batches = _batches(weights=weights)
    updates, final, _ = _stream(getattr(metrics, name), batches, thresholds=THRESHOLDS)
    expected = np.cumsum([[_counts(b, t)[key] for t in THRESHOLDS] for b in batches], axis=0)
    np.testing.assert_allclose(updates, expected, rtol=1e-5)
    np.testing.assert_allclose(final, expected[-1], rtol=1e-5)


@pytest.mark.parametrize("name,key", [("precision_at_thresholds", "fp"), ("recall_at_thresholds", "fn")])
def test_ratios_at_thresholds(name, key):
    batches = _batches()
    updates, final, _ = _stream(getattr(metrics, name), batches, thresholds=THRESHOLDS)
    tp = np.cumsum([[_counts(b, t)["tp"] for t in THRESHOLDS] for b in batches], axis=0)
    other = np.cumsum([[_counts(b, t)[key] for t in THRESHOLDS] for b in batches], axis=0)
    np.testing.assert_allclose(updates, tp / (tp + other + 1e-7), rtol=1e-5)


# ---------------------------------------------------------------------------------------- auc
def _auc_ref(labels, preds, weights, num_thresholds, curve, method):
    kepsilon = 1e-7
    thr = [-kepsilon] + [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)] + \
        [1 + kepsilon]
    c = {k: np.array([_counts({"labels": labels, "predictions": preds, "weights": weights}, t)[k]
                      for t in thr]) for k in ("tp", "fp", "tn", "fn")}
    eps = 1e-6
    rec = (c["tp"] + eps) / (c["tp"] + c["fn"] + eps)
    if curve == "ROC":
        x, y = c["fp"] / (c["fp"] + c["tn"] + eps), rec
    else:
        x, y = rec, (c["tp"] + eps) / (c["tp"] + c["fp"] + eps)
    h = {"trapezoidal": (y[:-1] + y[1:]) / 2, "minoring": np.minimum(y[:-1], y[1:]),
         "majoring": np.maximum(y[:-1], y[1:])}[method]
    return ((x[:-1] - x[1:]) * h).sum()


@pytest.mark.parametrize("curve", ["ROC", "PR"])
@pytest.mark.parametrize("method", ["trapezoidal", "minoring", "majoring"])
def test_auc_streams(curve, method):
    batches = _batches()
    updates, final, _ = _stream(metrics.auc, batches, num_thresholds=50, curve=curve,
                                summation_method=method)
    for i in range(len(batches)):
        seen = batches[:i + 1]
        expected = _auc_ref(_cat(seen, "labels"), _cat(seen, "predictions"), _cat(seen, "weights"),
                            50, curve, method)
        np.testing.assert_allclose(updates[i], expected, rtol=1e-4, atol=1e-6)


def test_auc_is_exact_for_separable_and_roc_of_known_case():
    value, update = metrics.auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
    perfect, perfect_update = metrics.auc([0, 0, 1, 1], [0.1, 0.2, 0.7, 0.8], name="perfect")
    pr, pr_update = metrics.auc([0, 0, 1, 1], [0.1, 0.2, 0.7, 0.8], curve="PR",
                                summation_method="careful_interpolation")
    explicit, explicit_update = metrics.auc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8],
                                            thresholds=[0.9, 0.3, 0.5])
    names = {v.op.name for v in kf.get_collection(METRIC)}
    assert {"auc/true_positives", "auc/false_negatives", "auc/true_negatives",
            "auc/false_positives", "perfect/true_positives"} <= names
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        got = sess.run([update, perfect_update, pr_update, explicit_update])
        np.testing.assert_allclose(got[:3], [0.75, 1.0, 1.0], atol=1e-4)
        # thresholds -eps, .3, .5, .9, 1+eps: ROC points (1,1) (.5,1) (0,.5) (0,0) (0,0)
        np.testing.assert_allclose(got[3], 0.5 * 1.0 + 0.5 * 0.75, atol=1e-4)
        np.testing.assert_allclose(sess.run(value), got[0])


def test_auc_errors():
    with pytest.raises(ValueError, match="curve"):
        metrics.auc([0, 1], [0.1, 0.9], curve="XY")
    with pytest.raises(ValueError, match="summation_method"):
        metrics.auc([0, 1], [0.1, 0.9], summation_method="simpson")


def test_sensitivity_specificity():
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.float32)
    preds = np.array([0.1, 0.2, 0.6, 0.7, 0.3, 0.65, 0.8, 0.9], np.float32)
    sens, sens_update = metrics.sensitivity_at_specificity(labels, preds, 0.5, num_thresholds=11)
    spec, spec_update = metrics.specificity_at_sensitivity(labels, preds, 0.75, num_thresholds=11)
    thr = [-1e-7] + [(i + 1) / 10 for i in range(9)] + [1 + 1e-7]
    c = [_counts({"labels": labels, "predictions": preds}, t) for t in thr]
    specs = np.array([x["tn"] / (x["tn"] + x["fp"] + 1e-7) for x in c])
    sensv = np.array([x["tp"] / (x["tp"] + x["fn"] + 1e-7) for x in c])
    i = int(np.argmin(np.abs(specs - 0.5)))
    d = np.abs(sensv - 0.75)
    j = int(np.nonzero(d == d.min())[0][-1])
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        np.testing.assert_allclose(sess.run(sens_update), sensv[i], rtol=1e-5)
        np.testing.assert_allclose(sess.run(spec_update), specs[j], rtol=1e-5)
        np.testing.assert_allclose(sess.run([sens, spec]), [sensv[i], specs[j]], rtol=1e-5)
    with pytest.raises(ValueError, match="specificity"):
        metrics.sensitivity_at_specificity(labels, preds, 1.5)
    with pytest.raises(ValueError, match="sensitivity"):
        metrics.specificity_at_sensitivity(labels, preds, -0.1)


# ---------------------------------------------------------------------------- multi-class
def _cm(batches, n):
    cm = np.zeros((n, n))
    for b in batches:
        w = b.get("weights", np.ones(len(b["labels"])))
        np.add.at(cm, (b["labels"], b["predictions"]), w)
    return cm


@pytest.mark.parametrize("weights", [False, True])
def test_mean_iou_streams(weights):
    batches = _batches(weights=weights, classes=4)
    updates, final, reset = _stream(metrics.mean_iou, batches, num_classes=4)
    cm = _cm(batches, 4)
    np.testing.assert_allclose(updates[-1], cm, rtol=1e-6)  # TF1: update_op is the matrix
    den = cm.sum(0) + cm.sum(1) - np.diag(cm)
    valid = den != 0
    np.testing.assert_allclose(final, (np.diag(cm)[valid] / den[valid]).mean(), rtol=1e-5)
    assert reset == 0.0
    assert [v.op.name for v in kf.get_collection(METRIC)] == ["mean_iou/total_confusion_matrix"]


@pytest.mark.parametrize("weights", [False, True])
def test_mean_per_class_accuracy_streams(weights):
    batches = _batches(weights=weights, classes=3)
    updates, final, _ = _stream(metrics.mean_per_class_accuracy, batches, num_classes=3)
    cm = _cm(batches, 3)
    totals = cm.sum(1)
    per_class = np.where(totals > 0, np.diag(cm) / np.where(totals > 0, totals, 1), 0)
    np.testing.assert_allclose(updates[-1], per_class, rtol=1e-5)
    np.testing.assert_allclose(final, per_class.mean(), rtol=1e-5)
    assert {v.op.name for v in kf.get_collection(METRIC)} == {"mean_accuracy/total",
                                                              "mean_accuracy/count"}


def test_confusion_matrix_helper():
    cm = metrics.confusion_matrix([0, 1, 2, 2], [0, 2, 2, 1], 3, weights=[1, 2, 3, 4])
    with kf.Session() as sess:
        np.testing.assert_array_equal(sess.run(cm), [[1, 0, 0], [0, 0, 2], [0, 4, 3]])


# ---------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("fn", [metrics.accuracy, metrics.mean_absolute_error,
                                metrics.mean_squared_error, metrics.root_mean_squared_error,
                                metrics.precision, metrics.recall, metrics.true_positives,
                                metrics.auc])
def test_shape_mismatch_raises_value_error(fn):
    with pytest.raises(ValueError):
        fn(np.zeros((3, 4), np.float32), np.zeros((3, 5), np.float32))


@pytest.mark.parametrize("fn", [metrics.mean_iou, metrics.mean_per_class_accuracy])
def test_shape_mismatch_raises_value_error_multiclass(fn):
    with pytest.raises(ValueError):
        fn(np.zeros((3,), np.int64), np.zeros((4,), np.int64), 3)


def test_weights_that_do_not_broadcast_raise():
    with pytest.raises(ValueError, match="can not be broadcast"):
        metrics.mean(np.zeros((3, 4), np.float32), weights=np.ones((2, 4), np.float32))


# ------------------------------------------------------------------------------------ top k
def _topk_ref(labels_rows, scores, k, class_id=None, weights=None):
    """numpy/set reference: (tp, fp, fn, sum of AP, max) over the rows."""
    tp = fp = fn = ap_total = ap_max = 0.0
    for r, (labs, s) in enumerate(zip(labels_rows, scores)):
        w = 1.0 if weights is None else float(weights[r])
        top = list(np.argsort(-s, kind="stable")[:k])
        labs = set(int(x) for x in labs)
        if class_id is None:
            tp += w * len(set(top) & labs)
            fp += w * len(set(top) - labs)
            fn += w * len(labs - set(top))
        else:
            in_top, in_lab = class_id in top, class_id in labs
            tp += w * (in_top and in_lab)
            fp += w * (in_top and not in_lab)
            fn += w * (in_lab and not in_top)
        hits = [t in labs for t in top]
        ap = sum(np.mean(hits[:i + 1]) for i, h in enumerate(hits) if h) / min(len(labs), k)
        ap_total += w * ap
        ap_max += w
    return tp, fp, fn, ap_total, ap_max


SCORES = [RNG.uniform(size=(4, 6)).astype(np.float32) for _ in range(3)]
LABEL_IDS = [RNG.randint(0, 6, size=(4, 2)).astype(np.int64) for _ in range(3)]
ROW_WEIGHTS = [RNG.uniform(size=4).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("class_id", [None, 2])
@pytest.mark.parametrize("k", [1, 3])
def test_precision_recall_at_k_stream(k, class_id, weighted):
    labels = kf.placeholder(kf.int64, [None, 2])
    scores = kf.placeholder(kf.float32, [None, 6])
    w = kf.placeholder(kf.float32, [None]) if weighted else None
    prec, prec_up = metrics.precision_at_k(labels, scores, k, class_id=class_id, weights=w)
    rec, rec_up = metrics.recall_at_k(labels, scores, k, class_id=class_id, weights=w)
    tp = fp = fn = 0.0
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        for lab, sc, rw in zip(LABEL_IDS, SCORES, ROW_WEIGHTS):
            feed = {labels: lab, scores: sc}
            if weighted:
                feed[w] = rw
            p, r = sess.run([prec_up, rec_up], feed)
            t, f, n, _, _ = _topk_ref(lab, sc, k, class_id, rw if weighted else None)
            tp, fp, fn = tp + t, fp + f, fn + n
            np.testing.assert_allclose([p, r], [tp / (tp + fp), tp / (tp + fn)], rtol=1e-6)
        np.testing.assert_allclose(sess.run([prec, rec]), [tp / (tp + fp), tp / (tp + fn)], rtol=1e-6)
    assert prec.dtype == kf.float64


def test_precision_at_k_names_nan_and_aliases():
    labels = np.array([[1], [3]], np.int64)
    scores = np.array([[0.1, 0.9, 0.0, 0.2], [0.8, 0.1, 0.05, 0.3]], np.float32)
    prec, _ = metrics.precision_at_k(labels, scores, 2)
    assert prec.op.name == "precision_at_2"
    names = {v.op.name for v in kf.get_collection(METRIC)}
    assert names == {"precision_at_2/true_positive_at_2", "precision_at_2/false_positive_at_2"}
    assert set(kf.get_collection(LOCAL)) == set(kf.get_collection(METRIC))
    sparse_prec, sparse_up = metrics.sparse_precision_at_k(labels[:, 0], scores, 2)
    rec, rec_up = metrics.recall_at_k(labels, scores, 1, class_id=2, name="r")
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        assert np.isnan(sess.run(prec))  # nothing seen yet: 0 / 0, as TF1
        np.testing.assert_allclose(sess.run(sparse_up), 0.5)  # [1,3] & {1}, [0,3] & {3}
        assert np.isnan(sess.run(rec_up))  # class 2 is never a label
    with pytest.raises(ValueError, match="Invalid k"):
        metrics.precision_at_k(labels, scores, 0)


def test_top_k_variants_and_sparse_labels():
    ids = np.array([[1, 0], [2, 3]], np.int64)
    # row 0 labels {1, 2} (a repeated 2), row 1 labels {3}; dense and sparse forms agree
    dense = np.array([[1, 2, 2], [3, 3, 3]], np.int64)
    sparse = kf.SparseTensor([[0, 0], [0, 1], [1, 0]], np.array([1, 2, 3], np.int64), [2, 3])
    got = []
    for labels in (dense, sparse):
        got.append(metrics.precision_at_top_k(labels, ids, k=2)[1])
        got.append(metrics.recall_at_top_k(labels, ids, k=2)[1])
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        np.testing.assert_allclose(sess.run(got), [0.5, 2 / 3, 0.5, 2 / 3])
    with pytest.raises(ValueError):
        metrics.precision_at_top_k(dense, ids, k=3)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("k", [1, 3])
def test_average_precision_at_k_streams(k, weighted):
    labels = kf.placeholder(kf.int64, [None, 2])
    scores = kf.placeholder(kf.float32, [None, 6])
    w = kf.placeholder(kf.float32, [None]) if weighted else None
    value, update = metrics.average_precision_at_k(labels, scores, k, weights=w)
    _, alias_update = metrics.sparse_average_precision_at_k(labels, scores, k, weights=w)
    names = {v.op.name for v in kf.get_collection(METRIC)}
    assert {f"average_precision_at_{k}/max", f"average_precision_at_{k}/total"} <= names
    total = mx = 0.0
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        for lab, sc, rw in zip(LABEL_IDS, SCORES, ROW_WEIGHTS):
            feed = {labels: lab, scores: sc}
            if weighted:
                feed[w] = rw
            got, alias = sess.run([update, alias_update], feed)
            _, _, _, t, m = _topk_ref(lab, sc, k, None, rw if weighted else None)
            total, mx = total + t, mx + m
            np.testing.assert_allclose([got, alias], [total / mx] * 2, rtol=1e-6)
        np.testing.assert_allclose(sess.run(value), total / mx, rtol=1e-6)

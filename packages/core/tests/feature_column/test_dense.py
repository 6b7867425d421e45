"""Dense columns (kernflow/core/feature_column/dense.py) through `input_layer`, against numpy:
numeric, bucketized (dense and as ids), indicator, embedding combiners, shared embeddings."""

import numpy as np
import pytest

import kernflow.core as kf

fc = kf.feature_column

W = np.arange(15, dtype=np.float32).reshape(5, 3) / 10.0


def _sparse(indices, values, shape, dtype=None):
    return kf.SparseTensor(kf.constant(indices, kf.int64), kf.constant(values, dtype=dtype),
                           kf.constant(shape, kf.int64))


# ---------------------------------------------------------------------------- numeric
def test_numeric_rank1_expanded_and_cast(run):
    col = fc.numeric_column("x", dtype=kf.int32)
    out = run(fc.input_layer({"x": kf.constant([1, 2, 3])}, [col]))
    assert out.dtype == np.float32 and out.tolist() == [[1.0], [2.0], [3.0]]


def test_numeric_shape_and_normalizer(run):
    col = fc.numeric_column("x", shape=(2, 2), normalizer_fn=lambda t: t * 2.0)
    x = np.arange(8, dtype=np.float32).reshape(2, 2, 2)
    out = run(fc.input_layer({"x": kf.constant(x)}, [col]))
    np.testing.assert_allclose(out, 2 * x.reshape(2, 4))
    assert col._variable_shape.as_list() == [2, 2]


def test_numeric_default_value_and_spec():
    col = fc.numeric_column("x", shape=(2,), default_value=3.0)
    assert col.default_value == (3.0, 3.0)
    assert fc.make_parse_example_spec([col]) == {"x": kf.FixedLenFeature((2,), kf.float32, (3.0, 3.0))}
    assert fc.numeric_column("y", shape=(1, 2), default_value=[[1, 2]]).default_value == ((1, 2),)


def test_numeric_errors(run):
    with pytest.raises(ValueError, match="greater than 0"):
        fc.numeric_column("x", shape=(0,))
    with pytest.raises(TypeError, match="must be integer"):
        fc.numeric_column("x", shape=(1.5,))
    with pytest.raises(ValueError, match="convertible to float"):
        fc.numeric_column("x", dtype=kf.string)
    with pytest.raises(ValueError, match="shape of default_value"):
        fc.numeric_column("x", shape=(2,), default_value=[1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="compatible with dtype"):
        fc.numeric_column("x", dtype=kf.int64, default_value=1.5)
    with pytest.raises(TypeError, match="normalizer_fn must be a callable"):
        fc.numeric_column("x", normalizer_fn=3)
    col = fc.numeric_column("x")
    with pytest.raises(ValueError, match="SparseTensor is not supported"):
        fc.input_layer({"x": _sparse([[0, 0]], [1.0], [1, 1])}, [col])
    with pytest.raises(TypeError, match="needs a numeric feature"):
        fc.input_layer({"x": kf.constant([["a"]])}, [col])
    with pytest.raises(ValueError, match="cannot have rank 0"):
        fc.input_layer({"x": kf.constant(1.0)}, [col])


# ---------------------------------------------------------------------------- bucketized
def test_bucketized_dense_one_hot(run):
    col = fc.bucketized_column(fc.numeric_column("p", shape=(2,)), [0.0, 10.0, 100.0])
    assert col.name == "p_bucketized" and col._num_buckets == 8
    assert col._variable_shape.as_list() == [2, 4]
    x = np.array([[-5.0, 10.0], [150.0, 9.99]], np.float32)
    out = run(fc.input_layer({"p": kf.constant(x)}, [col]))
    buckets = np.searchsorted([0.0, 10.0, 100.0], x, side="right")
    assert buckets.tolist() == [[0, 2], [3, 1]]
    np.testing.assert_array_equal(out, np.eye(4)[buckets].reshape(2, 8))


def test_bucketized_as_categorical_ids(ids_of):
    col = fc.bucketized_column(fc.numeric_column("p", shape=(2,)), [0.0, 10.0, 100.0])
    ids, weights = ids_of(col, {"p": kf.constant([[-5.0, 10.0], [150.0, 9.99]])})
    # element i's bucket b is id b + 4 * i.
    assert ids.tolist() == [[0, 6], [3, 5]] and weights is None


def test_bucketized_errors():
    with pytest.raises(ValueError, match="numeric_column"):
        fc.bucketized_column(fc.categorical_column_with_identity("i", 3), [1.0])
    with pytest.raises(ValueError, match="one-dimensional"):
        fc.bucketized_column(fc.numeric_column("p", shape=(2, 2)), [1.0])
    with pytest.raises(ValueError, match="must not be empty"):
        fc.bucketized_column(fc.numeric_column("p"), [])
    with pytest.raises(ValueError, match="sorted list"):
        fc.bucketized_column(fc.numeric_column("p"), [2.0, 1.0])


# ---------------------------------------------------------------------------- indicator
def test_indicator_counts_ids(run):
    col = fc.indicator_column(fc.categorical_column_with_vocabulary_list("w", ["a", "b", "c"]))
    assert col.name == "w_indicator"
    out = run(fc.input_layer({"w": kf.constant([["a", "c"], ["b", "b"], ["zz", ""]])}, [col]))
    assert out.tolist() == [[1, 0, 1], [0, 2, 0], [0, 0, 0]]


def test_indicator_sparse_and_weighted(run):
    ident = fc.categorical_column_with_identity("i", 4)
    sparse = _sparse([[0, 0], [0, 1], [2, 0]], [3, 1, 0], [3, 2], kf.int64)
    out = run(fc.input_layer({"i": sparse}, [fc.indicator_column(ident)]))
    assert out.tolist() == [[0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]
    weighted = fc.indicator_column(fc.weighted_categorical_column(ident, "w"))
    out = run(fc.input_layer({"i": kf.constant([[3, 1], [2, -1]]),
                              "w": kf.constant([[0.5, 2.0], [4.0, 0.0]])}, [weighted]))
    np.testing.assert_allclose(out, [[0, 2.0, 0, 0.5], [0, 0, 4.0, 0]])


# ---------------------------------------------------------------------------- embeddings
def _embed_reference(rows, combiner):
    out = []
    for row in rows:
        if not row:
            out.append(np.zeros(3, np.float32))
            continue
        ids, w = zip(*row)
        w = np.array(w, np.float32)[:, None]
        s = (W[list(ids)] * w).sum(0)
        out.append(s if combiner == "sum" else s / w.sum() if combiner == "mean"
                   else s / np.sqrt((w ** 2).sum()))
    return np.array(out)


@pytest.mark.parametrize("combiner", ["mean", "sqrtn", "sum"])
def test_embedding_combiners(run, combiner):
    ident = fc.categorical_column_with_identity("i", 5)
    col = fc.embedding_column(ident, 3, combiner=combiner, initializer=kf.constant_initializer(W))
    out = run(fc.input_layer({"i": kf.constant([[1, 4], [2, -1], [-1, -1], [0, 0]])}, [col]))
    rows = [[(1, 1), (4, 1)], [(2, 1)], [], [(0, 1), (0, 1)]]
    np.testing.assert_allclose(out, _embed_reference(rows, combiner), rtol=1e-6)


@pytest.mark.parametrize("combiner", ["mean", "sqrtn", "sum"])
def test_weighted_embedding_combiners(run, combiner):
    col = fc.embedding_column(
        fc.weighted_categorical_column(fc.categorical_column_with_identity("i", 5), "w"), 3,
        combiner=combiner, initializer=kf.constant_initializer(W))
    out = run(fc.input_layer({"i": kf.constant([[1, 4], [2, -1]]),
                              "w": kf.constant([[2.0, 0.5], [3.0, 0.0]])}, [col]))
    np.testing.assert_allclose(out, _embed_reference([[(1, 2.0), (4, 0.5)], [(2, 3.0)]], combiner),
                               rtol=1e-6)


def test_embedding_variable_default_initializer_and_max_norm(run):
    col = fc.embedding_column(fc.categorical_column_with_identity("i", 50), 4)
    assert col.initializer.stddev == pytest.approx(0.5)
    out = fc.input_layer({"i": kf.constant([[1]])}, [col])
    var, = kf.global_variables()
    assert var.op.name == "input_layer/i_embedding/embedding_weights"
    assert var.shape.as_list() == [50, 4] and var in kf.trainable_variables()
    assert np.abs(run(var)).max() <= 1.0 + 1e-6  # truncated at two stddevs
    clipped = fc.embedding_column(fc.categorical_column_with_identity("j", 5), 3, max_norm=0.1,
                                  initializer=kf.constant_initializer(W))
    got = run(fc.input_layer({"j": kf.constant([[4]])}, [clipped]))
    np.testing.assert_allclose(got[0], W[4] * 0.1 / np.linalg.norm(W[4]), rtol=1e-5)
    assert out.shape.as_list() == [1, 4]


def test_embedding_not_trainable():
    col = fc.embedding_column(fc.categorical_column_with_identity("i", 5), 2, trainable=False)
    fc.input_layer({"i": kf.constant([[1]])}, [col])
    assert kf.trainable_variables() == [] and len(kf.global_variables()) == 1


def test_embedding_errors():
    ident = fc.categorical_column_with_identity("i", 5)
    with pytest.raises(ValueError, match="Invalid dimension"):
        fc.embedding_column(ident, 0)
    with pytest.raises(ValueError, match="combiner"):
        fc.embedding_column(ident, 2, combiner="max")
    with pytest.raises(ValueError, match="Must specify both"):
        fc.embedding_column(ident, 2, ckpt_to_load_from="/tmp/x")
    with pytest.raises(ValueError, match="initializer must be callable"):
        fc.embedding_column(ident, 2, initializer=3)
    with pytest.raises(ValueError, match="categorical column"):
        fc.embedding_column(fc.numeric_column("n"), 2)


def test_embedding_from_checkpoint(tmp_path, run):
    with kf.Graph().as_default():
        v = kf.get_variable("old", initializer=kf.constant(W))
        with kf.Session() as sess:
            sess.run(v.initializer)
            path = kf.train.Saver([v]).save(sess, str(tmp_path / "ckpt"))
    col = fc.embedding_column(fc.categorical_column_with_identity("i", 5), 3, combiner="sum",
                              ckpt_to_load_from=path, tensor_name_in_ckpt="old")
    out = run(fc.input_layer({"i": kf.constant([[2]])}, [col]))
    np.testing.assert_allclose(out, W[[2]])


def test_shared_embedding_columns_share_one_variable(run):
    a = fc.categorical_column_with_identity("a", 5)
    b = fc.categorical_column_with_identity("b", 5)
    ea, eb = fc.shared_embedding_columns([b, a], 3, combiner="sum",
                                         initializer=kf.constant_initializer(W))
    assert (ea.name, eb.name) == ("b_shared_embedding", "a_shared_embedding")
    assert ea.shared_embedding_collection_name == "a_b_shared_embedding"
    out = run(fc.input_layer({"a": kf.constant([[1], [2]]), "b": kf.constant([[3], [4]])}, [ea, eb]))
    np.testing.assert_allclose(out, np.concatenate([W[[1, 2]], W[[3, 4]]], 1))
    var, = kf.global_variables()
    assert var.op.name == "input_layer/a_b_shared_embedding/embedding_weights"
    assert kf.get_collection("a_b_shared_embedding") == [var]


def test_shared_embedding_errors():
    a = fc.categorical_column_with_identity("a", 5)
    with pytest.raises(ValueError, match="same number of buckets"):
        fc.shared_embedding_columns([a, fc.categorical_column_with_identity("b", 6)], 2)
    with pytest.raises(ValueError, match="same type"):
        fc.shared_embedding_columns([a, fc.categorical_column_with_hash_bucket("b", 5)], 2)
    cols = fc.shared_embedding_columns([a, fc.weighted_categorical_column(
        fc.categorical_column_with_identity("b", 5), "w")], 2, shared_embedding_collection_name="s")
    assert [c._var_scope_name for c in cols] == ["s", "s"]

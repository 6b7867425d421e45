"""input_layer, linear_model and make_parse_example_spec (kernflow/core/feature_column/layers.py):
ordering, shapes, variable names and collections, sparse combiners, parsing Examples, errors,
and a small model whose loss falls."""

import numpy as np
import pytest

import kernflow.core as kf

fc = kf.feature_column


def _sparse(indices, values, shape, dtype=None):
    return kf.SparseTensor(kf.constant(indices, kf.int64), kf.constant(values, dtype=dtype),
                           kf.constant(shape, kf.int64))


# ---------------------------------------------------------------------------- input_layer
def test_input_layer_orders_columns_by_name(run):
    z, a = fc.numeric_column("z"), fc.numeric_column("a", shape=(2,))
    outputs = {}
    out = fc.input_layer({"z": kf.constant([[1.0]]), "a": kf.constant([[2.0, 3.0]])}, [z, a],
                         cols_to_output_tensors=outputs)
    assert run(out).tolist() == [[2.0, 3.0, 1.0]]
    assert out.shape.as_list() == [1, 3]
    assert set(outputs) == {z, a} and outputs[a].shape.as_list()[1] == 2


def test_input_layer_variable_names_scopes_and_collections():
    e1 = fc.embedding_column(fc.categorical_column_with_identity("x", 5), 2)
    e2 = fc.embedding_column(fc.categorical_column_with_identity("y", 6), 3)
    n = fc.numeric_column("n")
    feats = {"x": kf.constant([[1]]), "y": kf.constant([[2]]), "n": kf.constant([[1.0]])}
    cols_to_vars = {}
    fc.input_layer(feats, [e2, n, e1], weight_collections=["mine"], cols_to_vars=cols_to_vars)
    names = [v.op.name for v in kf.global_variables()]
    assert names == ["input_layer/x_embedding/embedding_weights",
                     "input_layer/y_embedding/embedding_weights"]
    assert [v.op.name for v in kf.get_collection("mine")] == names
    assert [v.op.name for v in kf.get_collection(kf.GraphKeys.MODEL_VARIABLES)] == names
    assert cols_to_vars[n] == [] and [v.op.name for v in cols_to_vars[e2]] == names[1:]
    fc.input_layer(feats, [e1])
    assert kf.global_variables()[-1].op.name == "input_layer_1/x_embedding/embedding_weights"
    with kf.variable_scope("tower"):
        fc.input_layer(feats, [e1], trainable=False)
    assert kf.global_variables()[-1].op.name == "tower/input_layer/x_embedding/embedding_weights"
    assert len(kf.trainable_variables()) == 3


def test_input_layer_partitioned_embedding(run):
    col = fc.embedding_column(fc.categorical_column_with_identity("x", 6), 2, combiner="sum",
                              initializer=kf.constant_initializer(np.arange(12.0).reshape(6, 2)))
    with kf.variable_scope("p", partitioner=kf.fixed_size_partitioner(2)):
        out = fc.input_layer({"x": kf.constant([[0, 5], [3, -1]])}, [col])
    assert len(kf.global_variables()) == 2
    np.testing.assert_allclose(run(out), [[10.0, 12.0], [6.0, 7.0]])


def test_input_layer_errors():
    n = fc.numeric_column("n")
    with pytest.raises(ValueError, match="Feature missing is not in features dictionary"):
        fc.input_layer({"n": kf.constant([[1.0]])}, [fc.numeric_column("missing")])
    with pytest.raises(ValueError, match="must be a _DenseColumn"):
        fc.input_layer({"c": kf.constant([[1]])}, [fc.categorical_column_with_identity("c", 3)])
    with pytest.raises(ValueError, match="must not be empty"):
        fc.input_layer({"n": kf.constant([[1.0]])}, [])
    with pytest.raises(ValueError, match="Duplicate feature column name"):
        fc.input_layer({"n": kf.constant([[1.0]])}, [n, fc.numeric_column("n", shape=2)])
    with pytest.raises(ValueError, match="found dict"):
        fc.input_layer({"n": kf.constant([[1.0]])}, {"n": n})
    with pytest.raises(ValueError, match="must be a _FeatureColumn"):
        fc.input_layer({"n": kf.constant([[1.0]])}, ["n"])
    with pytest.raises(ValueError, match="Batch size"):
        fc.input_layer({"n": kf.constant([[1.0]]), "m": kf.constant([[1.0], [2.0]])},
                       [n, fc.numeric_column("m")])
    with pytest.raises(ValueError, match="features must be a dict"):
        fc.input_layer([kf.constant([[1.0]])], [n])


def test_input_layer_single_column_and_feature_fed_through_placeholder(run):
    x = kf.placeholder(kf.float32, [None])
    out = fc.input_layer({"x": x}, fc.numeric_column("x"))
    with kf.Session() as sess:
        assert sess.run(out, {x: [1.0, 2.0]}).tolist() == [[1.0], [2.0]]


# ---------------------------------------------------------------------------- linear_model
def test_linear_model_variables_and_zero_start(run):
    cols_to_vars = {}
    n = fc.numeric_column("n", shape=(2,))
    c = fc.categorical_column_with_vocabulary_list("c", ["a", "b"])
    out = fc.linear_model({"n": kf.constant([[1.0, 2.0]]), "c": kf.constant([["a"]])}, [n, c],
                          units=3, cols_to_vars=cols_to_vars)
    assert out.shape.as_list() == [1, 3]
    assert [(v.op.name, v.shape.as_list()) for v in kf.global_variables()] == [
        ("linear_model/c/weights", [2, 3]), ("linear_model/n/weights", [2, 3]),
        ("linear_model/bias_weights", [3])]
    assert [v.op.name for v in cols_to_vars["bias"]] == ["linear_model/bias_weights"]
    assert [v.op.name for v in cols_to_vars[n]] == ["linear_model/n/weights"]
    assert run(out).tolist() == [[0.0, 0.0, 0.0]]


def _assign_all(values):
    return [kf.assign(v, values[v.op.name.split("/")[1]]) for v in kf.global_variables()]


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_linear_model_sparse_combiners(combiner):
    c = fc.categorical_column_with_identity("c", 4)
    n = fc.numeric_column("n")
    b = fc.bucketized_column(fc.numeric_column("p"), [0.0])
    out = fc.linear_model({"c": _sparse([[0, 0], [0, 1], [1, 0]], [1, 3, 2], [3, 2], kf.int64),
                           "n": kf.constant([[2.0], [3.0], [4.0]]), "p": kf.constant([-1.0, 1.0, 1.0])},
                          [c, n, b], sparse_combiner=combiner)
    wc = np.array([[1.0], [10.0], [100.0], [1000.0]], np.float32)
    values = {"c": wc, "n": np.array([[0.5]], np.float32), "p_bucketized": np.array([[7.0], [9.0]],
                                                                                    np.float32),
              "bias_weights": np.array([0.25], np.float32)}
    with kf.Session() as sess:
        sess.run(_assign_all(values))
        got = sess.run(out)
    row0 = {"sum": 1010.0, "mean": 505.0, "sqrtn": 1010.0 / np.sqrt(2)}[combiner]
    want = np.array([[row0 + 1.0 + 7.0], [100.0 + 1.5 + 9.0], [0.0 + 2.0 + 9.0]]) + 0.25
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_linear_model_weighted_and_indicator_columns():
    c = fc.weighted_categorical_column(fc.categorical_column_with_identity("c", 3), "w")
    ind = fc.indicator_column(fc.categorical_column_with_identity("d", 2))
    out = fc.linear_model({"c": kf.constant([[0, 2]]), "w": kf.constant([[2.0, 3.0]]),
                           "d": kf.constant([[1, 1]])}, [c, ind])
    names = [v.op.name for v in kf.global_variables()]
    assert names == ["linear_model/c_weighted_by_w/weights", "linear_model/d_indicator/weights",
                     "linear_model/bias_weights"]
    values = {"c_weighted_by_w": np.array([[1.0], [5.0], [10.0]], np.float32),
              "d_indicator": np.array([[3.0], [4.0]], np.float32),
              "bias_weights": np.array([0.0], np.float32)}
    with kf.Session() as sess:
        sess.run(_assign_all(values))
        assert sess.run(out).tolist() == [[2.0 + 30.0 + 8.0]]


def test_linear_model_errors():
    n = fc.numeric_column("n")
    with pytest.raises(ValueError, match="sparse_combiner"):
        fc.linear_model({"n": kf.constant([[1.0]])}, [n], sparse_combiner="max")
    with pytest.raises(ValueError, match="Feature q is not in features dictionary"):
        fc.linear_model({"n": kf.constant([[1.0]])}, [fc.categorical_column_with_identity("q", 2)])


# ---------------------------------------------------------------------------- parse_example
def _example(**features):
    feats = {}
    for key, value in features.items():
        if isinstance(value[0], float):
            feats[key] = kf.train.Feature(float_list=kf.train.FloatList(value=value))
        elif isinstance(value[0], int):
            feats[key] = kf.train.Feature(int64_list=kf.train.Int64List(value=value))
        else:
            feats[key] = kf.train.Feature(bytes_list=kf.train.BytesList(value=[v.encode() for v in value]))
    return kf.train.Example(features=kf.train.Features(feature=feats)).SerializeToString()


def test_make_parse_example_spec_with_parse_example(run):
    price = fc.numeric_column("price", default_value=-1.0)
    words = fc.categorical_column_with_vocabulary_list("words", ["good", "bad"])
    ids = fc.categorical_column_with_identity("ids", 10)
    cols = [fc.bucketized_column(price, [0.0, 5.0]), fc.indicator_column(words),
            fc.embedding_column(ids, 2, combiner="sum", initializer=kf.ones_initializer()), price]
    spec = fc.make_parse_example_spec(cols)
    assert spec == {"price": kf.FixedLenFeature((1,), kf.float32, (-1.0,)),
                    "words": kf.VarLenFeature(kf.string), "ids": kf.VarLenFeature(kf.int64)}
    serialized = [_example(price=[7.0], words=["bad", "good", "bad"], ids=[1, 2, 3]),
                  _example(words=["meh"])]
    features = kf.parse_example(kf.constant(serialized), spec)
    out = run(fc.input_layer(features, cols))
    # ids_embedding (2), price (1), price_bucketized (3), words_indicator (2)
    np.testing.assert_allclose(out, [[3.0, 3.0, 7.0, 0, 0, 1, 1, 2],
                                     [0.0, 0.0, -1.0, 1, 0, 0, 0, 0]])


def test_make_parse_example_spec_conflicts():
    with pytest.raises(ValueError, match="different parse_spec for key a"):
        fc.make_parse_example_spec([fc.numeric_column("a"),
                                    fc.categorical_column_with_identity("a", 3)])
    with pytest.raises(ValueError, match="must be _FeatureColumn"):
        fc.make_parse_example_spec(["a"])


# ---------------------------------------------------------------------------- training
def _data(n, rng):
    age = rng.uniform(0, 60, n).astype(np.float32)
    color = rng.choice(["red", "green", "blue"], n)
    city = rng.choice(["x", "y", "z", "w"], n)
    logit = (age > 30) * 1.5 - (color == "red") * 2.0 + ((city == "x") & (age < 20)) * 2.5 - 0.3
    return {"age": age, "color": color.astype(object), "city": city.astype(object)}, \
        (logit > 0).astype(np.float32)


def test_training_embedding_numeric_bucketized_crossed_lowers_loss():
    rng = np.random.RandomState(0)
    data, labels = _data(256, rng)
    age = fc.numeric_column("age", normalizer_fn=lambda x: x / 60.0)
    age_b = fc.bucketized_column(fc.numeric_column("age"), [20.0, 30.0, 40.0])
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    city = fc.categorical_column_with_hash_bucket("city", 20)
    cross = fc.crossed_column(["city", age_b], 50)
    features = {k: kf.constant(v) for k, v in data.items()}
    dnn_in = fc.input_layer(features, [age, age_b, fc.embedding_column(color, 4),
                                       fc.embedding_column(cross, 3), fc.indicator_column(city)])
    hidden = kf.layers.dense(dnn_in, 8, activation=kf.nn.relu)
    logits = kf.layers.dense(hidden, 1) + fc.linear_model(features, [age_b, color, cross])
    loss = kf.reduce_mean(kf.nn.sigmoid_cross_entropy_with_logits(labels=labels[:, None],
                                                                  logits=logits))
    grads = kf.gradients(loss, kf.trainable_variables())
    assert all(g is not None for g in grads)
    train = kf.train.AdamOptimizer(0.05).minimize(loss)
    emb = [v for v in kf.global_variables() if v.op.name.endswith("embedding_weights")]
    with kf.Session() as sess:
        sess.run([kf.global_variables_initializer(), kf.tables_initializer()])
        before, emb_before = sess.run([loss, emb])
        for _ in range(60):
            sess.run(train)
        after, emb_after = sess.run([loss, emb])
    assert after < 0.5 * before
    assert all(not np.allclose(a, b) for a, b in zip(emb_before, emb_after))

"""Categorical columns (kernflow/core/feature_column/categorical.py): ids for dense and sparse
inputs, out-of-vocabulary and default handling, hashing and crossing, weights, and errors."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

fc = kf.feature_column


def _sparse(indices, values, shape, dtype=None):
    return kf.SparseTensor(kf.constant(indices, kf.int64), kf.constant(values, dtype=dtype),
                           kf.constant(shape, kf.int64))


# ---------------------------------------------------------------------------- identity
def test_identity_dense_drops_minus_one(ids_of):
    col = fc.categorical_column_with_identity("x", num_buckets=4)
    ids, _ = ids_of(col, {"x": kf.constant([[1, -1], [3, 0]])})
    assert ids.tolist() == [[1, -1], [3, 0]]
    assert col.name == "x" and col._num_buckets == 4


def test_identity_sparse_rank1_expanded(ids_of):
    col = fc.categorical_column_with_identity("x", num_buckets=4)
    ids, _ = ids_of(col, {"x": kf.constant([2, 0, 3], kf.int64)})
    assert ids.tolist() == [[2], [0], [3]]
    ids, _ = ids_of(col, {"x": _sparse([[0, 0], [0, 1], [2, 0]], [1, 2, 3], [3, 2], kf.int64)})
    assert ids.tolist() == [[1, 2], [-1, -1], [3, -1]]


def test_identity_default_value_replaces_out_of_range(ids_of):
    col = fc.categorical_column_with_identity("x", num_buckets=3, default_value=0)
    ids, _ = ids_of(col, {"x": kf.constant([[5], [2], [-7]], kf.int64)})
    # -1 is dropped as the dense ignore value; other out-of-range ids become default_value.
    assert ids.tolist() == [[0], [2], [0]]


def test_identity_out_of_range_without_default_fails_at_run_time(run, ids_of):
    col = fc.categorical_column_with_identity("x", num_buckets=3)
    with pytest.raises(errors.InvalidArgumentError, match="exceeds number of buckets"):
        ids_of(col, {"x": kf.constant([[5]], kf.int64)})


def test_identity_argument_and_dtype_errors(ids_of):
    with pytest.raises(ValueError, match="num_buckets 0 < 1"):
        fc.categorical_column_with_identity("x", 0)
    with pytest.raises(ValueError, match="default_value 4 not in range"):
        fc.categorical_column_with_identity("x", 3, default_value=4)
    with pytest.raises(ValueError, match="key must be a string"):
        fc.categorical_column_with_identity(3, 3)
    col = fc.categorical_column_with_identity("x", 3)
    with pytest.raises(ValueError, match="not integer"):
        ids_of(col, {"x": kf.constant([["a"]])})


# ---------------------------------------------------------------------------- vocabulary list
def test_vocabulary_list_strings_default_dropped(ids_of):
    col = fc.categorical_column_with_vocabulary_list("w", ["a", "b", "c"])
    assert col.dtype == kf.string and col._num_buckets == 3
    ids, _ = ids_of(col, {"w": kf.constant([["b", "zz"], ["", "a"]])})
    # '' is dropped before the lookup; "zz" maps to default_value -1.
    assert ids.tolist() == [[1, -1], [-1, 0]]


def test_vocabulary_list_default_value_and_oov_buckets(ids_of):
    col = fc.categorical_column_with_vocabulary_list("w", ["a", "b"], default_value=7)
    ids, _ = ids_of(col, {"w": kf.constant([["q"], ["b"]])})
    assert ids.tolist() == [[7], [1]]
    col = fc.categorical_column_with_vocabulary_list("w", ["a", "b"], num_oov_buckets=3)
    assert col._num_buckets == 5
    ids, _ = ids_of(col, {"w": kf.constant([["q", "r", "s", "a"]])})
    assert ids[0, 3] == 0 and all(2 <= i < 5 for i in ids[0, :3])


def test_vocabulary_list_ints(ids_of):
    col = fc.categorical_column_with_vocabulary_list("n", [10, 20, 30])
    assert col.dtype == kf.int64
    ids, _ = ids_of(col, {"n": kf.constant([[30, 11], [10, -1]], kf.int32)})
    assert ids.tolist() == [[2, -1], [0, -1]]
    ids, _ = ids_of(col, {"n": _sparse([[0, 0], [1, 1]], [20, 10], [2, 2], kf.int64)})
    assert ids.tolist() == [[1, -1], [-1, 0]]


def test_vocabulary_list_errors(ids_of):
    with pytest.raises(ValueError, match="must be non-empty"):
        fc.categorical_column_with_vocabulary_list("w", [])
    with pytest.raises(ValueError, match="Duplicate keys"):
        fc.categorical_column_with_vocabulary_list("w", ["a", "a"])
    with pytest.raises(ValueError, match="do not match"):
        fc.categorical_column_with_vocabulary_list("w", ["a"], dtype=kf.int64)
    with pytest.raises(ValueError, match="Can't specify both"):
        fc.categorical_column_with_vocabulary_list("w", ["a"], default_value=2, num_oov_buckets=1)
    col = fc.categorical_column_with_vocabulary_list("w", ["a"])
    with pytest.raises(ValueError, match="must be compatible"):
        ids_of(col, {"w": kf.constant([[1]], kf.int64)})


# ---------------------------------------------------------------------------- vocabulary file
def test_vocabulary_file(tmp_path, ids_of):
    path = tmp_path / "vocab.txt"
    path.write_text("red\ngreen\nblue\n")
    col = fc.categorical_column_with_vocabulary_file("c", str(path))
    assert col.vocabulary_size == 3 and col._num_buckets == 3
    ids, _ = ids_of(col, {"c": kf.constant([["blue", "pink"], ["red", ""]])})
    assert ids.tolist() == [[2, -1], [0, -1]]
    col = fc.categorical_column_with_vocabulary_file("c", str(path), vocabulary_size=2,
                                                     num_oov_buckets=2)
    assert col._num_buckets == 4
    ids, _ = ids_of(col, {"c": kf.constant([["green", "blue"]])})
    assert ids[0, 0] == 1 and ids[0, 1] in (2, 3)
    col = fc.categorical_column_with_vocabulary_file("c", str(path), default_value=9)
    assert ids_of(col, {"c": kf.constant([["pink"]])})[0].tolist() == [[9]]


def test_vocabulary_file_errors(tmp_path):
    with pytest.raises(ValueError, match="Missing vocabulary_file"):
        fc.categorical_column_with_vocabulary_file("c", "")
    with pytest.raises(ValueError, match="does not exist"):
        fc.categorical_column_with_vocabulary_file("c", str(tmp_path / "none.txt"))
    with pytest.raises(ValueError, match="Invalid vocabulary_size"):
        fc.categorical_column_with_vocabulary_file("c", "v.txt", vocabulary_size=0)
    with pytest.raises(ValueError, match="Invalid num_oov_buckets"):
        fc.categorical_column_with_vocabulary_file("c", "v.txt", 3, num_oov_buckets=-1)
    with pytest.raises(ValueError, match="must be string or integer"):
        fc.categorical_column_with_vocabulary_file("c", "v.txt", 3, dtype=kf.float32)


# ---------------------------------------------------------------------------- hash buckets
def test_hash_bucket_strings_are_fingerprint64(ids_of):
    # Fingerprint64 % 1000 of "a" and "abc" (TF's values, see tests/ops/test_string_ops.py).
    col = fc.categorical_column_with_hash_bucket("h", 1000)
    ids, _ = ids_of(col, {"h": kf.constant([["a", ""], ["abc", "a"]])})
    assert ids.tolist() == [[939, -1], [385, 939]]


def test_hash_bucket_ints_hash_their_decimal_strings(run, ids_of):
    col = fc.categorical_column_with_hash_bucket("h", 97, dtype=kf.int64)
    ids, _ = ids_of(col, {"h": _sparse([[0, 0], [1, 0]], [12, 345], [2, 1], kf.int64)})
    want = run(kf.string_to_hash_bucket_fast(["12", "345"], 97))
    assert ids[:, 0].tolist() == want.tolist()


def test_hash_bucket_errors(ids_of):
    with pytest.raises(ValueError, match="must be set"):
        fc.categorical_column_with_hash_bucket("h", None)
    with pytest.raises(ValueError, match="at least 1"):
        fc.categorical_column_with_hash_bucket("h", 0)
    with pytest.raises(ValueError, match="must be string or integer"):
        fc.categorical_column_with_hash_bucket("h", 3, dtype=kf.float32)
    col = fc.categorical_column_with_hash_bucket("h", 3)
    with pytest.raises(ValueError, match="must be compatible"):
        ids_of(col, {"h": kf.constant([[1]], kf.int64)})


# ---------------------------------------------------------------------------- crosses
def test_crossed_column_name_and_spec():
    b = fc.bucketized_column(fc.numeric_column("p"), [1.0])
    inner = fc.crossed_column(["z", "a"], 10)
    col = fc.crossed_column([inner, b], 5, hash_key=7)
    assert col.name == "a_X_p_bucketized_X_z"
    spec = fc.make_parse_example_spec([col])
    assert set(spec) == {"a", "z", "p"} and spec["a"] == kf.VarLenFeature(kf.string)


def test_crossed_column_matches_sparse_cross_hashed(run, ids_of):
    b = fc.bucketized_column(fc.numeric_column("p"), [0.0, 10.0])
    col = fc.crossed_column(["w", b], 1000, hash_key=123)
    ids, _ = ids_of(col, {"w": kf.constant([["a", "b"], ["c", "c"]]), "p": kf.constant([5.0, 50.0])})
    # Buckets of 5.0 and 50.0 are 1 and 2, crossed as int64 ids; the kernel puts the sparse
    # bucket ids before the dense raw feature in each cross, as TF's SparseCross does.
    buckets = _sparse([[0, 0], [1, 0]], [1, 2], [2, 1], kf.int64)
    want = kf.sparse.cross_hashed([buckets, kf.constant([["a", "b"], ["c", "c"]])], num_buckets=1000,
                                  hash_key=123)
    assert ids.tolist() == run(kf.sparse_tensor_to_dense(want, default_value=-1)).tolist()
    assert ids[1, 0] == ids[1, 1] and ids[0, 0] != ids[0, 1]


def test_crossed_column_errors():
    h = fc.categorical_column_with_hash_bucket("h", 3)
    with pytest.raises(ValueError, match="hash_bucket is not supported for crossing"):
        fc.crossed_column(["a", h], 10)
    with pytest.raises(ValueError, match="length > 1"):
        fc.crossed_column(["a"], 10)
    with pytest.raises(ValueError, match="must be > 1"):
        fc.crossed_column(["a", "b"], 0)
    with pytest.raises(ValueError, match="Unsupported key type"):
        fc.crossed_column(["a", fc.numeric_column("n")], 10)


def test_crossed_column_rejects_weighted_keys_and_float_features(ids_of):
    w = fc.weighted_categorical_column(fc.categorical_column_with_identity("i", 3), "wt")
    col = fc.crossed_column(["a", w], 10)
    with pytest.raises(ValueError, match="does not support weight_tensor"):
        ids_of(col, {"a": kf.constant([["x"]]), "i": kf.constant([[1]]), "wt": kf.constant([[2.0]])})
    col = fc.crossed_column(["a", "f"], 10)
    with pytest.raises(TypeError, match="must be string or integer"):
        ids_of(col, {"a": kf.constant([["x"]]), "f": kf.constant([[1.5]])})


# ---------------------------------------------------------------------------- weighted
def test_weighted_categorical_column(ids_of):
    ident = fc.categorical_column_with_identity("i", 5)
    col = fc.weighted_categorical_column(ident, "wt")
    assert col.name == "i_weighted_by_wt" and col._num_buckets == 5
    ids, weights = ids_of(col, {"i": kf.constant([[1, 4], [2, -1]]),
                                "wt": kf.constant([[0.5, 2.0], [3.0, 0.0]])})
    assert ids.tolist() == [[1, 4], [2, -1]]
    np.testing.assert_allclose(weights, [[0.5, 2.0], [3.0, 0.0]])
    assert fc.make_parse_example_spec([col])["wt"] == kf.VarLenFeature(kf.float32)


def test_weighted_categorical_column_errors(ids_of):
    ident = fc.categorical_column_with_identity("i", 5)
    with pytest.raises(ValueError, match="not convertible to float"):
        fc.weighted_categorical_column(ident, "wt", dtype=kf.string)
    col = fc.weighted_categorical_column(ident, "wt")
    with pytest.raises(ValueError, match="Bad dtype"):
        ids_of(col, {"i": kf.constant([[1]]), "wt": kf.constant([[1]], kf.int64)})
    with pytest.raises(ValueError, match="Feature wt is not in features dictionary"):
        ids_of(col, {"i": kf.constant([[1]])})

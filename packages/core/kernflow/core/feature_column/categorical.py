"""Categorical columns of `kf.feature_column`: ids from identities, vocabularies, hashes, crosses.

Invariants:
  * ``_get_sparse_tensors`` gives a 2-D int64 SparseTensor of ids; a dense input is first made
    sparse dropping -1 (ints) or '' (strings), as TF1 does; ids < 0 (a vocabulary's
    ``default_value`` -1) are later dropped by the lookups that consume them.
  * Hashing: `categorical_column_with_hash_bucket` is ``kf.string_to_hash_bucket_fast`` (FarmHash
    Fingerprint64 modulo the bucket count, TF's StringToHashBucketFast); integers are formatted
    with ``kf.as_string`` first. `crossed_column` is ``kf.sparse.cross_hashed`` (the SparseCross
    kernel: Fingerprint64 of each string feature, integers taken as their int64 value, combined
    with FingerprintCat64 starting from ``hash_key``, then modulo ``hash_bucket_size``).
"""

import collections

import numpy as np

from kernflow.core.feature_column.base import (CategoricalColumn, IdWeightPair, _kf,
                                               assert_key_is_string, assert_string_or_int,
                                               check_input_dtype, sparse_with_values,
                                               to_sparse_dropping)
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework.sparse_tensor import SparseTensor


def _var_len_spec(key, dtype):
    return {key: _kf().VarLenFeature(dtype)}


class _KeyedCategoricalColumn(CategoricalColumn):
    """A categorical column of one feature: named by its key, parsed as a VarLenFeature."""

    __slots__ = ()

    @property
    def name(self):
        return self.key

    @property
    def _parse_example_spec(self):
        return _var_len_spec(self.key, self._feature_dtype)

    @property
    def _feature_dtype(self):
        return self.dtype


def _ids_input(inputs, key, column_dtype):
    """The feature `key` as a SparseTensor checked against the column's dtype."""
    tensor = to_sparse_dropping(inputs.get(key))
    check_input_dtype(column_dtype, tensor, key)
    return tensor


# ---------------------------------------------------------------------------- identity
class IdentityCategoricalColumn(
        _KeyedCategoricalColumn,
        collections.namedtuple("IdentityCategoricalColumn", ("key", "number_buckets",
                                                             "default_value"))):
    """Integer ids used as they are (`categorical_column_with_identity`)."""

    @property
    def _feature_dtype(self):
        return _dtypes.int64

    @property
    def _num_buckets(self):
        return self.number_buckets

    def _transform_feature(self, inputs):
        kf = _kf()
        tensor = to_sparse_dropping(inputs.get(self.key))
        if not tensor.dtype.base_dtype.is_integer:
            raise ValueError(f"Invalid input, not integer. key: {self.key} dtype: "
                             f"{tensor.dtype.base_dtype.name}")
        values = kf.cast(tensor.values, _dtypes.int64, name=f"{self.key}_values")
        limit = kf.constant(self.number_buckets, _dtypes.int64, name="num_buckets")
        zero = kf.constant(0, _dtypes.int64, name="zero")
        if self.default_value is None:
            message = f'Bucket index for categorical column "{self.key}" exceeds number of buckets'
            checks = [kf.assert_less(values, limit, message=message, name="assert_less_than_num_buckets"),
                      kf.assert_greater_equal(values, zero, message=message,
                                              name="assert_greater_or_equal_0")]
            with kf.control_dependencies(checks):
                values = kf.identity(values)
        else:
            in_range = kf.logical_and(kf.greater_equal(values, zero), kf.less(values, limit))
            values = kf.where(in_range, values,
                              kf.fill(kf.shape(values), kf.constant(self.default_value, _dtypes.int64)),
                              name="default_values")
        return sparse_with_values(tensor, values)


def categorical_column_with_identity(key, num_buckets, default_value=None):
    """A categorical column whose integer inputs are the ids (TF1 semantics).

    Args:
        key: the feature key.
        num_buckets: ids lie in [0, num_buckets).
        default_value: the id for inputs outside that range; None makes them an
            InvalidArgumentError at run time.

    Raises:
        ValueError: num_buckets < 1, or default_value outside [0, num_buckets).
    """
    assert_key_is_string(key)
    if num_buckets is None or num_buckets < 1:
        raise ValueError(f"num_buckets {num_buckets} < 1, column_name {key}")
    if default_value is not None and not 0 <= default_value < num_buckets:
        raise ValueError(f"default_value {default_value} not in range [0, {num_buckets}), "
                         f"column_name {key}")
    return IdentityCategoricalColumn(key, int(num_buckets), default_value)


# ---------------------------------------------------------------------------- vocabularies
def _check_oov(key, num_oov_buckets, default_value):
    if num_oov_buckets is None or num_oov_buckets < 0:
        raise ValueError(f"Invalid num_oov_buckets {num_oov_buckets} in {key}.")
    if default_value not in (None, -1) and num_oov_buckets:
        raise ValueError(f"Can't specify both num_oov_buckets and default_value in {key}.")


def _lookup_ids(inputs, column, make_table):
    tensor = _ids_input(inputs, column.key, column.dtype)
    key_dtype = column.dtype
    if tensor.dtype.base_dtype.is_integer:
        key_dtype = _dtypes.int64
        if tensor.dtype.base_dtype != _dtypes.int64:
            tensor = sparse_with_values(tensor, _kf().cast(tensor.values, _dtypes.int64))
    table = make_table(key_dtype, f"{column.key}_lookup")
    return sparse_with_values(tensor, table.lookup(tensor.values))


class VocabularyListCategoricalColumn(
        _KeyedCategoricalColumn,
        collections.namedtuple("VocabularyListCategoricalColumn",
                               ("key", "vocabulary_list", "dtype", "default_value", "num_oov_buckets"))):
    """Ids from positions in an in-memory vocabulary (`categorical_column_with_vocabulary_list`)."""

    @property
    def _num_buckets(self):
        return len(self.vocabulary_list) + self.num_oov_buckets

    def _transform_feature(self, inputs):
        return _lookup_ids(inputs, self, lambda key_dtype, name: _kf().lookup.index_table_from_tensor(
            vocabulary_list=self.vocabulary_list, default_value=self.default_value,
            num_oov_buckets=self.num_oov_buckets, dtype=key_dtype, name=name))


def _vocabulary_dtype(vocabulary_list, key):
    if all(isinstance(v, (str, bytes)) for v in vocabulary_list):
        return _dtypes.string
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vocabulary_list):
        return _dtypes.int64
    raise ValueError(f"vocabulary_list {vocabulary_list} must be all strings or all integers, "
                     f"column_name: {key}")


def categorical_column_with_vocabulary_list(key, vocabulary_list, dtype=None, default_value=-1,
                                            num_oov_buckets=0):
    """A categorical column mapping each input to its position in `vocabulary_list`.

    Args:
        key: the feature key.
        vocabulary_list: an ordered, duplicate-free list of strings or integers.
        dtype: the feature's dtype (string or an integer type); inferred when None.
        default_value: the id of out-of-vocabulary inputs (-1: dropped) when num_oov_buckets is 0.
        num_oov_buckets: > 0: out-of-vocabulary inputs hash into [len(vocabulary_list),
            len(vocabulary_list) + num_oov_buckets).

    Raises:
        ValueError: an empty or duplicated vocabulary, a dtype that does not match it, a negative
            num_oov_buckets, or both num_oov_buckets and a default_value.
    """
    assert_key_is_string(key)
    if vocabulary_list is None or len(vocabulary_list) < 1:
        raise ValueError(f"vocabulary_list {vocabulary_list} must be non-empty, column_name: {key}")
    vocabulary_list = tuple(v.item() if isinstance(v, np.generic) else v for v in vocabulary_list)
    if len(set(vocabulary_list)) != len(vocabulary_list):
        raise ValueError(f"Duplicate keys in vocabulary_list {vocabulary_list}, column_name: {key}")
    vocab_dtype = _vocabulary_dtype(vocabulary_list, key)
    _check_oov(key, num_oov_buckets, default_value)
    if dtype is None:
        dtype = vocab_dtype
    dtype = _dtypes.as_dtype(dtype)
    assert_string_or_int(dtype, prefix=f"column_name: {key} vocabulary")
    if dtype.is_integer != vocab_dtype.is_integer:
        raise ValueError(f"dtype {dtype.name} and vocabulary dtype {vocab_dtype.name} do not match, "
                         f"column_name: {key}")
    return VocabularyListCategoricalColumn(key, vocabulary_list, dtype, default_value,
                                           int(num_oov_buckets))


class VocabularyFileCategoricalColumn(
        _KeyedCategoricalColumn,
        collections.namedtuple("VocabularyFileCategoricalColumn",
                               ("key", "vocabulary_file", "vocabulary_size", "num_oov_buckets",
                                "default_value", "dtype"))):
    """Ids from line numbers in a vocabulary file (`categorical_column_with_vocabulary_file`)."""

    @property
    def _num_buckets(self):
        return self.vocabulary_size + self.num_oov_buckets

    def _transform_feature(self, inputs):
        return _lookup_ids(inputs, self, lambda key_dtype, name: _kf().lookup.index_table_from_file(
            vocabulary_file=self.vocabulary_file, num_oov_buckets=self.num_oov_buckets,
            vocab_size=self.vocabulary_size, default_value=self.default_value,
            key_dtype=key_dtype, name=name))


def _count_lines(vocabulary_file, key):
    gfile = _kf().gfile
    if not gfile.Exists(vocabulary_file):
        raise ValueError(f"vocabulary_file in {key} does not exist.")
    with gfile.GFile(vocabulary_file, mode="rb") as f:
        return sum(1 for _ in f)


def categorical_column_with_vocabulary_file(key, vocabulary_file, vocabulary_size=None,
                                            num_oov_buckets=0, default_value=None,
                                            dtype=_dtypes.string):
    """A categorical column mapping each input to its line number in `vocabulary_file`.

    Args:
        key: the feature key.
        vocabulary_file: a text file with one vocabulary entry per line.
        vocabulary_size: the number of lines used (the file's line count when None).
        num_oov_buckets: > 0: out-of-vocabulary inputs hash into [vocabulary_size,
            vocabulary_size + num_oov_buckets).
        default_value: the id of out-of-vocabulary inputs when num_oov_buckets is 0 (None: -1,
            dropped).
        dtype: the feature's dtype: string or an integer type.

    Raises:
        ValueError: no file, a missing file when vocabulary_size is None, a size <= 0, a negative
            num_oov_buckets, both num_oov_buckets and default_value, or a non string/int dtype.
    """
    assert_key_is_string(key)
    if not vocabulary_file:
        raise ValueError(f"Missing vocabulary_file in {key}.")
    if vocabulary_size is None:
        vocabulary_size = _count_lines(vocabulary_file, key)
    if vocabulary_size <= 0:
        raise ValueError(f"Invalid vocabulary_size in {key}.")
    _check_oov(key, num_oov_buckets, default_value)
    dtype = _dtypes.as_dtype(dtype)
    assert_string_or_int(dtype, prefix=f"column_name: {key} vocabulary")
    return VocabularyFileCategoricalColumn(key, vocabulary_file, int(vocabulary_size),
                                           int(num_oov_buckets),
                                           -1 if default_value is None else default_value, dtype)


# ---------------------------------------------------------------------------- hash buckets
class HashedCategoricalColumn(
        _KeyedCategoricalColumn,
        collections.namedtuple("HashedCategoricalColumn", ("key", "hash_bucket_size", "dtype"))):
    """Ids from hashing the inputs (`categorical_column_with_hash_bucket`)."""

    @property
    def _num_buckets(self):
        return self.hash_bucket_size

    def _transform_feature(self, inputs):
        kf = _kf()
        tensor = _ids_input(inputs, self.key, self.dtype)
        values = tensor.values
        if values.dtype.base_dtype != _dtypes.string:
            values = kf.as_string(values)
        return sparse_with_values(tensor, kf.string_to_hash_bucket_fast(
            values, self.hash_bucket_size, name="lookup"))


def categorical_column_with_hash_bucket(key, hash_bucket_size, dtype=_dtypes.string):
    """A categorical column of hashed inputs: ``Fingerprint64(str(x)) % hash_bucket_size``.

    Strings go through ``kf.string_to_hash_bucket_fast`` (FarmHash Fingerprint64, as TF's
    StringToHashBucketFast); integers are first turned into their decimal strings with
    ``kf.as_string``, as TF does, so the ids match TF's.

    Args:
        key: the feature key.
        hash_bucket_size: the number of buckets (> 0).
        dtype: the feature's dtype: string or an integer type.

    Raises:
        ValueError: hash_bucket_size missing or < 1, or dtype neither string nor integer.
    """
    assert_key_is_string(key)
    if hash_bucket_size is None:
        raise ValueError(f"hash_bucket_size must be set. key: {key}")
    if hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be at least 1. hash_bucket_size: "
                         f"{hash_bucket_size}, key: {key}")
    dtype = _dtypes.as_dtype(dtype)
    assert_string_or_int(dtype, prefix=f"column_name: {key}")
    return HashedCategoricalColumn(key, int(hash_bucket_size), dtype)


# ---------------------------------------------------------------------------- weighted
class WeightedCategoricalColumn(
        CategoricalColumn,
        collections.namedtuple("WeightedCategoricalColumn",
                               ("categorical_column", "weight_feature_key", "dtype"))):
    """Ids of another column with a weight each (`weighted_categorical_column`)."""

    @property
    def name(self):
        return f"{self.categorical_column.name}_weighted_by_{self.weight_feature_key}"

    @property
    def _parse_example_spec(self):
        spec = dict(self.categorical_column._parse_example_spec)
        if self.weight_feature_key in spec:
            raise ValueError(f"Parse config {spec[self.weight_feature_key]} already exists for "
                             f"{self.weight_feature_key}.")
        spec[self.weight_feature_key] = _kf().VarLenFeature(self.dtype)
        return spec

    @property
    def _num_buckets(self):
        return self.categorical_column._num_buckets

    def _transform_feature(self, inputs):
        kf = _kf()
        weights = inputs.get(self.weight_feature_key)
        if weights is None:
            raise ValueError(f"Missing weights {self.weight_feature_key}.")
        if self.dtype != weights.dtype.base_dtype:
            raise ValueError(f"Bad dtype, expected {self.dtype.name}, but got "
                             f"{weights.dtype.base_dtype.name}.")
        weights = to_sparse_dropping(weights, ignore_value=0.0)
        if not weights.dtype.base_dtype.is_floating:
            weights = sparse_with_values(weights, kf.cast(weights.values, _dtypes.float32))
        return self.categorical_column._get_sparse_tensors(inputs).id_tensor, weights

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        return IdWeightPair(*inputs.get(self))


def weighted_categorical_column(categorical_column, weight_feature_key, dtype=_dtypes.float32):
    """Gives each id of `categorical_column` the weight in feature `weight_feature_key`.

    Args:
        categorical_column: a CategoricalColumn (its ids).
        weight_feature_key: the feature holding the weights, with the ids' indices (a dense
            weight feature is made sparse dropping zeros).
        dtype: the weights' dtype (a float type).

    Raises:
        ValueError: dtype is not a float type.
    """
    dtype = _dtypes.as_dtype(dtype)
    if dtype is None or not (dtype.is_integer or dtype.is_floating):
        raise ValueError(f"dtype {dtype} is not convertible to float.")
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError(f"categorical_column must be a categorical column. Given: "
                         f"{categorical_column}")
    return WeightedCategoricalColumn(categorical_column, weight_feature_key, dtype)


# ---------------------------------------------------------------------------- crosses
class CrossedColumn(
        CategoricalColumn,
        collections.namedtuple("CrossedColumn", ("keys", "hash_bucket_size", "hash_key"))):
    """Hashed crosses of features and categorical columns (`crossed_column`)."""

    def _leaves(self):
        for key in self.keys:
            yield from (key._leaves() if isinstance(key, CrossedColumn) else (key,))

    @property
    def name(self):
        return "_X_".join(sorted(k if isinstance(k, str) else k.name for k in self._leaves()))

    @property
    def _parse_example_spec(self):
        spec = {}
        for key in self._leaves():
            spec.update(_var_len_spec(key, _dtypes.string) if isinstance(key, str)
                        else key._parse_example_spec)
        return spec

    @property
    def _num_buckets(self):
        return self.hash_bucket_size

    def _transform_feature(self, inputs):
        tensors = []
        for key in self._leaves():
            if isinstance(key, str):
                tensors.append(inputs.get(key))
                continue
            ids, weights = key._get_sparse_tensors(inputs)
            if weights is not None:
                raise ValueError(f"crossed_column does not support weight_tensor, but the given "
                                 f"column populates weight_tensor. Given column: {key.name}")
            tensors.append(ids)
        for tensor, key in zip(tensors, self._leaves()):
            if not isinstance(tensor, SparseTensor) and tensor.dtype.base_dtype not in (
                    _dtypes.string, _dtypes.int32, _dtypes.int64):
                raise TypeError(f"crossed_column feature {key} must be string or integer, got "
                                f"{tensor.dtype.base_dtype.name}")
        return _kf().sparse.cross_hashed(tensors, num_buckets=self.hash_bucket_size,
                                         hash_key=self.hash_key)


def crossed_column(keys, hash_bucket_size, hash_key=None):
    """Crosses features: one id per combination of the rows' values, hashed into buckets.

    The ids are ``kf.sparse.cross_hashed``'s: FarmHash Fingerprint64 of each string value (an
    integer value, e.g. a bucketized or identity id, is used as its int64 value), combined left
    to right with FingerprintCat64 starting from `hash_key` (TF's 0xDECAFCAFFE when None), modulo
    `hash_bucket_size` — the scheme of TF's SparseCross kernel; the ids are not tested bit for
    bit against TF's.

    Args:
        keys: at least two of: feature keys (raw string or integer features) and categorical
            columns other than hash-bucket columns (bucketized, identity, vocabulary, crossed).
        hash_bucket_size: the number of buckets (> 1).
        hash_key: the key the fingerprint combination starts from.

    Raises:
        ValueError: fewer than two keys, a bad key, or hash_bucket_size < 1.
    """
    if not hash_bucket_size or hash_bucket_size < 1:
        raise ValueError(f"hash_bucket_size must be > 1. hash_bucket_size: {hash_bucket_size}")
    if not keys or len(keys) < 2:
        raise ValueError(f"keys must be a list with length > 1. Given: {keys}")
    for key in keys:
        if isinstance(key, HashedCategoricalColumn):
            raise ValueError("categorical_column_with_hash_bucket is not supported for crossing. "
                             "Hashing before crossing will increase probability of collision. "
                             f"Instead, use the feature name as a string. Given: {key}")
        if not isinstance(key, (str, CategoricalColumn)):
            raise ValueError("Unsupported key type. All keys must be either string, or categorical "
                             f"column except _HashedCategoricalColumn. Given: {key}")
    return CrossedColumn(tuple(keys), int(hash_bucket_size), hash_key)

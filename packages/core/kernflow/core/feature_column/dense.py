"""Dense columns of `kf.feature_column`: numbers, buckets, indicators and embeddings.

Invariants:
  * ``_get_dense_tensor`` gives float32 [batch] + ``_variable_shape``; `input_layer` flattens it
    to [batch, num_elements].
  * Embedding weights are one ``kf.get_variable("embedding_weights", [num_buckets, dimension])``
    in the variable scope of the caller (``input_layer/<column name>``), so partitioners, reuse
    and checkpoints behave as for any variable; shared embeddings keep theirs in the graph
    collection named ``shared_embedding_collection_name`` and reuse it from there.
  * `bucketized_column` is both dense (a one-hot per element) and categorical (element i's bucket
    b is id ``b + i * (len(boundaries) + 1)``).
"""

import collections
import math

from kernflow.core.feature_column.base import (CategoricalColumn, DenseColumn, IdWeightPair, _kf,
                                               assert_key_is_string)
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework.sparse_tensor import SparseTensor
from kernflow.core.framework.tensor_shape import TensorShape

_COMBINERS = ("mean", "sqrtn", "sum")


# ---------------------------------------------------------------------------- numeric
def _check_shape(shape, key):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    for dim in shape:
        if not isinstance(dim, int):
            raise TypeError(f"shape dimensions must be integer. shape: {shape}, key: {key}")
        if dim < 1:
            raise ValueError(f"shape dimensions must be greater than 0. shape: {shape}, key: {key}")
    return shape


def _nested_tuple(shape, value):
    return value if not shape else tuple(_nested_tuple(shape[1:], value) for _ in range(shape[0]))


def _shape_of_nested(value):
    if not isinstance(value, (list, tuple)):
        return ()
    inner = {_shape_of_nested(v) for v in value}
    return (len(value),) + inner.pop() if len(inner) == 1 else None


def _as_tuple(value):
    return tuple(_as_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def _check_default_value(shape, default_value, dtype, key):
    """The default as a nested tuple of `shape` (TF1's ``_check_default_value``)."""
    if default_value is None:
        return None
    if isinstance(default_value, int) and not isinstance(default_value, bool):
        return _nested_tuple(shape, default_value)
    if isinstance(default_value, float) and dtype.is_floating:
        return _nested_tuple(shape, default_value)
    if callable(getattr(default_value, "tolist", None)):
        default_value = default_value.tolist()
    if isinstance(default_value, (list, tuple)):
        found = _shape_of_nested(default_value)
        if found is None or math.prod(found) != math.prod(shape) or (len(found) > 1 and found != shape):
            raise ValueError(f"The shape of default_value must be equal to given shape. "
                             f"default_value: {default_value}, shape: {shape}, key: {key}")
        flat = list(_flatten(default_value))
        if all(isinstance(v, int) for v in flat) or dtype.is_floating and all(
                isinstance(v, (int, float)) for v in flat):
            return _as_tuple(default_value)
    raise TypeError(f"default_value must be compatible with dtype. default_value: {default_value}, "
                    f"dtype: {dtype.name}, key: {key}")


def _flatten(value):
    for v in value:
        yield from (_flatten(v) if isinstance(v, (list, tuple)) else (v,))


class NumericColumn(DenseColumn, collections.namedtuple(
        "NumericColumn", ("key", "shape", "default_value", "dtype", "normalizer_fn"))):
    """Real-valued features (`numeric_column`)."""

    @property
    def name(self):
        return self.key

    @property
    def _parse_example_spec(self):
        return {self.key: _kf().FixedLenFeature(self.shape, self.dtype, self.default_value)}

    @property
    def _variable_shape(self):
        return TensorShape(self.shape)

    def _transform_feature(self, inputs):
        kf = _kf()
        tensor = inputs.get(self.key)
        if isinstance(tensor, SparseTensor):
            raise ValueError(f"The corresponding Tensor of numerical column must be a Tensor. "
                             f"SparseTensor is not supported. key: {self.key}")
        dtype = tensor.dtype.base_dtype
        if not (dtype.is_integer or dtype.is_floating):
            raise TypeError(f"numeric_column {self.key} needs a numeric feature, got {dtype.name}")
        if self.normalizer_fn is not None:
            tensor = self.normalizer_fn(tensor)
        return kf.cast(tensor, _dtypes.float32)

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        return inputs.get(self)


def numeric_column(key, shape=(1,), default_value=None, dtype=_dtypes.float32, normalizer_fn=None):
    """A column of real-valued features of `shape` per example (cast to float32).

    Args:
        key: the feature key.
        shape: an int or a tuple of ints > 0: the shape of one example's value.
        default_value: a number or a nested list of `shape`, used by `make_parse_example_spec`
            when the feature is missing from an Example.
        dtype: the feature's dtype (integer or float).
        normalizer_fn: applied to the feature tensor before the cast.

    Raises:
        TypeError: bad shape dimensions, a default_value that does not fit dtype, or a
            normalizer_fn that is not callable.
        ValueError: a dimension < 1, a dtype that is not numeric, or a default of another shape.
    """
    assert_key_is_string(key)
    shape = _check_shape(shape, key)
    dtype = _dtypes.as_dtype(dtype)
    if not (dtype.is_integer or dtype.is_floating):
        raise ValueError(f"dtype must be convertible to float. dtype: {dtype.name}, key: {key}")
    default_value = _check_default_value(shape, default_value, dtype, key)
    if normalizer_fn is not None and not callable(normalizer_fn):
        raise TypeError(f"normalizer_fn must be a callable. Given: {normalizer_fn}")
    return NumericColumn(key, shape, default_value, dtype, normalizer_fn)


# ---------------------------------------------------------------------------- bucketized
class BucketizedColumn(DenseColumn, CategoricalColumn, collections.namedtuple(
        "BucketizedColumn", ("source_column", "boundaries"))):
    """A numeric column discretized by `boundaries` (`bucketized_column`)."""

    @property
    def name(self):
        return f"{self.source_column.name}_bucketized"

    @property
    def _parse_example_spec(self):
        return self.source_column._parse_example_spec

    @property
    def _width(self):
        return len(self.boundaries) + 1

    @property
    def _variable_shape(self):
        return TensorShape(tuple(self.source_column.shape) + (self._width,))

    @property
    def _num_buckets(self):
        return self._width * self.source_column.shape[0]

    def _transform_feature(self, inputs):
        kf = _kf()
        values = inputs.get(self.source_column)
        boundaries = kf.constant(self.boundaries, _dtypes.float32, name="boundaries")
        # Bucketize: the count of boundaries <= x.
        above = kf.greater_equal(kf.expand_dims(values, -1), boundaries)
        return kf.reduce_sum(kf.cast(above, _dtypes.int64), -1, name="bucketize")

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        return _kf().one_hot(inputs.get(self), depth=self._width, on_value=1.0, off_value=0.0)

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        kf = _kf()
        buckets = inputs.get(self)
        batch = kf.shape(buckets, out_type=_dtypes.int64)[0]
        width = self.source_column.shape[0]
        rows = kf.reshape(kf.tile(kf.expand_dims(kf.range(batch), 1), [1, width]), [-1])
        cols = kf.tile(kf.range(width, dtype=_dtypes.int64), kf.expand_dims(batch, 0))
        ids = kf.reshape(buckets, [-1]) + self._width * cols
        dense_shape = kf.stack([batch, kf.constant(width, _dtypes.int64)])
        return IdWeightPair(SparseTensor(kf.stack([rows, cols], axis=1), ids, dense_shape), None)


def bucketized_column(source_column, boundaries):
    """Buckets of a numeric column: x falls in bucket i when boundaries[i-1] <= x < boundaries[i].

    Args:
        source_column: a one-dimensional `numeric_column`.
        boundaries: a sorted list of floats (len(boundaries) + 1 buckets per element).

    Raises:
        ValueError: a source that is not a 1-D numeric column, or boundaries empty or unsorted.
    """
    if not isinstance(source_column, NumericColumn):
        raise ValueError(f"source_column must be a column generated with numeric_column(). "
                         f"Given: {source_column}")
    if len(source_column.shape) > 1:
        raise ValueError(f"source_column must be one-dimensional column. Given: {source_column}")
    if not boundaries:
        raise ValueError("boundaries must not be empty.")
    if not isinstance(boundaries, (list, tuple)) or any(
            a >= b for a, b in zip(boundaries, boundaries[1:])):
        raise ValueError("boundaries must be a sorted list.")
    return BucketizedColumn(source_column, tuple(float(b) for b in boundaries))


# ---------------------------------------------------------------------------- indicator
class _WrapsCategorical(DenseColumn):
    """A dense column over ``self.categorical_column``, parsed as that column is."""

    __slots__ = ()

    @property
    def _parse_example_spec(self):
        return self.categorical_column._parse_example_spec


class IndicatorColumn(_WrapsCategorical, collections.namedtuple("IndicatorColumn",
                                                                ("categorical_column",))):
    """A multi-hot (or weighted) representation of a categorical column (`indicator_column`)."""

    @property
    def name(self):
        return f"{self.categorical_column.name}_indicator"

    @property
    def _variable_shape(self):
        return TensorShape([self.categorical_column._num_buckets])

    def _transform_feature(self, inputs):
        kf = _kf()
        ids, weights = self.categorical_column._get_sparse_tensors(inputs)
        dense_ids = kf.sparse_tensor_to_dense(ids, default_value=-1)
        one_hot = kf.one_hot(dense_ids, depth=self.categorical_column._num_buckets,
                             on_value=1.0, off_value=0.0)
        if weights is not None:
            dense_weights = kf.sparse_tensor_to_dense(weights, default_value=0.0)
            one_hot = one_hot * kf.expand_dims(kf.cast(dense_weights, _dtypes.float32), -1)
        return kf.reduce_sum(one_hot, axis=[-2])

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        return inputs.get(self)


def indicator_column(categorical_column):
    """Represents a categorical column as a multi-hot vector [num_buckets]: each id counts once per
    occurrence (its weight, for a weighted column)."""
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError(f"categorical_column must be a categorical column. Given: {categorical_column}")
    return IndicatorColumn(categorical_column)


# ---------------------------------------------------------------------------- embeddings
class _Embedding(_WrapsCategorical):
    """Embeds ``categorical_column``'s ids in ``dimension`` dimensions; subclasses say where the
    weights come from (``_embedding_weights``)."""

    __slots__ = ()

    @property
    def _variable_shape(self):
        return TensorShape([self.dimension])

    def _transform_feature(self, inputs):
        return inputs.get(self.categorical_column)

    def _new_weights(self, shape, weight_collections, trainable):
        return _kf().get_variable("embedding_weights", shape=shape, dtype=_dtypes.float32,
                                  initializer=self.initializer,
                                  trainable=self.trainable and trainable is not False,
                                  collections=weight_collections)

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        kf = _kf()
        ids, id_weights = self.categorical_column._get_sparse_tensors(
            inputs, weight_collections=weight_collections, trainable=trainable)
        weights = self._embedding_weights((self.categorical_column._num_buckets, self.dimension),
                                          weight_collections, trainable)
        if self.ckpt_to_load_from is not None:
            kf.train.init_from_checkpoint(self.ckpt_to_load_from, {self.tensor_name_in_ckpt: weights})
        return kf.nn.safe_embedding_lookup_sparse(weights, ids, id_weights, combiner=self.combiner,
                                                  name=f"{self.name}_weights", max_norm=self.max_norm)


class EmbeddingColumn(_Embedding, collections.namedtuple(
        "EmbeddingColumn", ("categorical_column", "dimension", "combiner", "initializer",
                            "ckpt_to_load_from", "tensor_name_in_ckpt", "max_norm", "trainable"))):
    """A learned dense embedding of a categorical column (`embedding_column`)."""

    @property
    def name(self):
        return f"{self.categorical_column.name}_embedding"

    _embedding_weights = _Embedding._new_weights


def _check_embedding_args(categorical_column, dimension, combiner, initializer, ckpt_to_load_from,
                          tensor_name_in_ckpt):
    if not isinstance(categorical_column, CategoricalColumn):
        raise ValueError(f"categorical_column must be a categorical column. Given: {categorical_column}")
    if dimension is None or dimension < 1:
        raise ValueError(f"Invalid dimension {dimension}.")
    if combiner not in _COMBINERS:
        raise ValueError(f"combiner must be one of 'mean', 'sqrtn' or 'sum', got {combiner!r}")
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError("Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt` or none "
                         "of them.")
    if initializer is not None and not callable(initializer):
        raise ValueError(f"initializer must be callable if specified. Embedding of column_name: "
                         f"{categorical_column.name}")
    return initializer or _kf().truncated_normal_initializer(mean=0.0, stddev=1 / math.sqrt(dimension))


def embedding_column(categorical_column, dimension, combiner="mean", initializer=None,
                     ckpt_to_load_from=None, tensor_name_in_ckpt=None, max_norm=None, trainable=True):
    """A dense column that embeds the ids of `categorical_column` in `dimension` dimensions.

    Each example's embeddings are combined with `combiner` by
    ``kf.nn.safe_embedding_lookup_sparse`` (ids < 0 dropped; an example without ids gets zeros).

    Args:
        categorical_column: the ids (and optional weights) to embed.
        dimension: the embedding size.
        combiner: "mean", "sqrtn" or "sum".
        initializer: the variable initializer (default: truncated normal, mean 0, stddev
            1/sqrt(dimension)).
        ckpt_to_load_from, tensor_name_in_ckpt: initialize the weights from this checkpoint
            tensor (`kf.train.init_from_checkpoint`); both or neither.
        max_norm: clip each embedding to this L2 norm before combining.
        trainable: whether the weights are trainable.

    Raises:
        ValueError: a bad dimension or combiner, only one of the checkpoint arguments, or an
            initializer that is not callable.
    """
    initializer = _check_embedding_args(categorical_column, dimension, combiner, initializer,
                                        ckpt_to_load_from, tensor_name_in_ckpt)
    return EmbeddingColumn(categorical_column, int(dimension), combiner, initializer,
                           ckpt_to_load_from, tensor_name_in_ckpt, max_norm, trainable)


class SharedEmbeddingColumn(_Embedding, collections.namedtuple(
        "SharedEmbeddingColumn", ("categorical_column", "dimension", "combiner", "initializer",
                                  "shared_embedding_collection_name", "ckpt_to_load_from",
                                  "tensor_name_in_ckpt", "max_norm", "trainable"))):
    """An embedding column whose weights other columns share (`shared_embedding_columns`)."""

    @property
    def name(self):
        return f"{self.categorical_column.name}_shared_embedding"

    @property
    def _var_scope_name(self):
        return self.shared_embedding_collection_name

    def _embedding_weights(self, shape, weight_collections, trainable):
        kf = _kf()
        collection = kf.get_collection(self.shared_embedding_collection_name)
        if not collection:
            weights = self._new_weights(shape, weight_collections, trainable)
            kf.add_to_collection(self.shared_embedding_collection_name, weights)
            return weights
        if len(collection) > 1:
            raise ValueError(f"Collection {self.shared_embedding_collection_name} can only contain "
                             f"one variable. Choose a unique name for this collection, or add no "
                             f"variables to it: the feature_column library adds one.")
        weights = collection[0]
        if tuple(weights.get_shape().as_list()) != tuple(shape):
            raise ValueError(f"Shared embedding collection {self.shared_embedding_collection_name} "
                             f"contains variable {weights.name} of unexpected shape "
                             f"{weights.get_shape()}. Expected shape is {list(shape)}.")
        return weights


def _base_type(column):
    from kernflow.core.feature_column.categorical import WeightedCategoricalColumn
    return type(column.categorical_column if isinstance(column, WeightedCategoricalColumn) else column)


def shared_embedding_columns(categorical_columns, dimension, combiner="mean", initializer=None,
                             shared_embedding_collection_name=None, ckpt_to_load_from=None,
                             tensor_name_in_ckpt=None, max_norm=None, trainable=True):
    """Embedding columns, one per categorical column, that share one embedding variable.

    The variable is created by the first column `input_layer` visits, in the scope named
    `shared_embedding_collection_name` (default: the sorted column names joined by "_", plus
    "_shared_embedding"), and put in the graph collection of that name; the others reuse it.

    Args:
        categorical_columns: categorical columns of one type (weighted columns count as their
            base type) with the same number of buckets.
        dimension, combiner, initializer, ckpt_to_load_from, tensor_name_in_ckpt, max_norm,
            trainable: as `embedding_column`.
        shared_embedding_collection_name: the collection (and scope) of the shared variable.

    Returns:
        A list of SharedEmbeddingColumn, in the order of `categorical_columns`.

    Raises:
        ValueError: as `embedding_column`, or columns of different types or bucket counts.
    """
    categorical_columns = list(categorical_columns)
    if not categorical_columns:
        raise ValueError("categorical_columns must not be empty.")
    for column in categorical_columns:
        initializer = _check_embedding_args(column, dimension, combiner, initializer,
                                            ckpt_to_load_from, tensor_name_in_ckpt)
    first = categorical_columns[0]
    for column in categorical_columns[1:]:
        if _base_type(column) is not _base_type(first):
            raise ValueError(f"To use shared_embedding_column, all categorical_columns must have the "
                             f"same type, or be weighted_categorical_column of the same type. Given "
                             f"column: {column} of type: {_base_type(column).__name__} does not "
                             f"match given type: {_base_type(first).__name__}.")
        if column._num_buckets != first._num_buckets:
            raise ValueError(f"To use shared_embedding_column, all categorical_columns must have the "
                             f"same number of buckets. Given column: {first} with buckets: "
                             f"{first._num_buckets} does not match column: {column} with buckets: "
                             f"{column._num_buckets}")
    if not shared_embedding_collection_name:
        names = sorted(c.name for c in categorical_columns)
        shared_embedding_collection_name = "_".join(names) + "_shared_embedding"
    return [SharedEmbeddingColumn(c, int(dimension), combiner, initializer,
                                  shared_embedding_collection_name, ckpt_to_load_from,
                                  tensor_name_in_ckpt, max_norm, trainable)
            for c in categorical_columns]

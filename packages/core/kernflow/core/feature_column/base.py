"""The feature-column protocol of `kf.feature_column` and the builder that transforms features.

Invariants:
  * Every column is an immutable, hashable namedtuple (a dict key in ``cols_to_vars``) with a
    unique ``name``; ``input_layer`` and ``linear_model`` visit columns sorted by that name.
  * A `DenseColumn` gives ``_get_dense_tensor(builder)`` shaped [batch] + ``_variable_shape``; a
    `CategoricalColumn` gives ``_get_sparse_tensors(builder)``, an `IdWeightPair` of a 2-D int64
    SparseTensor of ids in [0, ``_num_buckets``) (negative ids are dropped by the lookups) and
    None or a float SparseTensor of weights with the same indices.
  * `FeatureBuilder` (TF1's ``_LazyBuilder``) transforms each column at most once per call: a
    string key is a raw feature (rank 1 expanded to [batch, 1], rank 0 rejected); a column key is
    that column's ``_transform_feature`` output, cached.
"""

import collections

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.sparse_tensor import SparseTensor


def _kf():
    import kernflow.core as kf  # the package imports its namespaces before this module runs ops
    return kf


IdWeightPair = collections.namedtuple("IdWeightPair", ("id_tensor", "weight_tensor"))


class FeatureColumn:
    """Base of all feature columns (TF1 ``_FeatureColumn``)."""

    __slots__ = ()

    @property
    def name(self):
        raise NotImplementedError

    @property
    def _var_scope_name(self):
        """The variable scope the column's variables go in (its name)."""
        return self.name

    @property
    def _parse_example_spec(self):
        """A dict of feature key -> FixedLenFeature/VarLenFeature this column reads."""
        raise NotImplementedError

    def _transform_feature(self, inputs):
        """The column's intermediate tensor, built from `inputs` (a `FeatureBuilder`)."""
        raise NotImplementedError


class DenseColumn(FeatureColumn):
    """A column that `input_layer` can use: a dense tensor [batch] + ``_variable_shape``."""

    __slots__ = ()

    @property
    def _variable_shape(self):
        raise NotImplementedError

    def _get_dense_tensor(self, inputs, weight_collections=None, trainable=None):
        raise NotImplementedError


class CategoricalColumn(FeatureColumn):
    """A column of ids in [0, ``_num_buckets``), as an `IdWeightPair` of SparseTensors."""

    __slots__ = ()

    @property
    def _num_buckets(self):
        raise NotImplementedError

    def _get_sparse_tensors(self, inputs, weight_collections=None, trainable=None):
        return IdWeightPair(inputs.get(self), None)


class FeatureBuilder:
    """Transforms features for columns, caching each transformation (TF1 ``_LazyBuilder``).

    Args:
        features: a dict of string (or column) keys to Tensors, SparseTensors or values
            convertible to them.
    """

    def __init__(self, features):
        if not isinstance(features, dict):
            raise ValueError(f"features must be a dict of feature key to Tensor or SparseTensor, "
                             f"got {type(features).__name__}")
        self._features = dict(features)
        self._cache = {}

    def get(self, key):
        """The raw feature for a string key, or the transformed feature for a column.

        Raises:
            ValueError: a key missing from the features, or a rank-0 feature.
            TypeError: a key that is neither a string nor a FeatureColumn.
        """
        if key in self._cache:
            return self._cache[key]
        if key in self._features:
            value = self._raw_feature(key)
        elif isinstance(key, str):
            raise ValueError(f"Feature {key} is not in features dictionary.")
        elif not isinstance(key, FeatureColumn):
            raise TypeError(f'"key" must be either a "str" or "_FeatureColumn". Provided: {key}')
        else:
            value = key._transform_feature(self)
            if value is None:
                raise ValueError(f"Column {key.name} is not supported.")
        self._cache[key] = value
        return value

    def _raw_feature(self, key):
        kf = _kf()
        tensor = kf.convert_to_tensor_or_sparse_tensor(self._features[key])
        if isinstance(tensor, SparseTensor):
            rank = tensor.dense_shape.shape.dims[0].value if tensor.dense_shape.shape.dims else None
        else:
            rank = tensor.shape.ndims
        if rank == 0:
            raise ValueError(f"Feature (key: {key}) cannot have rank 0. Given: {tensor}")
        if rank != 1:
            return tensor
        if isinstance(tensor, SparseTensor):
            return kf.sparse_reshape(tensor, kf.stack([tensor.dense_shape[0], 1]))
        return kf.expand_dims(tensor, -1)


# ---------------------------------------------------------------------------- shared helpers
def assert_key_is_string(key):
    if not isinstance(key, str):
        raise ValueError(f"key must be a string. Got: type {type(key)}. Given key: {key}.")


def assert_string_or_int(dtype, prefix):
    if dtype != _dtypes.string and not dtype.is_integer:
        raise ValueError(f"{prefix} dtype must be string or integer. dtype: {dtype}.")


def check_input_dtype(column_dtype, tensor, key):
    """Raises ValueError unless `tensor` and the column are both integer or both string."""
    dtype = tensor.dtype.base_dtype
    assert_string_or_int(dtype, prefix=f"column_name: {key} input_tensor")
    if column_dtype.is_integer != dtype.is_integer:
        raise ValueError(f"Column dtype and SparseTensors dtype must be compatible. key: {key}, "
                         f"column dtype: {column_dtype.name}, tensor dtype: {dtype.name}")


def to_sparse_dropping(tensor, ignore_value=None):
    """A SparseTensor of `tensor`'s entries other than `ignore_value` (SparseTensors pass through).

    The default ignore value is '' for strings, -1 for integers and 0 otherwise, as TF1's
    ``_to_sparse_input_and_drop_ignore_values``.
    """
    kf = _kf()
    tensor = kf.convert_to_tensor_or_sparse_tensor(tensor)
    if isinstance(tensor, SparseTensor):
        return tensor
    with _ops.name_scope(None, "to_sparse_input", [tensor]):
        dtype = tensor.dtype.base_dtype
        if ignore_value is None:
            ignore_value = "" if dtype == _dtypes.string else (-1 if dtype.is_integer else 0)
        ignore = kf.constant(ignore_value, dtype=dtype, name="ignore_value")
        indices = kf.where(kf.not_equal(tensor, ignore), name="indices")
        return SparseTensor(indices, kf.gather_nd(tensor, indices, name="values"),
                            kf.shape(tensor, out_type=_dtypes.int64, name="dense_shape"))


def sparse_with_values(sp, values):
    """`sp` with its values replaced by `values` (same indices and dense shape)."""
    return SparseTensor(sp.indices, values, sp.dense_shape)

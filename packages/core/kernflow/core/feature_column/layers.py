"""`input_layer`, `linear_model` and `make_parse_example_spec`: feature columns to tensors.

Invariants:
  * Columns are visited sorted by name; each builds in ``variable_scope(None,
    default_name=column._var_scope_name)`` inside ``input_layer`` / ``linear_model`` (uniquified:
    a second call builds under ``input_layer_1``), so the variables are TF1's
    ``input_layer/<column>/embedding_weights``, ``linear_model/<column>/weights`` and
    ``linear_model/bias_weights``.
  * Variables are made with ``kf.get_variable`` and put in GLOBAL_VARIABLES, MODEL_VARIABLES and
    `weight_collections` (TRAINABLE_VARIABLES too when trainable), so savers, partitioners and
    enclosing variable scopes treat them as any other variable.
  * ``cols_to_vars[column]`` lists the global variables made in the column's scope (the parts
    of a partitioned variable), [] when it made none.
"""

from kernflow.core.feature_column.base import (CategoricalColumn, DenseColumn, FeatureBuilder,
                                               FeatureColumn, _kf)
from kernflow.core.framework import dtypes as _dtypes

_SPARSE_COMBINERS = ("mean", "sqrtn", "sum")


def _normalize_columns(feature_columns):
    if isinstance(feature_columns, FeatureColumn):
        feature_columns = [feature_columns]
    if isinstance(feature_columns, dict):
        raise ValueError("Expected feature_columns to be iterable, found dict.")
    feature_columns = list(feature_columns)
    if not feature_columns:
        raise ValueError("feature_columns must not be empty.")
    by_name = {}
    for column in feature_columns:
        if not isinstance(column, FeatureColumn):
            raise ValueError(f"Items of feature_columns must be a _FeatureColumn. Given (type "
                             f"{type(column)}): {column}.")
        if column.name in by_name:
            raise ValueError(f"Duplicate feature column name found for columns: {by_name[column.name]} "
                             f"and {column}. This usually means that these columns refer to same "
                             f"base feature. Either one must be discarded or a duplicated but "
                             f"renamed item must be inserted in features dict.")
        by_name[column.name] = column
    return sorted(feature_columns, key=lambda c: c.name)


def _collections(weight_collections):
    kf = _kf()
    collections = list(weight_collections or [])
    for key in (kf.GraphKeys.GLOBAL_VARIABLES, kf.GraphKeys.MODEL_VARIABLES):
        if key not in collections:
            collections.append(key)
    return collections


def _scope_variables():
    kf = _kf()
    prefix = kf.get_variable_scope().name + "/"
    return [v for v in kf.get_collection(kf.GraphKeys.GLOBAL_VARIABLES) if v.op.name.startswith(prefix)]


def _static_batch_check(tensors, columns):
    expected = None
    for tensor, column in zip(tensors, columns):
        batch = tensor.shape.dims[0].value if tensor.shape.dims else None
        if batch is None:
            continue
        if expected is None:
            expected = (batch, column)
        elif batch != expected[0]:
            raise ValueError(f"Batch size (first dimension) of each feature must be same. Batch size "
                             f"of columns ({expected[1].name}, {column.name}): ({expected[0]}, {batch})")


def _per_column(builder, columns, cols_to_vars, build):
    """``build(column)`` for each column in its own variable scope; the outputs, checked to share
    one static batch size. Fills ``cols_to_vars``."""
    kf = _kf()
    outputs = []
    for column in columns:
        with kf.variable_scope(None, default_name=column._var_scope_name):
            outputs.append(build(column))
            if cols_to_vars is not None:
                cols_to_vars[column] = _scope_variables()
    _static_batch_check(outputs, columns)
    return outputs


def _flatten(tensor, column):
    """`tensor` [batch, ...] reshaped to [batch, num_elements of the column]."""
    kf = _kf()
    batch = kf.shape(tensor)[0]
    return kf.reshape(tensor, kf.stack([batch, column._variable_shape.num_elements()]))


def input_layer(features, feature_columns, weight_collections=None, trainable=True,
                cols_to_vars=None, cols_to_output_tensors=None):
    """The dense input layer of a model: every column's dense tensor, concatenated.

    Args:
        features: a dict of feature key to Tensor or SparseTensor (what an input_fn returns or
            `kf.parse_example` gives with `make_parse_example_spec`).
        feature_columns: DenseColumns (numeric, bucketized, indicator, embedding columns).
        weight_collections: collections the variables are added to, besides GLOBAL_VARIABLES and
            MODEL_VARIABLES.
        trainable: whether the variables are trainable.
        cols_to_vars: a dict filled with column -> list of its variables.
        cols_to_output_tensors: a dict filled with column -> its [batch, num_elements] tensor.

    Returns:
        A float32 Tensor [batch, sum of the columns' num_elements], columns ordered by name.

    Raises:
        ValueError: no columns, a column that is not dense, duplicate names, a missing feature, or
            columns of different static batch sizes.
    """
    kf = _kf()
    columns = _normalize_columns(feature_columns)
    for column in columns:
        if not isinstance(column, DenseColumn):
            raise ValueError(f"Items of feature_columns must be a _DenseColumn. You can wrap a "
                             f"categorical column with an embedding_column or indicator_column. "
                             f"Given: {column}")
    collections = _collections(weight_collections)
    builder = FeatureBuilder(features)

    def build(column):
        output = _flatten(column._get_dense_tensor(builder, weight_collections=collections,
                                                   trainable=trainable), column)
        if cols_to_output_tensors is not None:
            cols_to_output_tensors[column] = output
        return output
    with kf.variable_scope(None, default_name="input_layer", values=list(features.values())):
        return kf.concat(_per_column(builder, columns, cols_to_vars, build), 1)


def _weighted_sum(column, builder, units, sparse_combiner, collections, trainable):
    kf = _kf()
    zeros = kf.zeros_initializer()
    if isinstance(column, CategoricalColumn):
        ids, weights = column._get_sparse_tensors(builder, weight_collections=collections,
                                                  trainable=trainable)
        var = kf.get_variable("weights", shape=(column._num_buckets, units), dtype=_dtypes.float32,
                              initializer=zeros, trainable=trainable, collections=collections)
        return kf.nn.safe_embedding_lookup_sparse(var, ids, sparse_weights=weights,
                                                  combiner=sparse_combiner, name="weighted_sum")
    tensor = _flatten(column._get_dense_tensor(builder, weight_collections=collections,
                                               trainable=trainable), column)
    var = kf.get_variable("weights", shape=(column._variable_shape.num_elements(), units),
                          dtype=_dtypes.float32, initializer=zeros, trainable=trainable,
                          collections=collections)
    return kf.matmul(tensor, var, name="weighted_sum")


def linear_model(features, feature_columns, units=1, sparse_combiner="sum", weight_collections=None,
                 trainable=True, cols_to_vars=None):
    """A linear prediction over `feature_columns`: sum of per-column weighted sums plus a bias.

    Categorical columns act as indicator columns: each id (times its weight) picks a row of the
    column's weights [num_buckets, units], and a row's picks are combined by `sparse_combiner`.
    Dense columns are multiplied by weights [num_elements, units]. All weights and the bias
    start at zero.

    Args:
        features: a dict of feature key to Tensor or SparseTensor.
        feature_columns: DenseColumns and CategoricalColumns.
        units: the number of outputs.
        sparse_combiner: "sum", "mean" or "sqrtn": how a multivalent categorical column's
            weights are combined.
        weight_collections: collections the variables are added to, besides GLOBAL_VARIABLES and
            MODEL_VARIABLES.
        trainable: whether the variables are trainable.
        cols_to_vars: a dict filled with column -> list of its variables, and "bias" -> [bias].

    Returns:
        A float32 Tensor [batch, units].

    Raises:
        ValueError: no columns, a column neither dense nor categorical, duplicate names, a bad
            sparse_combiner, or a missing feature.
    """
    kf = _kf()
    columns = _normalize_columns(feature_columns)
    if sparse_combiner not in _SPARSE_COMBINERS:
        raise ValueError(f"sparse_combiner must be one of 'mean', 'sqrtn' or 'sum', got "
                         f"{sparse_combiner!r}")
    for column in columns:
        if not isinstance(column, (DenseColumn, CategoricalColumn)):
            raise ValueError(f"Items of feature_columns must be either a _DenseColumn or "
                             f"_CategoricalColumn. Given: {column}")
    collections = _collections(weight_collections)
    builder = FeatureBuilder(features)
    with kf.variable_scope(None, default_name="linear_model", values=list(features.values())):
        sums = _per_column(builder, columns, cols_to_vars, lambda column: _weighted_sum(
            column, builder, units, sparse_combiner, collections, trainable))
        no_bias = kf.add_n(sums, name="weighted_sum_no_bias")
        bias = kf.get_variable("bias_weights", shape=[units], dtype=_dtypes.float32,
                               initializer=kf.zeros_initializer(), trainable=trainable,
                               collections=collections)
        if cols_to_vars is not None:
            cols_to_vars["bias"] = [bias]
        return kf.nn.bias_add(no_bias, bias, name="weighted_sum")


def make_parse_example_spec(feature_columns):
    """The `kf.parse_example` features spec of `feature_columns` (key -> FixedLen/VarLenFeature).

    Raises:
        ValueError: an item that is not a feature column, or two columns asking different specs
            of one key.
    """
    result = {}
    for column in feature_columns:
        if not isinstance(column, FeatureColumn):
            raise ValueError(f"All feature_columns must be _FeatureColumn instances. Given: {column}")
        for key, spec in column._parse_example_spec.items():
            if key in result and spec != result[key]:
                raise ValueError(f"feature_columns contain different parse_spec for key {key}. "
                                 f"Given {spec} and {result[key]}")
            result[key] = spec
    return result

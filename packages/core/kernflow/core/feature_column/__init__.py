"""`kf.feature_column`: TF1's ``tf.compat.v1.feature_column``.

Columns describe how raw features (a dict of Tensors and SparseTensors, as an input_fn or
`kf.parse_example` gives them) become model inputs: `input_layer` concatenates dense columns,
`linear_model` builds a linear prediction over dense and categorical ones, and
`make_parse_example_spec` gives the parse spec the columns read. base.py states the column
protocol; categorical.py, dense.py and layers.py hold the columns and the two builders.
"""

from kernflow.core.feature_column.base import (CategoricalColumn, DenseColumn, FeatureColumn,
                                               IdWeightPair)
from kernflow.core.feature_column.categorical import (categorical_column_with_hash_bucket,
                                                      categorical_column_with_identity,
                                                      categorical_column_with_vocabulary_file,
                                                      categorical_column_with_vocabulary_list,
                                                      crossed_column, weighted_categorical_column)
from kernflow.core.feature_column.dense import (bucketized_column, embedding_column,
                                                indicator_column, numeric_column,
                                                shared_embedding_columns)
from kernflow.core.feature_column.layers import input_layer, linear_model, make_parse_example_spec

__all__ = ["bucketized_column", "categorical_column_with_hash_bucket",
           "categorical_column_with_identity", "categorical_column_with_vocabulary_file",
           "categorical_column_with_vocabulary_list", "crossed_column", "embedding_column",
           "indicator_column", "input_layer", "linear_model", "make_parse_example_spec",
           "numeric_column", "shared_embedding_columns", "weighted_categorical_column",
           "FeatureColumn", "DenseColumn", "CategoricalColumn", "IdWeightPair"]

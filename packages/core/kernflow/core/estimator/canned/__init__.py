"""TF1's canned estimators: Linear, DNN and DNNLinearCombined classifiers and regressors, built
from `kf.feature_column` columns, one shared model_fn (model.py) and the heads (head.py)."""

from kernflow.core.estimator.canned.dnn import DNNClassifier, DNNRegressor
from kernflow.core.estimator.canned.dnn_linear_combined import (DNNLinearCombinedClassifier,
                                                                DNNLinearCombinedRegressor)
from kernflow.core.estimator.canned.linear import LinearClassifier, LinearRegressor

__all__ = ["DNNClassifier", "DNNRegressor", "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor",
           "LinearClassifier", "LinearRegressor"]

"""`kf.estimator`: TF1's high-level training API (Estimator, EstimatorSpec, ModeKeys, RunConfig,
numpy/pandas input functions, train_and_evaluate with TrainSpec/EvalSpec, SavedModel export through
`kf.estimator.export` and exporters, and the canned Linear/DNN/DNNLinearCombined classifiers and
regressors)."""

from kernflow.core.estimator import export, inputs
from kernflow.core.estimator.canned import (DNNClassifier, DNNLinearCombinedClassifier,
                                             DNNLinearCombinedRegressor, DNNRegressor, LinearClassifier,
                                             LinearRegressor)
from kernflow.core.estimator.estimator import Estimator, WarmStartSettings
from kernflow.core.estimator.exporter import Exporter, FinalExporter, LatestExporter
from kernflow.core.estimator.model_fn import EstimatorSpec, ModeKeys
from kernflow.core.estimator.run_config import RunConfig
from kernflow.core.train.basic_session_run_hooks import (CheckpointSaverHook, CheckpointSaverListener,
                                                         FeedFnHook, FinalOpsHook, GlobalStepWaiterHook,
                                                         LoggingTensorHook, NanLossDuringTrainingError,
                                                         NanTensorHook, SecondOrStepTimer,
                                                         StepCounterHook, StopAtStepHook)
from kernflow.core.train.session_run_hook import (SessionRunArgs, SessionRunContext, SessionRunHook,
                                                  SessionRunValues)
from kernflow.core.estimator.training import EvalSpec, TrainSpec, train_and_evaluate
from kernflow.core.train.warm_starting import VocabInfo

__all__ = ["export", "inputs", "Estimator", "Exporter", "FinalExporter", "LatestExporter", "EvalSpec",
           "TrainSpec", "train_and_evaluate", "DNNClassifier", "DNNRegressor",
           "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "LinearClassifier", "LinearRegressor",
           "WarmStartSettings", "EstimatorSpec", "ModeKeys", "RunConfig",
           "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook",
           "GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook",
           "SecondOrStepTimer", "StepCounterHook", "StopAtStepHook", "SessionRunArgs",
           "SessionRunContext", "SessionRunHook", "SessionRunValues", "VocabInfo"]

"""`kf.estimator`: TF1's high-level training API (Estimator, EstimatorSpec, ModeKeys, RunConfig,
numpy/pandas input functions, SavedModel export through `kf.estimator.export`)."""

from kernflow.core.estimator import export, inputs
from kernflow.core.estimator.estimator import Estimator, WarmStartSettings
from kernflow.core.estimator.model_fn import EstimatorSpec, ModeKeys
from kernflow.core.estimator.run_config import RunConfig
from kernflow.core.train.basic_session_run_hooks import (CheckpointSaverHook, CheckpointSaverListener,
                                                         FeedFnHook, FinalOpsHook, GlobalStepWaiterHook,
                                                         LoggingTensorHook, NanLossDuringTrainingError,
                                                         NanTensorHook, SecondOrStepTimer,
                                                         StepCounterHook, StopAtStepHook)
from kernflow.core.train.session_run_hook import (SessionRunArgs, SessionRunContext, SessionRunHook,
                                                  SessionRunValues)
from kernflow.core.train.warm_starting import VocabInfo

__all__ = ["export", "inputs", "Estimator",  "WarmStartSettings", "EstimatorSpec", "ModeKeys", "RunConfig",
           "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook",
           "GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook",
           "SecondOrStepTimer", "StepCounterHook", "StopAtStepHook", "SessionRunArgs",
           "SessionRunContext", "SessionRunHook", "SessionRunValues", "VocabInfo"]

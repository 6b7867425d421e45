"""`kf.train`: optimizers, schedules, the global step, checkpoints, queue runners, input
batching, monitored sessions and hooks, the Supervisor, SyncReplicasOptimizer and the loss-scaling
optimizer of `kf.train.experimental` (TF1's tf.train)."""

from kernflow.core.train.learning_rate import *  # noqa: F403
from kernflow.core.train.optimizer import Optimizer
from kernflow.core.train.server_lib import ClusterDef, ClusterSpec, JobDef, Server, ServerDef
from kernflow.core.train.coordinator import Coordinator, LooperThread
from kernflow.core.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from kernflow.core.train.input import batch, batch_join, shuffle_batch, shuffle_batch_join
from kernflow.core.ops.input_producers import (input_producer, limit_epochs, match_filenames_once,
                                               maybe_batch, maybe_batch_join, maybe_shuffle_batch,
                                               maybe_shuffle_batch_join, range_input_producer,
                                               slice_input_producer, string_input_producer)
from kernflow.core.protobuf.example_pb2 import Example, SequenceExample
from kernflow.core.train.optimizers_more import (AdadeltaOptimizer, AdagradDAOptimizer, FtrlOptimizer,
                                                 ProximalAdagradOptimizer, ProximalGradientDescentOptimizer)
from kernflow.core.train.moving_averages import ExponentialMovingAverage
from kernflow.core.train.meta_graph import export_meta_graph, import_meta_graph
from kernflow.core.train.warm_starting import VocabInfo, init_from_checkpoint, warm_start
from kernflow.core.train.loops import assert_global_step, basic_train_loop, checkpoints_iterator
from kernflow.core.summary.writer import summary_iterator
from kernflow.core.protobuf.feature_pb2 import (BytesList, Feature, FeatureList, FeatureLists, Features,
                                                FloatList, Int64List)
from kernflow.core.train.device_setter import (GreedyLoadBalancingStrategy, byte_size_load_fn,
                                               replica_device_setter)
from kernflow.core.train.optimizers import (AdagradOptimizer, AdamOptimizer, GradientDescentOptimizer,
                                            MomentumOptimizer, RMSPropOptimizer)

try:  # checkpoints
    from kernflow.core.train.saver import *  # noqa: F403
except ModuleNotFoundError as _e:  # pragma: no cover - until the checkpoint module lands
    if _e.name != "kernflow.core.train.saver":
        raise

from kernflow.core.train.object_checkpoint import Checkpoint, CheckpointOptions
from kernflow.core.train.checkpoint_manager import CheckpointManager


from kernflow.core.train.training_util import write_graph
from kernflow.core.train.session_run_hook import (SessionRunArgs, SessionRunContext, SessionRunHook,
                                                  SessionRunValues)
from kernflow.core.train.basic_session_run_hooks import (CheckpointSaverHook, CheckpointSaverListener,
                                                         FeedFnHook, FinalOpsHook, GlobalStepWaiterHook,
                                                         LoggingTensorHook, NanLossDuringTrainingError,
                                                         NanTensorHook, SecondOrStepTimer,
                                                         StepCounterHook, StopAtStepHook,
                                                         SummarySaverHook, ProfilerHook)
from kernflow.core.train.scaffold import Scaffold
from kernflow.core.train.session_manager import SessionManager
from kernflow.core.train.monitored_session import (ChiefSessionCreator, MonitoredSession,
                                                   MonitoredTrainingSession, SessionCreator,
                                                   SingularMonitoredSession, WorkerSessionCreator)
from kernflow.core.train.supervisor import Supervisor
from kernflow.core.train.sync_replicas_optimizer import SyncReplicasOptimizer
from kernflow.core.train import experimental  # loss scaling (mixed precision)


def get_optimizer(name: str):
    """Returns the optimizer class registered as `name` (built-ins and plugins alike).

    Raises:
        NotFoundError: listing the registered names.
    """
    from kernflow.core.plugins import registries
    return registries().optimizers.get(name)

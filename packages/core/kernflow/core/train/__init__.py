"""`kf.train`: optimizers, schedules, the global step, checkpoints, queue runners and input
batching (TF1's tf.train)."""

from kernflow.core.train.learning_rate import *  # noqa: F403
from kernflow.core.train.optimizer import Optimizer
from kernflow.core.train.server_lib import ClusterSpec, Server
from kernflow.core.train.coordinator import Coordinator, LooperThread
from kernflow.core.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from kernflow.core.train.input import batch, batch_join, shuffle_batch, shuffle_batch_join
from kernflow.core.train.device_setter import replica_device_setter
from kernflow.core.train.optimizers import (AdagradOptimizer, AdamOptimizer, GradientDescentOptimizer,
                                            MomentumOptimizer, RMSPropOptimizer)

try:  # checkpoints
    from kernflow.core.train.saver import *  # noqa: F403
except ModuleNotFoundError as _e:  # pragma: no cover - until the checkpoint module lands
    if _e.name != "kernflow.core.train.saver":
        raise


def get_optimizer(name: str):
    """Returns the optimizer class registered as `name` (built-ins and plugins alike).

    Raises:
        NotFoundError: listing the registered names.
    """
    from kernflow.core.plugins import registries
    return registries().optimizers.get(name)

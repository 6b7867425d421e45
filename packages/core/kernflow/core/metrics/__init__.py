"""`kf.metrics`: the TF1 streaming metrics (``tf.compat.v1.metrics``).

Invariants: every metric returns ``(value, update_op)``. Its state lives in float variables,
created under ``variable_scope(name, <default name>)`` in GraphKeys.LOCAL_VARIABLES and
GraphKeys.METRIC_VARIABLES, zero-initialized, so `local_variables_initializer` resets it.
``update_op`` adds one batch to the state and yields the metric over all batches so far;
``value`` only reads the state. ``value`` goes to `metrics_collections`, ``update_op`` to
`updates_collections`.
"""

from kernflow.core.metrics.classification import *  # noqa: F401,F403
from kernflow.core.metrics.means import *  # noqa: F401,F403
from kernflow.core.metrics.top_k import *  # noqa: F401,F403
from kernflow.core.metrics.metric_utils import confusion_matrix, metric_variable  # noqa: F401

from kernflow.core.metrics import classification as _classification
from kernflow.core.metrics import means as _means
from kernflow.core.metrics import top_k as _top_k

__all__ = sorted(_classification.__all__ + _means.__all__ + _top_k.__all__)

"""`kf.nn`: neural-network ops (kernflow.core.ops.nn_ops)."""

try:
    from kernflow.core.ops.nn_ops import *  # noqa: F403
except ModuleNotFoundError as _e:  # until the family lands
    if _e.name != "kernflow.core.ops.nn_ops":
        raise

from kernflow.core.ops import rnn_cell  # noqa: E402,F401 - kf.nn.rnn_cell.*
from kernflow.core.ops.rnn import (bidirectional_dynamic_rnn, dynamic_rnn,  # noqa: E402,F401
                                   raw_rnn, static_bidirectional_rnn, static_rnn)
from kernflow.core.ops.nn_ops_extra import *  # noqa: E402,F401,F403 - depthwise/3-D/atrous convs, lrn, ...
from kernflow.core.ops.nn_ops_ctc import *  # noqa: E402,F401,F403 - ctc_loss, ctc decoders, dilation2d
from kernflow.core.ops.nn_ops_fractional import *  # noqa: E402,F401,F403 - fractional max/avg pooling
from kernflow.core.ops.misc_ops_tf2 import approx_max_k, approx_min_k  # noqa: E402,F401 - exact top k
from kernflow.core.ops.nn_ops_quantized import *  # noqa: E402,F401,F403 - quantized relu_x, pools, conv2d

"""The public `kf.nn.rnn_cell` namespace (TF 1.15 `tf.compat.v1.nn.rnn_cell`).

The cells live in `rnn_cell_impl`; this module only names the public ones, as TF's
``python/ops/rnn_cell.py`` does.
"""

from kernflow.core.ops.rnn_cell_impl import (BasicLSTMCell, BasicRNNCell, DeviceWrapper,
                                             DropoutWrapper, GRUCell, LSTMCell, LSTMStateTuple,
                                             MultiRNNCell, ResidualWrapper, RNNCell)

__all__ = ["BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "GRUCell",
           "LSTMCell", "LSTMStateTuple", "MultiRNNCell", "ResidualWrapper", "RNNCell"]

"""Contract cases of the basic array/state ops owned by core's skeleton."""

import numpy as np

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(42)
_a = _r.randn(3, 4).astype(np.float32)

CASES = [
    OpCase("Identity", lambda x: kf.identity(x), [_a], lambda x: x, grad=True),
    OpCase("Snapshot", lambda x: apply_op("Snapshot", [x]).outputs[0], [_a], lambda x: x, grad=True),
    OpCase("Const", lambda x: x + kf.constant(np.ones((3, 4), np.float32)), [_a], lambda x: x + 1),
    OpCase("PlaceholderWithDefault", lambda x: kf.placeholder_with_default(x, [3, 4]), [_a],
           lambda x: x, dynamic_shapes=False),
    OpCase("NoOp", lambda x: [kf.identity(x)] if kf.no_op() is not None else None, [_a], lambda x: x),
]

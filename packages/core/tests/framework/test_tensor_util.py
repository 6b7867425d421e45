"""`tensor_util`: decoding TensorProtos."""

import numpy as np
import pytest

from kernflow.core.framework import errors
from kernflow.core.framework import tensor_util


def test_make_ndarray_round_trips():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(tensor_util.make_ndarray(tensor_util.make_tensor_proto(arr)), arr)


def test_content_that_does_not_match_dtype_and_shape_is_the_senders_error_not_data_loss():
    p = tensor_util.make_tensor_proto(np.zeros(3, np.float32))
    p.tensor_content = b"\0" * 8   # float32[3] needs 12 bytes
    with pytest.raises(errors.InvalidArgumentError) as e:
        tensor_util.make_ndarray(p)
    assert not isinstance(e.value, errors.DataLossError)
    assert e.value.message == ("Cannot parse tensor from proto: TensorProto of float32[3] holds 8 "
                               "bytes, expected 12")

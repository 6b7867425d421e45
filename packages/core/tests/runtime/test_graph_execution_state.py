"""`FeedCheck`: a server's check of feeds against the fed tensors' dtypes and placeholder shapes."""

import collections

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_util
from kernflow.core.runtime.graph_execution_state import FeedCheck

# What the check reads of a RunStepRequest's feeds (a NamedTensor: name and TensorProto).
Named = collections.namedtuple("Named", "name tensor")


def _graph_def():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 4], name="x")
        kf.placeholder(kf.float32, name="free")            # unknown rank
        kf.placeholder(kf.int32, [], name="scalar")
        kf.placeholder_with_default(kf.zeros([2, 2]), [2, None], name="d")
        kf.identity(x * 2.0, name="mid")
    return g.as_graph_def()


def _feeds(*values):
    return [Named("", tensor_util.make_tensor_proto(np.asarray(v))) for v in values]


def test_feeds_that_fit_pass():
    check = FeedCheck(_graph_def(), ("x:0", "free:0", "scalar:0", "d:0", "mid:0"))
    check.check_protos(_feeds(np.zeros((3, 4), np.float32), np.zeros((1, 2, 3), np.float32),
                              np.int32(7), np.zeros((2, 9), np.float32), np.zeros((5,), np.float32)))


def test_a_shape_contradicting_the_placeholder_names_it_with_both_shapes():
    check = FeedCheck(_graph_def(), ("x:0",))
    with pytest.raises(errors.InvalidArgumentError) as e:
        check.check_protos(_feeds(np.zeros((2, 3), np.float32)))
    assert e.value.message == ("Cannot feed value of shape (2, 3) for Tensor x:0 of Placeholder 'x', "
                               "which has shape (None, 4)")


@pytest.mark.parametrize("value", [np.zeros((4,), np.float32), np.zeros((1, 1, 4), np.float32)])
def test_a_feed_of_another_rank(value):
    check = FeedCheck(_graph_def(), ("x",))
    with pytest.raises(errors.InvalidArgumentError) as e:
        check.check_protos(_feeds(value))
    assert e.value.message.startswith(f"Cannot feed value of shape {value.shape} for Tensor x ")


def test_a_scalar_placeholder_and_a_placeholder_with_default():
    check = FeedCheck(_graph_def(), ("scalar:0", "d:0"))
    with pytest.raises(errors.InvalidArgumentError, match=r"shape \(1,\) for Tensor scalar:0 .* "
                                                          r"which has shape \(\)"):
        check.check_protos(_feeds(np.zeros((1,), np.int32), np.zeros((2, 1), np.float32)))
    with pytest.raises(errors.InvalidArgumentError, match=r"PlaceholderWithDefault 'd', which has "
                                                          r"shape \(2, None\)"):
        check.check_protos(_feeds(np.int32(1), np.zeros((3, 1), np.float32)))


def test_a_dtype_other_than_the_fed_tensors_names_both():
    check = FeedCheck(_graph_def(), ("x:0", "mid:0"))
    with pytest.raises(errors.InvalidArgumentError) as e:
        check.check_protos(_feeds(np.zeros((2, 4), np.int32), np.zeros((2, 4), np.float32)))
    assert e.value.message == ("Cannot feed value of dtype int32 for Tensor x:0 of Placeholder 'x', "
                               "which has dtype float32")
    # A fed intermediate: its dtype is checked, its shape (no declared one) is not.
    check.check_protos(_feeds(np.zeros((2, 4), np.float32), np.zeros((7,), np.float32)))
    with pytest.raises(errors.InvalidArgumentError, match="dtype float64 for Tensor mid:0 of Identity"):
        check.check_protos(_feeds(np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float64)))

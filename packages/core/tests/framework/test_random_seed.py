"""TF1's seed rules: kf.set_random_seed and random_seed.get_seed."""

import pytest

import kernflow.core as kf
from kernflow.core.framework import random_seed


def test_no_seeds_is_nondeterministic_pair():
    with kf.Graph().as_default():
        assert random_seed.get_seed(None) == (None, None)


def test_op_seed_only_uses_default_graph_seed():
    with kf.Graph().as_default():
        assert random_seed.get_seed(5) == (random_seed.DEFAULT_GRAPH_SEED, 5)
        assert random_seed.DEFAULT_GRAPH_SEED == 87654321


def test_graph_seed_only_uses_op_count():
    g = kf.Graph()
    with g.as_default():
        kf.set_random_seed(42)
        assert g.seed == 42
        assert random_seed.get_seed(None) == (42, 0)
        kf.constant(1.0)
        kf.constant(2.0)
        assert random_seed.get_seed(None) == (42, 2)
        assert random_seed.get_seed(None) == (42, g.version)


def test_both_seeds():
    with kf.Graph().as_default():
        kf.set_random_seed(3)
        assert random_seed.get_seed(9) == (3, 9)


def test_zero_pair_is_replaced():
    with kf.Graph().as_default():
        kf.set_random_seed(0)
        assert random_seed.get_seed(0) == (0, 2**31 - 1)
        # A graph with no ops yet gives op seed 0 too.
        assert random_seed.get_seed(None) == (0, 2**31 - 1)


def test_seeds_are_truncated_to_int32():
    with kf.Graph().as_default():
        kf.set_random_seed(2**31 + 5)
        assert random_seed.get_seed(2**40) == (6, 2**40 % (2**31 - 1))


def test_set_random_seed_only_affects_default_graph():
    g1, g2 = kf.Graph(), kf.Graph()
    with g1.as_default():
        kf.set_random_seed(7)
    assert g1.seed == 7 and g2.seed is None
    with g1.as_default():
        kf.set_random_seed(None)
    assert g1.seed is None


def test_exports():
    assert kf.set_random_seed is random_seed.set_random_seed
    assert kf.random.set_random_seed is random_seed.set_random_seed
    assert kf.random.get_seed is random_seed.get_seed


@pytest.mark.parametrize("graph_seed,op_seed,want", [
    (None, None, (0, 0)), (None, 4, (87654321, 4)), (11, 4, (11, 4))])
def test_seed_attrs_on_ops(graph_seed, op_seed, want):
    with kf.Graph().as_default():
        if graph_seed is not None:
            kf.set_random_seed(graph_seed)
        op = kf.random_uniform([2], seed=op_seed).op
        assert (op.get_attr("seed"), op.get_attr("seed2")) == want

"""Fixtures of the kf.feature_column tests: a fresh graph per test and a runner that
initializes variables and tables first."""

import pytest

import kernflow.core as kf


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = kf.Graph()
    with g.as_default():
        yield g


@pytest.fixture
def run():
    def run_(fetches, feed=None):
        with kf.Session() as sess:
            sess.run([kf.global_variables_initializer(), kf.tables_initializer()])
            return sess.run(fetches, feed)
    return run_


@pytest.fixture
def ids_of(run):
    """``ids_of(column, features)``: the column's (ids, weights) as dense arrays [batch, n], ids
    -1 and weights 0 where a row has no entry."""
    from kernflow.core.feature_column.base import FeatureBuilder

    def ids_of_(column, features):
        ids, weights = column._get_sparse_tensors(FeatureBuilder(features))
        fetch = [kf.sparse_tensor_to_dense(ids, default_value=-1)]
        if weights is not None:
            fetch.append(kf.sparse_tensor_to_dense(weights, default_value=0.0))
        out = run(fetch)
        return (out[0], out[1] if weights is not None else None)
    return ids_of_

"""Checkpoints of partitioned variables (saver_builder.PartitionedVariableSaveable): one logical
tensor per variable, restorable into any partitioning and into a plain variable."""

import os

import numpy as np
import pytest

import kernflow.core as kf

FULL = np.arange(40, dtype=np.float32).reshape(10, 4)


def _graph(shards, name="w", sharded=False, ps_tasks=0):
    g = kf.Graph()
    with g.as_default():
        with kf.device(kf.train.replica_device_setter(ps_tasks=ps_tasks) if ps_tasks else None):
            partitioner = kf.fixed_size_partitioner(shards) if shards else None
            w = kf.get_variable(name, shape=[10, 4], initializer=kf.zeros_initializer(),
                                partitioner=partitioner)
        full = w.as_tensor() if shards else w.value()
        saver = kf.train.Saver(sharded=sharded)
    return g, w, full, saver


def _save(tmp_path, shards, **kw):
    g, w, _, saver = _graph(shards, **kw)
    with g.as_default(), kf.Session() as s:
        s.run(kf.global_variables_initializer())
        s.run(w.assign(FULL) if shards else kf.assign(w, FULL))
        return saver.save(s, os.path.join(str(tmp_path), "model"))


def _restore(path, shards, **kw):
    g, _, full, saver = _graph(shards, **kw)
    with g.as_default(), kf.Session() as s:
        saver.restore(s, path)
        return s.run(full)


@pytest.mark.parametrize("saved,restored", [(3, 3), (3, 2), (3, 0), (0, 3), (2, 5), (1, 3)])
def test_restore_into_any_partitioning(tmp_path, saved, restored):
    path = _save(tmp_path, saved)
    np.testing.assert_array_equal(_restore(path, restored), FULL)


def test_checkpoint_holds_one_full_tensor(tmp_path):
    path = _save(tmp_path, 3)
    assert kf.train.list_variables(str(tmp_path)) == [("w", [10, 4])]
    np.testing.assert_array_equal(kf.train.load_variable(path, "w"), FULL)


def test_sharded_save_restores_elsewhere(tmp_path):
    path = _save(tmp_path, 3, sharded=True)
    assert kf.train.list_variables(str(tmp_path)) == [("w", [10, 4])]
    np.testing.assert_array_equal(_restore(path, 2), FULL)


def test_optimizer_slots_are_saved_as_full_tensors(tmp_path):
    def build(shards):
        g = kf.Graph()
        with g.as_default():
            part = kf.fixed_size_partitioner(shards) if shards else None
            w = kf.get_variable("w", initializer=FULL, partitioner=part)
            loss = kf.reduce_sum(kf.nn.embedding_lookup(w, [1, 8], partition_strategy="div"))
            train = kf.train.AdagradOptimizer(0.5).minimize(loss)
            full = w.as_tensor() if shards else w.value()
            return g, train, full, kf.train.Saver()
    g, train, full, saver = build(3)
    with g.as_default(), kf.Session() as s:
        s.run(kf.global_variables_initializer())
        s.run(train)
        path = saver.save(s, os.path.join(str(tmp_path), "m"))
        want = s.run(full)
    names = dict(kf.train.list_variables(str(tmp_path)))
    assert names == {"w": [10, 4], "w/Adagrad": [10, 4]}
    acc = kf.train.load_variable(path, "w/Adagrad")
    assert acc[1, 0] > 0.1 and acc[0, 0] == pytest.approx(0.1)
    g, train, full, saver = build(2)
    with g.as_default(), kf.Session() as s:
        saver.restore(s, path)
        np.testing.assert_array_equal(s.run(full), want)
        s.run(train)  # the restored accumulator is usable


def test_shape_mismatch_on_restore_raises(tmp_path):
    path = _save(tmp_path, 3)
    g = kf.Graph()
    with g.as_default():
        kf.get_variable("w", shape=[12, 4], partitioner=kf.fixed_size_partitioner(2))
        saver = kf.train.Saver()
        with kf.Session() as s, pytest.raises(kf.errors.InvalidArgumentError):
            saver.restore(s, path)


def test_partial_slices_cannot_be_saved():
    g = kf.Graph()
    with g.as_default():
        w = kf.get_variable("w", shape=[10, 4], partitioner=kf.fixed_size_partitioner(3))
        with pytest.raises(ValueError, match="cover the whole variable"):
            kf.train.Saver(var_list=list(w)[:2])


def test_saver_accepts_partitioned_variable_in_var_list_and_dict(tmp_path):
    g = kf.Graph()
    with g.as_default():
        w = kf.get_variable("w", initializer=FULL, partitioner=kf.fixed_size_partitioner(3))
        s1, s2 = kf.train.Saver(var_list=[w]), kf.train.Saver(var_list={"emb": w})
        with kf.Session() as s:
            s.run(kf.global_variables_initializer())
            s1.save(s, os.path.join(str(tmp_path), "a"))
            p2 = s2.save(s, os.path.join(str(tmp_path), "b"))
    assert kf.train.list_variables(p2) == [("emb", [10, 4])]

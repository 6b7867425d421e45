"""kf.train.Checkpoint, CheckpointManager and CheckpointOptions: object-based checkpoints in graph
mode (TF1's tf.compat.v1.train.Checkpoint / tf.train.CheckpointManager)."""

import os

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.protobuf import trackable_object_graph_pb2
from kernflow.core.train import checkpoint_manager as cm_mod
from kernflow.core.train import object_checkpoint as oc
from kernflow.core.train.object_graph import OBJECT_GRAPH_KEY

VV = ".ATTRIBUTES/VARIABLE_VALUE"


class Dense(kf.Module):
    def __init__(self, n_in, n_out, seed, name=None):
        super().__init__(name=name)
        rs = np.random.RandomState(seed)
        self.w = kf.Variable(rs.randn(n_in, n_out).astype(np.float32), name="w")
        self.b = kf.Variable(np.zeros(n_out, np.float32), name="b")


class MLP(kf.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.layers = [Dense(3, 4, 0), Dense(4, 1, 1)]

    def __call__(self, x):
        for layer in self.layers:
            x = kf.matmul(x, layer.w) + layer.b
        return x


def _train_setup(scope=""):
    """An MLP, Adam and a train op (variables under name scope `scope`, to vary graph names)."""
    with kf.name_scope(scope or None):
        model = MLP()
    x = kf.constant(np.arange(6, dtype=np.float32).reshape(2, 3) / 6)
    loss = kf.reduce_sum(kf.square(model(x) - 1.0))
    opt = kf.train.AdamOptimizer(0.05)
    return model, opt, loss


def _values(sess, model, opt):
    out = {}
    for i, layer in enumerate(model.layers):
        for name in ("w", "b"):
            v = getattr(layer, name)
            out[f"{i}{name}"] = sess.run(v)
            for slot in ("m", "v"):
                out[f"{i}{name}/{slot}"] = sess.run(opt.get_slot(v, slot))
    out["beta1_power"] = sess.run(opt._non_slot["beta1_power"])
    return out


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-6, err_msg=k)


@pytest.fixture
def graph():
    g = kf.Graph()
    with g.as_default():
        yield g


def test_exports():
    assert kf.train.Checkpoint is oc.Checkpoint
    assert kf.train.CheckpointManager is cm_mod.CheckpointManager
    assert kf.train.CheckpointOptions is oc.CheckpointOptions
    assert kf.train.CheckpointOptions("/cpu:0").experimental_io_device == "/cpu:0"


# ------------------------------------------------------------------------------ save / restore
def test_variables_round_trip_keys_and_object_graph(graph, tmp_path):
    a = kf.Variable(np.arange(4, dtype=np.float32), name="a")
    n = kf.Variable(np.int64(7), name="n")
    s = kf.Variable(["x", "yz"], name="s")
    ckpt = kf.train.Checkpoint(a=a, n=n, s=s)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        path = ckpt.save(str(tmp_path / "ckpt"), session=sess)
        sess.run([a.assign(a * 0), n.assign(0), s.assign(["", ""])])
        status = ckpt.restore(path)
        assert isinstance(status, oc.CheckpointLoadStatus)
        status.assert_consumed().run_restore_ops(sess)
        np.testing.assert_array_equal(sess.run(a), np.arange(4))
        assert sess.run(n) == 7 and list(sess.run(s)) == [b"x", b"yz"]
    assert path == str(tmp_path / "ckpt-1")
    names = [k for k, _ in kf.train.list_variables(str(tmp_path))]
    assert names == sorted([OBJECT_GRAPH_KEY, f"a/{VV}", f"n/{VV}", f"s/{VV}",
                            f"save_counter/{VV}"])
    raw = kf.train.load_variable(path, OBJECT_GRAPH_KEY)
    proto = trackable_object_graph_pb2.TrackableObjectGraph.FromString(
        np.asarray(raw).reshape(-1)[0])
    root = proto.nodes[0]
    assert [c.local_name for c in root.children] == ["a", "n", "s", "save_counter"]
    attr = proto.nodes[root.children[0].node_id].attributes[0]
    assert (attr.name, attr.full_name, attr.checkpoint_key) == ("VARIABLE_VALUE", "a", f"a/{VV}")


def test_module_tree_restores_by_structure_not_names(tmp_path):
    g1 = kf.Graph()
    with g1.as_default():
        model = MLP()
        ckpt = kf.train.Checkpoint(model=model)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            path = ckpt.save(str(tmp_path / "ckpt"), session=sess)
            want = [sess.run(v) for v in model.variables]
    assert f"model/layers/1/w/{VV}" in dict(kf.train.list_variables(path))
    g2 = kf.Graph()
    with g2.as_default():
        kf.Variable(0.0, name="w")                    # shifts every graph name
        with kf.name_scope("elsewhere"):
            model = MLP(name="renamed")
        assert model.layers[0].w.op.name != "w"
        ckpt = kf.train.Checkpoint(model=model)
        with kf.Session() as sess:
            ckpt.restore(path).assert_consumed().run_restore_ops(sess)
            for v, w in zip(model.variables, want):
                np.testing.assert_array_equal(sess.run(v), w)


def test_adam_slots_round_trip_in_new_graph_and_training_continues(tmp_path):
    g1 = kf.Graph()
    with g1.as_default():
        model, opt, loss = _train_setup()
        train = opt.minimize(loss)
        ckpt = kf.train.Checkpoint(model=model, optimizer=opt)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            for _ in range(3):
                sess.run(train)
            path = ckpt.save(str(tmp_path / "ckpt"), session=sess)
            saved = _values(sess, model, opt)
            for _ in range(2):
                sess.run(train)
            continued = _values(sess, model, opt)
    keys = dict(kf.train.list_variables(path))
    assert f"model/layers/0/w/.OPTIMIZER_SLOT/optimizer/m/{VV}" in keys
    assert f"optimizer/beta2_power/{VV}" in keys
    g2 = kf.Graph()
    with g2.as_default():
        model, opt, loss = _train_setup(scope="rebuilt")
        ckpt = kf.train.Checkpoint(model=model, optimizer=opt)
        status = ckpt.restore(kf.train.latest_checkpoint(str(tmp_path)))
        train = opt.minimize(loss)          # slots created after restore() are matched too
        status.assert_consumed()
        with kf.Session() as sess:
            status.initialize_or_restore(sess)
            _assert_same(_values(sess, model, opt), saved)
            assert sess.run(ckpt.save_counter) == 1
            for _ in range(2):
                sess.run(train)
            _assert_same(_values(sess, model, opt), continued)


def test_slots_of_untracked_variables_are_not_saved(graph, tmp_path):
    w = kf.Variable(np.ones(2, np.float32), name="w")
    u = kf.Variable(np.ones(2, np.float32), name="u")
    opt = kf.train.MomentumOptimizer(0.1, 0.9)
    train = opt.minimize(kf.reduce_sum(w * u))
    ckpt = kf.train.Checkpoint(w=w, opt=opt)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        sess.run(train)
        path = ckpt.write(str(tmp_path / "c"), session=sess)
    names = {k for k, _ in kf.train.list_variables(path)}
    assert f"w/.OPTIMIZER_SLOT/opt/momentum/{VV}" in names
    assert not any(k.startswith("u/") or "/u/" in k for k in names)


def test_save_counter_write_and_state_file(graph, tmp_path):
    v = kf.Variable(1.0, name="v")
    ckpt = kf.train.Checkpoint(v=v)
    prefix = str(tmp_path / "run" / "ckpt")
    with kf.Session() as sess:
        sess.run(v.initializer)
        assert ckpt.save(prefix, session=sess) == prefix + "-1"
        with sess.as_default():
            assert ckpt.save(prefix) == prefix + "-2"       # the default session
        assert sess.run(ckpt.save_counter) == 2
        assert ckpt.write(str(tmp_path / "w"), session=sess) == str(tmp_path / "w")
        assert sess.run(ckpt.save_counter) == 2
    assert kf.train.latest_checkpoint(str(tmp_path / "run")) == prefix + "-2"
    state = kf.train.get_checkpoint_state(str(tmp_path / "run"))
    assert list(state.all_model_checkpoint_paths) == [prefix + "-2"]
    assert 'model_checkpoint_path: "ckpt-2"' in (tmp_path / "run" / "checkpoint").read_text()
    assert not (tmp_path / "checkpoint").exists()                  # write() keeps no state
    assert kf.train.load_variable(prefix + "-1", f"save_counter/{VV}") == 1
    with kf.Graph().as_default():
        v2 = kf.Variable(0.0, name="v")
        ckpt2 = kf.train.Checkpoint(v=v2)
        status = ckpt2.restore(prefix + "-2")
        with kf.Session() as sess:
            status.initialize_or_restore(sess)
            assert sess.run(ckpt2.save_counter) == 2
            assert ckpt2.save(prefix, session=sess) == prefix + "-3"


def test_failed_save_leaves_no_checkpoint_and_no_state(graph, tmp_path):
    v = kf.Variable(1.0, name="v")
    ckpt = kf.train.Checkpoint(v=v)
    with kf.Session() as sess:               # v is never initialized: the save op fails
        with pytest.raises(errors.FailedPreconditionError):
            ckpt.save(str(tmp_path / "ckpt"), session=sess)
    assert kf.train.latest_checkpoint(str(tmp_path)) is None
    assert not [f for f in os.listdir(tmp_path) if ".index" in f or f == "checkpoint"]


def test_save_needs_a_session(graph, tmp_path):
    ckpt = kf.train.Checkpoint(v=kf.Variable(1.0))
    with pytest.raises(ValueError, match="needs a session"):
        ckpt.save(str(tmp_path / "ckpt"))


# ------------------------------------------------------------------------------ what is tracked
class Plain:
    """A plain Python object: tracked through its attributes."""


def test_plain_objects_dicts_nested_checkpoints_layers_and_sharing(graph, tmp_path):
    shared = kf.Variable(np.float32(3), name="shared")
    holder = Plain()
    holder.weights = {"a.b": shared, "c/d": kf.Variable(np.float32(4), name="cd")}
    holder.note = "not tracked"
    holder.empty = Plain()
    inner = kf.train.Checkpoint(again=shared)
    dense = kf.layers.Dense(2, name="dense")
    dense(kf.constant(np.ones((1, 3), np.float32)))
    ckpt = kf.train.Checkpoint(holder=holder, inner=inner, dense=dense)
    ckpt.extra = kf.Variable(np.float32(5), name="extra")     # tracked when set later
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        path = ckpt.write(str(tmp_path / "c"), session=sess)
    names = {k for k, _ in kf.train.list_variables(path)}
    assert names == {OBJECT_GRAPH_KEY, f"inner/again/{VV}", f"holder/weights/c.Sd/{VV}",
                     f"dense/kernel/{VV}", f"dense/bias/{VV}", f"extra/{VV}"}
    # holder.weights["a.b"] is the same variable as inner.again: one node, saved once, named by
    # the first path breadth-first ("." and "/" in names are escaped as ".." and ".S")


def test_rejects_untrackable_arguments(graph):
    with pytest.raises(ValueError, match="expecting a trackable object"):
        kf.train.Checkpoint(x=3)
    with pytest.raises(ValueError, match="expecting a trackable object"):
        kf.train.Checkpoint(t=kf.constant(1.0))
    with pytest.raises(ValueError, match="save_counter"):
        kf.train.Checkpoint(save_counter=kf.Variable(1))


def test_partitioned_variable_round_trip(graph, tmp_path):
    w = kf.get_variable("w", shape=[6, 2], initializer=kf.ones_initializer(),
                        partitioner=kf.fixed_size_partitioner(3))
    ckpt = kf.train.Checkpoint(w=w)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        sess.run(w.assign(np.arange(12, dtype=np.float32).reshape(6, 2)))
        path = ckpt.write(str(tmp_path / "p"), session=sess)
    assert dict(kf.train.list_variables(path))[f"w/{VV}"] == [6, 2]
    with kf.Graph().as_default():
        w2 = kf.get_variable("other", shape=[6, 2], partitioner=kf.fixed_size_partitioner(2))
        status = kf.train.Checkpoint(w=w2).restore(path)
        with kf.Session() as sess:
            status.assert_consumed().run_restore_ops(sess)
            np.testing.assert_array_equal(sess.run(w2.as_tensor()),
                                          np.arange(12).reshape(6, 2))


# ------------------------------------------------------------------------------ status assertions
def _saved(tmp_path, **values):
    with kf.Graph().as_default():
        tracked = {k: kf.Variable(np.float32(v), name=k) for k, v in values.items()}
        ckpt = kf.train.Checkpoint(**tracked)
        with kf.Session() as sess:
            sess.run(kf.global_variables_initializer())
            return ckpt.save(str(tmp_path / "ckpt"), session=sess)


def test_assert_consumed_fails_when_the_checkpoint_has_more(graph, tmp_path):
    path = _saved(tmp_path, a=1, b=2)
    a = kf.Variable(np.float32(0), name="a")
    status = kf.train.Checkpoint(a=a).restore(path)
    status.assert_existing_objects_matched().assert_nontrivial_match()
    with pytest.raises(AssertionError, match=r"Unresolved objects.*\(root\)\.b"):
        status.assert_consumed()
    with kf.Session() as sess:
        status.expect_partial().run_restore_ops(sess)
        assert sess.run(a) == 1


def test_assert_existing_objects_matched_fails_on_new_objects(graph, tmp_path):
    path = _saved(tmp_path, a=1)
    a, c = kf.Variable(np.float32(0), name="a"), kf.Variable(np.float32(0), name="c")
    status = kf.train.Checkpoint(a=a, c=c).restore(path)
    status.assert_nontrivial_match()
    for check in (status.assert_existing_objects_matched, status.assert_consumed):
        with pytest.raises(AssertionError, match=r"not bound to checkpointed values.*'c \(c\)'"):
            check()
    with kf.Session() as sess:                # c is initialized, a restored
        status.initialize_or_restore(sess)
        assert sess.run([a, c]) == [1, 0]


def test_assert_nontrivial_match_and_unused_attributes(graph, tmp_path):
    path = _saved(tmp_path, a=1)
    other = kf.train.Checkpoint(z=kf.Variable(0.0, name="z")).restore(path)
    with pytest.raises(AssertionError, match="Nothing except the root object matched"):
        other.assert_nontrivial_match()
    with pytest.raises(AssertionError, match="Nothing to load"):
        kf.train.Checkpoint().restore(path).assert_nontrivial_match()
    module = kf.Module(name="a_module")
    module.inner = kf.Variable(0.0, name="inner")
    status = kf.train.Checkpoint(a=module).restore(path)   # "a" was a variable, now a Module
    with pytest.raises(AssertionError, match=r"inner"):
        status.assert_existing_objects_matched()
    module.inner = None
    with pytest.raises(AssertionError, match=r"Unused attributes.*\(root\)\.a"):
        status.assert_consumed()


def test_shape_mismatch_fails_at_restore(graph, tmp_path):
    path = _saved(tmp_path, a=1)
    a = kf.Variable(np.zeros(3, np.float32), name="a")
    status = kf.train.Checkpoint(a=a).restore(path)
    status.assert_consumed()                          # structure matches; values are checked at run
    with kf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError):
            status.run_restore_ops(sess)


def test_restore_missing_checkpoint_raises_not_found(graph, tmp_path):
    with pytest.raises(errors.NotFoundError):
        kf.train.Checkpoint(a=kf.Variable(1.0)).restore(str(tmp_path / "nope-1"))


def test_initialize_or_restore_without_a_checkpoint(graph):
    model, opt, loss = _train_setup()
    ckpt = kf.train.Checkpoint(model=model, optimizer=opt)
    status = ckpt.restore(None)
    train = opt.minimize(loss)
    for check in (status.assert_consumed, status.assert_existing_objects_matched,
                  status.assert_nontrivial_match):
        with pytest.raises(AssertionError, match="No checkpoint specified"):
            check()
    untracked = kf.Variable(1.0, name="untracked")
    with kf.Session() as sess:
        status.run_restore_ops(sess)                  # nothing to do
        status.initialize_or_restore(sess)
        assert sess.run(ckpt.save_counter) == 0
        sess.run(train)                               # every tracked variable (slots too) is ready
        uninit = sess.run(kf.report_uninitialized_variables())
        assert [n.decode() if isinstance(n, bytes) else n for n in uninit] == ["untracked"]
    del untracked


# ------------------------------------------------------------------------------ name-based checkpoints
def test_saver_checkpoint_is_restored_by_names_as_tf_does(graph, tmp_path):
    w = kf.Variable(np.ones(2, np.float32), name="w")
    opt = kf.train.AdamOptimizer(0.1)
    train = opt.minimize(kf.reduce_sum(w * w))
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        sess.run(train)
        path = kf.train.Saver().save(sess, str(tmp_path / "model"))
        want = sess.run([w, opt.get_slot(w, "m"), opt._non_slot["beta1_power"]])
    assert OBJECT_GRAPH_KEY not in dict(kf.train.list_variables(path))
    ckpt = kf.train.Checkpoint(w=w, opt=opt)
    status = ckpt.restore(path)
    assert isinstance(status, oc.NameBasedSaverStatus)
    status.assert_consumed()                       # save_counter, not in a Saver's file, is optional
    with kf.Session() as sess:
        status.initialize_or_restore(sess)
        got = sess.run([w, opt.get_slot(w, "m"), opt._non_slot["beta1_power"]])
        for x, y in zip(got, want):
            np.testing.assert_allclose(x, y)
        new = ckpt.save(str(tmp_path / "ckpt"), session=sess)   # re-encoded, object-based
    assert f"w/{VV}" in dict(kf.train.list_variables(new))


def test_saver_checkpoint_missing_names_is_rejected_clearly(graph, tmp_path):
    w = kf.Variable(np.ones(2, np.float32), name="w")
    with kf.Session() as sess:
        sess.run(w.initializer)
        path = kf.train.Saver([w]).save(sess, str(tmp_path / "model"))
    extra = kf.Variable(0.0, name="extra")
    status = kf.train.Checkpoint(w=w, extra=extra).restore(path)
    with pytest.raises(AssertionError, match=r"name-based kf.train.Saver checkpoint.*\['extra'\]"):
        status.assert_consumed()
    with kf.Session() as sess:
        with pytest.raises(errors.NotFoundError, match="extra"):
            status.run_restore_ops(sess)


# ------------------------------------------------------------------------------ options
def test_checkpoint_options_place_the_io_ops(graph, tmp_path):
    v = kf.Variable(2.0, name="v")
    ckpt = kf.train.Checkpoint(v=v)
    opts = kf.train.CheckpointOptions(experimental_io_device="/job:localhost/replica:0/task:0/device:CPU:0")
    with kf.Session() as sess:
        sess.run(v.initializer)
        path = ckpt.save(str(tmp_path / "ckpt"), session=sess, options=opts)
        ckpt.restore(path, options=opts).run_restore_ops(sess)
    io_ops = [op for op in graph.get_operations() if op.type in ("SaveV2", "RestoreV2")]
    assert {op.type for op in io_ops} == {"SaveV2", "RestoreV2"}
    assert all("/job:localhost" in op.device for op in io_ops)


def test_save_ops_are_built_once(graph, tmp_path):
    ckpt = kf.train.Checkpoint(v=kf.Variable(2.0, name="v"))
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        ckpt.save(str(tmp_path / "ckpt"), session=sess)
        n = len(graph.get_operations())
        ckpt.save(str(tmp_path / "ckpt"), session=sess)
        assert len(graph.get_operations()) == n


# ------------------------------------------------------------------------------ CheckpointManager
def _index_files(d):
    return sorted(f[:-len(".index")] for f in os.listdir(d) if f.endswith(".index"))


def test_manager_keeps_max_to_keep_and_recovers_from_the_state_file(graph, tmp_path):
    v = kf.Variable(0.0, name="v")
    ckpt = kf.train.Checkpoint(v=v)
    d = str(tmp_path)
    with kf.Session() as sess:
        sess.run(v.initializer)
        manager = kf.train.CheckpointManager(ckpt, d, max_to_keep=2)
        assert manager.latest_checkpoint is None and manager.checkpoints == []
        for i in range(4):
            sess.run(v.assign(float(i)))
            path = manager.save(session=sess)
        assert path == os.path.join(d, "ckpt-4") == manager.latest_checkpoint
        assert manager.checkpoints == [os.path.join(d, "ckpt-3"), path]
        assert _index_files(d) == ["ckpt-3", "ckpt-4"]
        assert kf.train.latest_checkpoint(d) == path
        state = kf.train.get_checkpoint_state(d)
        assert list(state.all_model_checkpoint_paths) == manager.checkpoints
        assert len(state.all_model_checkpoint_timestamps) == 2
        again = kf.train.CheckpointManager(ckpt, d, max_to_keep=2)      # e.g. after a restart
        assert again.checkpoints == manager.checkpoints and again.latest_checkpoint == path
        assert again.save(checkpoint_number=100, session=sess) == os.path.join(d, "ckpt-100")
        assert _index_files(d) == ["ckpt-100", "ckpt-4"]
        assert sess.run(ckpt.save_counter) == 5           # still counted
        step = kf.Variable(np.int64(7), name="step")
        sess.run(step.initializer)
        assert again.save(checkpoint_number=step, session=sess) == os.path.join(d, "ckpt-7")
    with kf.Graph().as_default():
        v2 = kf.Variable(-1.0, name="v")
        ckpt2 = kf.train.Checkpoint(v=v2)
        with kf.Session() as sess:
            ckpt2.restore(kf.train.CheckpointManager(ckpt2, d, 2).latest_checkpoint) \
                .initialize_or_restore(sess)
            assert sess.run(v2) == 3.0


def test_manager_max_to_keep_none_and_validation(graph, tmp_path):
    ckpt = kf.train.Checkpoint(v=kf.Variable(0.0, name="v"))
    with pytest.raises(ValueError, match="max_to_keep"):
        kf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=0)
    manager = kf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=None,
                                         checkpoint_name="model")
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        for _ in range(3):
            manager.save(session=sess)
    assert _index_files(str(tmp_path)) == ["model-1", "model-2", "model-3"]
    assert len(manager.checkpoints) == 3


def test_manager_keep_checkpoint_every_n_hours(graph, tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(cm_mod.time, "time", lambda: clock[0])
    ckpt = kf.train.Checkpoint(v=kf.Variable(0.0, name="v"))
    manager = kf.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=1,
                                         keep_checkpoint_every_n_hours=1)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        for t in (1000.0, 1600.0, 4700.0, 5000.0, 5300.0):
            clock[0] = t
            manager.save(session=sess)
    # The manager starts with last preserved = 999. Aging out: ckpt-1 (1000) and ckpt-2 (1600) are
    # within an hour of it: deleted; ckpt-3 (4700) is over an hour later: preserved on disk (not
    # listed), now the last preserved; ckpt-4 (5000) is within an hour of that: deleted.
    assert _index_files(str(tmp_path)) == ["ckpt-3", "ckpt-5"]
    assert manager.checkpoints == [os.path.join(str(tmp_path), "ckpt-5")]
    state = kf.train.get_checkpoint_state(str(tmp_path))
    assert state.last_preserved_timestamp == 4700.0

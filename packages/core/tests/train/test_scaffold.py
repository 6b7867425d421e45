"""`kf.train.Scaffold`: defaults from the collections, finalization, init_fn, copy_from_scaffold."""

import pytest

import kernflow.core as kf


def test_finalize_creates_defaults_and_finalizes_the_graph(model):
    scaffold = kf.train.Scaffold()
    assert scaffold.finalize() is scaffold
    g = model.graph
    assert g.finalized
    assert g.get_collection(kf.GraphKeys.INIT_OP) == [scaffold.init_op]
    assert g.get_collection(kf.GraphKeys.READY_OP) == [scaffold.ready_op]
    assert g.get_collection(kf.GraphKeys.READY_FOR_LOCAL_INIT_OP) == [scaffold.ready_for_local_init_op]
    assert g.get_collection(kf.GraphKeys.LOCAL_INIT_OP) == [scaffold.local_init_op]
    assert g.get_collection(kf.GraphKeys.SAVERS) == [scaffold.saver]
    assert scaffold.summary_op is None and scaffold.init_fn is None
    with kf.Session(graph=g) as sess:
        assert sorted(sess.run(scaffold.ready_op)) == [b"global_step", b"w"]
        sess.run(scaffold.init_op)
        sess.run(scaffold.local_init_op)
        assert sess.run(scaffold.ready_op).size == 0
    # A second scaffold picks the same pieces from the collections (no new ops: the graph is final).
    other = kf.train.Scaffold().finalize()
    assert other.init_op is scaffold.init_op and other.saver is scaffold.saver
    g._unsafe_unfinalize()


def test_given_pieces_are_used_and_not_collected(model):
    init = kf.group(model.w.initializer, model.global_step.initializer)
    saver = kf.train.Saver([model.w, model.global_step])
    scaffold = kf.train.Scaffold(init_op=init, saver=saver, init_feed_dict={})
    scaffold.finalize()
    assert scaffold.init_op is init and scaffold.saver is saver and scaffold.init_feed_dict == {}
    assert model.graph.get_collection(kf.GraphKeys.INIT_OP) == []
    assert model.graph.get_collection(kf.GraphKeys.SAVERS) == []
    model.graph._unsafe_unfinalize()


def test_more_than_one_item_in_a_collection(model):
    kf.add_to_collection(kf.GraphKeys.INIT_OP, kf.no_op())
    kf.add_to_collection(kf.GraphKeys.INIT_OP, kf.no_op())
    with pytest.raises(RuntimeError, match='More than one item in the collection "init_op".*init_op='):
        kf.train.Scaffold().finalize()


def test_init_fn_and_copy_from_scaffold(model):
    calls = []
    init = kf.global_variables_initializer()

    def init_fn(scaffold, sess):
        calls.append(scaffold)
        sess.run(init)
    base = kf.train.Scaffold(init_fn=init_fn, init_op=kf.no_op(name="noop_init"))
    ready = kf.constant([], kf.string)
    copy = kf.train.Scaffold(copy_from_scaffold=base, ready_op=ready)
    copy.finalize()
    assert copy.init_op is base.init_op and copy.ready_op is ready
    with kf.Session(graph=model.graph) as sess:
        copy.init_fn(sess)  # called as init_fn(scaffold, session)
        assert sess.run(model.global_step) == 0
    assert calls == [copy]
    with pytest.raises(TypeError, match="copy_from_scaffold is not a Scaffold"):
        kf.train.Scaffold(copy_from_scaffold=object())
    model.graph._unsafe_unfinalize()


def test_default_summary_op_merges_the_summaries(model):
    kf.summary.scalar("mse", model.loss)
    kf.summary.histogram("weights", model.w)
    scaffold = kf.train.Scaffold().finalize()
    assert scaffold.summary_op.op.type == "MergeSummary"
    assert model.graph.get_collection(kf.GraphKeys.SUMMARY_OP) == [scaffold.summary_op]
    with kf.Session(graph=model.graph) as sess:
        sess.run(scaffold.init_op)
        summary = kf.summary.Summary.FromString(sess.run(scaffold.summary_op))
    assert [v.tag for v in summary.value] == ["mse", "weights"]
    assert summary.value[0].simple_value == 4.0  # w = 0: mean((0 - 2)^2)
    model.graph._unsafe_unfinalize()

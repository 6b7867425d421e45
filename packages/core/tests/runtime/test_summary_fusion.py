"""The summary fusion pass (kernflow/core/runtime/summary_fusion.py): MergeSummary over ScalarSummary
ops with constant, distinct tags -> one `_FusedScalarSummaries` node, the same bytes as unfused.

Each case runs a step with the pass (the default) and with `global_jit_level=OFF` (no rewrite),
compares the outputs byte for byte and reads the partition graphs to see what ran.
"""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.ops import summary_ops
from kernflow.core.protobuf import summary_pb2
from kernflow.core.testing.rewrites import CPU, rewrites_off, run_step


def _compare(graph, fetches, feeds, init=None):
    fused, ops = run_step(graph, fetches, feeds, init=init)
    plain, plain_ops = run_step(graph, fetches, feeds, rewrites_off(), init=init)
    assert "_FusedScalarSummaries" not in plain_ops
    for a, b in zip(fused if isinstance(fused, list) else [fused],
                    plain if isinstance(plain, list) else [plain]):
        assert type(a) is type(b) and a == b      # serialized summaries: the same bytes
    return fused, ops


def test_a_training_loop_s_scalars_fuse_into_one_kernel_with_the_same_bytes():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None], name="x")
        loss = kf.reduce_mean(x * x)
        kf.summary.scalar("loss", loss)
        kf.summary.scalar("largest", kf.cast(kf.reduce_max(x), kf.float64))
        kf.summary.scalar("count", kf.size(x))
        merged = kf.summary.merge_all()
    out, ops = _compare(g, merged, {x: np.array([1.0, -2.5, 3.0], np.float32)})
    assert ops.count("_FusedScalarSummaries") == 1
    assert "ScalarSummary" not in ops and "MergeSummary" not in ops
    values = summary_pb2.Summary.FromString(out).value
    assert [(v.tag, v.simple_value) for v in values] == [("loss", pytest.approx(16.25 / 3)),
                                                         ("largest", 3.0), ("count", 3.0)]


def test_special_values_and_every_value_type_give_the_unfused_bytes():
    # numpy float32 scalars (full reductions), 0-d float32 arrays (slices), float64 beyond float32's
    # range (inf, as TF's cast) and large int64s take different paths through the fused kernel.
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [4], name="x")
        d = kf.placeholder(kf.float64, [2], name="d")
        i = kf.placeholder(kf.int64, [], name="i")
        for k in range(4):
            kf.summary.scalar(f"x{k}", x[k])
        kf.summary.scalar("max", kf.reduce_max(x))
        kf.summary.scalar("sum", kf.reduce_sum(x[1:2]))
        kf.summary.scalar("big", d[0])
        kf.summary.scalar("small", d[1])
        kf.summary.scalar("int", i)
        merged = kf.summary.merge_all()
    feeds = {x: np.array([np.nan, -0.0, np.inf, 1e-45], np.float32), d: np.array([1e300, -1e-300]),
             i: np.int64(2**62 + 1)}
    out, ops = _compare(g, merged, feeds)
    assert ops.count("_FusedScalarSummaries") == 1
    values = {v.tag: v.simple_value for v in summary_pb2.Summary.FromString(out).value}
    assert np.isnan(values["x0"]) and np.signbit(values["x1"]) and values["big"] == np.inf
    assert values["int"] == float(np.float32(2**62 + 1))


def test_a_fetched_summary_a_duplicate_or_a_fed_tag_leaves_the_merge_alone():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        a = kf.summary.scalar("a", x)
        b = kf.summary.scalar("b", x + 1)
        merged = kf.summary.merge([a, b])
        dup = kf.summary.merge([summary_ops.scalar_summary("d", x), summary_ops.scalar_summary("d", x + 1)])
        tag = kf.placeholder(kf.string, [], name="tag")
        fed = kf.summary.merge([kf.summary.scalar("c", x), summary_ops.scalar_summary(tag, x)])
    # Fetching one of the ScalarSummaries too: it must exist, so nothing fuses.
    (m, one), ops = _compare(g, [merged, a], {x: 2.0})
    assert "_FusedScalarSummaries" not in ops and ops.count("ScalarSummary") == 2
    assert [v.tag for v in summary_pb2.Summary.FromString(m).value] == ["a", "b"]
    # A duplicate tag: MergeSummary reports it, as without the pass.
    with pytest.raises(errors.InvalidArgumentError, match="Duplicate tag d found in summary inputs"):
        run_step(g, dup, {x: 2.0})
    # A tag that is not a constant: left to the unfused kernels.
    out, ops = _compare(g, fed, {x: 2.0, tag: "fed"})
    assert "_FusedScalarSummaries" not in ops
    assert [v.tag for v in summary_pb2.Summary.FromString(out).value] == ["c", "fed"]


def test_a_non_scalar_value_fails_as_scalar_summary_does_naming_its_node():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, None, name="x")
        kf.summary.scalar("ok", kf.reduce_sum(x))
        kf.summary.scalar("bad", x)
        merged = kf.summary.merge_all()
    msgs = []
    for config in (CPU, rewrites_off()):
        with pytest.raises(errors.InvalidArgumentError) as e:
            run_step(g, merged, {x: np.ones(3, np.float32)}, config)
        msgs.append(e.value.message)
    want = "ScalarSummary node bad: tags and values are not the same shape: [] != [3]"
    assert all(want in m for m in msgs), msgs


def test_control_dependencies_of_the_fused_nodes_still_run():
    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(0.0)
        bump = kf.assign_add(v, 1.0)
        x = kf.placeholder(kf.float32, [], name="x")
        with kf.control_dependencies([bump]):
            kf.summary.scalar("first", x)
        kf.summary.scalar("second", x * 3)
        merged = kf.summary.merge_all()
    with kf.Session(graph=g, config=CPU) as s:
        s.run(v.initializer)
        meta = kf.RunMetadata()
        for _ in range(3):
            out = s.run(merged, {x: 1.0}, options=kf.RunOptions(output_partition_graphs=True),
                        run_metadata=meta)
        assert s.run(v) == 3.0
    assert "_FusedScalarSummaries" in [nd.op for p in meta.partition_graphs for nd in p.node]
    assert [v.tag for v in summary_pb2.Summary.FromString(out).value] == ["first", "second"]


def test_a_filewriter_reads_the_fused_summaries_like_the_unfused_ones(tmp_path):
    from kernflow.core.summary.writer import summary_iterator
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        kf.summary.scalar("loss", x)
        kf.summary.scalar("acc", 1.0 - x)
        merged = kf.summary.merge_all()
    with kf.Session(graph=g, config=CPU) as s:
        w = kf.summary.FileWriter(str(tmp_path))
        for step in range(3):
            w.add_summary(s.run(merged, {x: step / 4}), step)
        w.close()
    events = [e for f in sorted(tmp_path.iterdir()) for e in summary_iterator(str(f)) if e.HasField("summary")]
    assert [(e.step, [(v.tag, v.simple_value) for v in e.summary.value]) for e in events] == [
        (i, [("loss", i / 4), ("acc", 1 - i / 4)]) for i in range(3)]

"""Session.run: fetch structures, feeds and their errors, defaults, callables, devices, reset."""

import collections
import threading

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


@pytest.fixture
def g():
    graph = kf.Graph()
    with graph.as_default():
        yield graph


def test_fetch_structures(g):
    a = kf.constant(1.0, name="a")
    b = kf.constant(np.array([1, 2], np.int32), name="b")
    nt = collections.namedtuple("NT", "x y")
    op = kf.no_op()
    with kf.Session() as s:
        out = s.run({"a": a, "nested": [b, (a, nt(a, b))], "op": op, "name": "a:0"})
    assert out["a"] == 1.0 and isinstance(out["a"], np.float32)
    np.testing.assert_array_equal(out["nested"][0], [1, 2])
    assert isinstance(out["nested"][1], tuple) and isinstance(out["nested"][1][1], nt)
    assert out["nested"][1][1].x == 1.0
    assert out["op"] is None and out["name"] == 1.0
    with kf.Session() as s:
        assert s.run(op) is None
        assert s.run("a") is None  # an op name fetches the operation


def test_fetch_errors(g):
    with kf.Session() as s:
        with pytest.raises(TypeError):
            s.run(None)
        with pytest.raises(ValueError, match="cannot be interpreted"):
            s.run("missing:0")
        with pytest.raises(TypeError):
            s.run(3)


def test_feed_checks(g):
    x = kf.placeholder(kf.float32, [2], name="x")
    i = kf.placeholder(kf.int32, [], name="i")
    y = x + 1.0
    with kf.Session() as s:
        np.testing.assert_allclose(s.run(y, {x: [1, 2]}), [2, 3])
        np.testing.assert_allclose(s.run(y, {"x:0": np.array([1, 2], np.float64)}), [2, 3])
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\) for Tensor 'x:0'"):
            s.run(y, {x: [1, 2, 3]})
        with pytest.raises(errors.InvalidArgumentError, match="You must feed a value for placeholder tensor 'x'"):
            s.run(y)
        with pytest.raises(TypeError, match="cannot be a kf.Tensor"):
            s.run(y, {x: y})
        with pytest.raises(TypeError, match="not compatible"):
            s.run(i + 1, {i: 2 ** 40})
        with pytest.raises(TypeError):
            s.run(y, {x: ["a", "b"]})


def test_feeding_an_intermediate_prunes_its_producers(g):
    x = kf.placeholder(kf.float32, [], name="x")
    mid = x + 1.0
    out = mid + 1.0
    with kf.Session() as s:
        # x is never fed: feeding `mid` cuts the graph there.
        assert s.run(out, {mid: 10.0}) == 11.0
        assert s.run([mid, out], {mid: 1.0}) == [1.0, 2.0]


def test_variables_state_and_errors(g):
    v = kf.Variable(np.array([1.0, 2.0], np.float32), name="v")
    inc = v.assign_add([1.0, 1.0])
    with kf.Session() as s:
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value v"):
            s.run(v + 0.0)
        assert not s.run(kf.is_variable_initialized(v))
        s.run(kf.global_variables_initializer())
        first = s.run(v)
        s.run(inc)
        np.testing.assert_allclose(first, [1, 2])  # a fetched value is not changed by later updates
        np.testing.assert_allclose(s.run(v), [2, 3])
        np.testing.assert_allclose(s.run(inc), [3, 4])
        v.load(np.array([7.0, 8.0], np.float32), s)
        np.testing.assert_allclose(v.eval(s), [7, 8])
    with kf.Session() as s2:  # state belongs to the session
        with pytest.raises(errors.FailedPreconditionError):
            s2.run(v + 0.0)


def test_assign_shape_validation(g):
    v = kf.Variable(np.zeros([2], np.float32), name="v")
    p = kf.placeholder(kf.float32, [None])
    a = kf.assign(v, p)
    with kf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match=r"lhs shape= \[2\] rhs shape= \[3\]"):
            s.run(a, {p: [1, 2, 3]})


def test_scatter_updates(g):
    v = kf.Variable(np.zeros([4, 2], np.float32), name="v")
    up = kf.scatter_update(v, [1, 3], np.ones([2, 2], np.float32))
    add = kf.scatter_add(v, [0, 0], np.ones([2, 2], np.float32))
    sub = kf.scatter_sub(v, [3], np.full([1, 2], 5.0, np.float32))
    bad = kf.scatter_update(v, [4], np.ones([1, 2], np.float32))
    with kf.Session() as s:
        s.run(v.initializer)
        s.run(up)
        s.run(add)
        np.testing.assert_allclose(s.run(sub), [[2, 2], [1, 1], [0, 0], [-4, -4]])
        with pytest.raises(errors.InvalidArgumentError, match=r"4 which is not in \[0, 4\)"):
            s.run(bad)


def test_concurrent_locked_assign_add(g):
    v = kf.Variable(0, dtype=kf.int64, name="counter")
    inc = kf.assign_add(v, kf.constant(1, kf.int64), use_locking=True)
    with kf.Session() as s:
        s.run(v.initializer)

        def worker():
            for _ in range(1000):
                s.run(inc.op)
        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert s.run(v) == 8000


def test_default_session_eval_and_run(g):
    x = kf.constant(3.0)
    v = kf.Variable(1.0)
    with kf.Session() as s:
        assert kf.get_default_session() is s
        v.initializer.run()
        assert x.eval() == 3.0
        assert v.eval() == 1.0
    assert kf.get_default_session() is None
    with pytest.raises(ValueError, match="No default session"):
        x.eval()


def test_interactive_session(g):
    x = kf.constant(2.0)
    sess = kf.InteractiveSession()
    try:
        assert x.eval() == 2.0
    finally:
        sess.close()


def test_make_callable(g):
    x = kf.placeholder(kf.float32, [], name="x")
    y = x + 1.0
    v = kf.Variable(0.0)
    inc = v.assign_add(1.0)
    with kf.Session() as s:
        s.run(v.initializer)
        f = s.make_callable([y, inc.op], feed_list=[x])
        assert f(1.0) == [2.0, None]
        assert f(5.0)[0] == 6.0
        assert s.run(v) == 2.0
        with pytest.raises(TypeError):
            f()


def test_make_callable_checks_feeds_like_run(g):
    x = kf.placeholder(kf.float32, [None, 3], name="x")
    n = kf.placeholder(kf.int64, [], name="n")
    y = kf.reduce_sum(x, axis=1) * kf.cast(n, kf.float32)
    with kf.Session() as s:
        f = s.make_callable({"y": y, "n": n}, feed_list=[x, n])
        out = f(np.ones((2, 3), np.float32), 2)          # a Python int converts to int64
        np.testing.assert_array_equal(out["y"], [6.0, 6.0])
        assert out["n"] == 2 and isinstance(out["n"], np.int64)
        out = f([[1, 2, 3]], np.int64(1))                # a nested list converts to float32
        np.testing.assert_array_equal(out["y"], [6.0])
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(2, 4\)"):
            f(np.ones((2, 4), np.float32), 1)
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            f(np.ones(3, np.float32), 1)
        x.set_shape([2, 3])                              # the feed check sees the new shape
        with pytest.raises(ValueError, match=r"Cannot feed value of shape \(1, 3\)"):
            f(np.ones((1, 3), np.float32), 1)
        np.testing.assert_array_equal(f(np.ones((2, 3), np.float32), 1)["y"], [3.0, 3.0])


def test_make_callable_with_options_and_after_close(g):
    x = kf.placeholder(kf.float32, [], name="x")
    y = x * 2.0
    s = kf.Session()
    f = s.make_callable(y, feed_list=[x], accept_options=True)
    meta = kf.RunMetadata()
    assert f(3.0, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE),
             run_metadata=meta) == 6.0
    assert len(meta.step_stats.dev_stats) > 0
    assert f(4.0) == 8.0
    s.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        f(1.0)


def test_closed_session(g):
    s = kf.Session()
    s.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        s.run(kf.constant(1.0))


def test_list_devices_and_device_count(g):
    with kf.Session(config=kf.ConfigProto(device_count={"CPU": 2, "GPU": 0})) as s:
        names = [d.name for d in s.list_devices()]
    assert names == ["/job:localhost/replica:0/task:0/device:CPU:0",
                     "/job:localhost/replica:0/task:0/device:CPU:1"]


def test_session_reset_clears_containers(g):
    v = kf.Variable(1.0)
    with kf.Session() as s:
        s.run(v.initializer)
        kf.Session.reset("")
        with pytest.raises(errors.FailedPreconditionError):
            s.run(v + 0.0)


def test_unknown_target_scheme(g):
    with pytest.raises(errors.NotFoundError, match=r"^Session target 'nope://somewhere': no session "
                                                   r"factory serves nope://; registered: '' \(embedded\)"):
        kf.Session("nope://somewhere")


def test_a_missing_grpc_session_factory_names_the_package_that_serves_it(g, monkeypatch):
    from kernflow.core.plugins import registries
    monkeypatch.delitem(registries().session_factories._items, "grpc", raising=False)
    hint = r"\(install kernflow-client: pip install kernflow-client\)"
    with pytest.raises(errors.NotFoundError, match=rf"'grpc://h:1': no session factory serves grpc:// {hint}"):
        kf.Session("grpc://h:1")


def test_fetch_plans_are_cached_by_structure_and_elements(g):
    a, b = kf.constant(1.0), kf.constant(2.0)
    v = kf.Variable(0.0)
    inc = v.assign_add(1.0)
    with kf.Session() as s:
        s.run(v.initializer)
        n = len(s._fetch_cache)
        for _ in range(3):   # a new list each step: one plan
            assert s.run([a, b]) == [1.0, 2.0]
        assert len(s._fetch_cache) == n + 1
        assert s.run((b, a)) == (2.0, 1.0)                      # another structure, another plan
        assert s.run({"x": [a, inc.op], "y": {"z": b}}) == {"x": [1.0, None], "y": {"z": 2.0}}
        assert s.run({"x": [a, inc.op], "y": {"z": b}}) == {"x": [1.0, None], "y": {"z": 2.0}}
        assert len(s._fetch_cache) == n + 3
        assert s.run(v) == 2.0                                  # the op ran on both cached runs
        assert s.run([inc, v]) == [3.0, 3.0]                    # Variables are cached too
        assert s.run([inc, v]) == [4.0, 4.0]
        assert s.run(["Const:0", b]) == [1.0, 2.0]              # and names
        assert s.run(["Const:0", b]) == [1.0, 2.0]
        assert len(s._fetch_cache) == n + 6


def test_a_name_that_does_not_resolve_is_not_cached(g):
    a = kf.constant(1.0, name="a")
    with kf.Session() as s:
        with pytest.raises(ValueError, match="later"):
            s.run([a, "later:0"])
        with g.as_default():
            kf.constant(5.0, name="later")
        assert s.run([a, "later:0"]) == [1.0, 5.0]


def test_a_cached_fetch_plan_still_refuses_a_loop_body_tensor(g):
    i = kf.constant(0)
    inside = []

    def body(x):
        inside.append(x + 1)
        return inside[-1]
    kf.while_loop(lambda x: x < 3, body, [i])
    with kf.Session() as s:
        for _ in range(2):
            with pytest.raises(ValueError, match="inside a while loop"):
                s.run([inside[0]])
            with pytest.raises(ValueError, match="inside a while loop"):
                s.run(inside[0])


def test_a_feed_checked_once_is_still_checked_every_run(g):
    x = kf.placeholder(kf.float32, [None, 2], name="x")
    y = kf.reduce_sum(x)
    with kf.Session() as s:
        assert s.run(y, {x: np.ones((3, 2), np.float32)}) == 6.0
        assert x in s._feed_cache                                   # remembered with its checker
        assert s.run(y, {x: [[1, 2]]}) == 3.0                       # converted, as the first time
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            s.run(y, {x: np.ones((3, 3), np.float32)})
        x.set_shape([3, 2])                                         # a refined shape is honoured
        with pytest.raises(ValueError, match="Cannot feed value of shape"):
            s.run(y, {x: np.ones((1, 2), np.float32)})
        with pytest.raises(TypeError, match="not compatible|Cannot convert"):
            s.run(y, {x: "text"})


def test_a_cached_structure_s_compiled_builder_gives_every_kind_of_result(g):
    a, b = kf.constant(1.0, name="a"), kf.constant(np.array([1, 2], np.int32), name="b")
    v = kf.Variable(3.0)
    inc = v.assign_add(1.0)
    fetches = {"x": [a, inc.op, ()], "y": (b,), "z": [], "w": {"q": [[a]], "a": a}, "v": v,
               "n": "a:0", "op_name": "NoOp", 7: b, "t": (a, a, b)}
    with g.as_default():
        kf.no_op(name="NoOp")
    with kf.Session() as s:
        s.run(v.initializer)
        for expected_v in (4.0, 5.0):   # the first run builds and caches the plan, the second reuses it
            out = s.run(fetches)
            assert set(out) == set(fetches)
            assert out["x"][0] == 1.0 and out["x"][1] is None and out["x"][2] == ()
            assert isinstance(out["y"], tuple) and out["y"][0].tolist() == [1, 2]
            assert out["z"] == [] and out["w"] == {"q": [[1.0]], "a": 1.0}
            assert out["v"] == expected_v and out["n"] == 1.0 and out["op_name"] is None
            assert out[7].tolist() == [1, 2] and out["t"][:2] == (1.0, 1.0)
        assert s._fetch_plan(fetches).build.__code__.co_filename == "<string>"   # generated code
        callable_ = s.make_callable(fetches)
        assert callable_()["v"] == 6.0 and callable_()["x"][1] is None


def test_a_structure_of_many_leaves_or_other_containers_is_built_by_the_closures(g):
    a, b = kf.constant(1.0), kf.constant(2.0)
    many = [[a, b] * 200, b]                     # past the compiled builder's leaf limit
    od = collections.OrderedDict([("b", b), ("a", a)])
    dd = collections.defaultdict(list, {"a": a})
    with kf.Session() as s:
        for _ in range(2):
            out = s.run(many)
            assert len(out[0]) == 400 and out[0][:2] == [1.0, 2.0] and out[1] == 2.0
            got = s.run([od, dd])
            assert type(got[0]) is collections.OrderedDict and list(got[0].items()) == [("b", 2.0), ("a", 1.0)]
            assert type(got[1]) is collections.defaultdict and got[1]["a"] == 1.0 and got[1]["x"] == []
        for structure in (many, [od, dd]):
            assert s._fetch_plan(structure).build.__code__.co_filename != "<string>"


def test_a_variable_reader_reads_the_current_buffer_without_a_step(g):
    step = kf.train.get_or_create_global_step()
    inc = kf.assign_add(step, 3)
    c = kf.constant(1.0, name="c")
    with kf.Session() as s:
        read = s._variable_reader(step.op.name)
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value global_step"):
            read()   # (its kernel has not run: no Var exists yet)
        s.run(step.initializer)
        assert int(read()) == 0
        s.run(inc)
        buf = read()
        assert int(buf) == 3 and buf.dtype == np.int64
        s.run(inc)
        assert int(read()) == 6 and int(buf) == 6   # the variable's own buffer, updated in place
        # Not a ref variable of the graph: no reader (the caller fetches instead).
        assert s._variable_reader(c.op.name) is None
        assert s._variable_reader("no_such_op") is None
        # A reset drops the Var: the reader finds the new one, uninitialized until assigned again.
        kf.Session.reset("")
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value global_step"):
            read()
        s.run(step.initializer)
        s.run(inc)
        assert int(read()) == 3
    assert s._variable_reader(step.op.name) is None   # closed


def test_no_variable_reader_for_a_variable_in_device_memory(g, monkeypatch):
    v = kf.Variable(1, dtype=kf.int64, name="v")
    with kf.Session() as s:
        s.run(v.initializer)
        assert s._variable_reader("v") is not None
        for d in s._impl.devices:   # (as a GPU's: its buffer would be a device array)
            monkeypatch.setattr(d, "has_device_memory", True, raising=False)
        assert s._variable_reader("v") is None

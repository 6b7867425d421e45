"""kf.test (TF1's tf.test): TestCase run through unittest inside each test (passes and failures
checked), and the module's helpers (benchmarks, stubs, graph-def comparison, decorators, main)."""

import io
import os
import platform
import sys
import types
import unittest

import numpy as np
import pytest
from absl import flags as absl_flags
from absl.testing import flagsaver

import kernflow.core as kf


def run_case(cls):
    """Runs the tests of TestCase class `cls`; returns {test name: "ok" | "skip" | failure text}."""
    result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(cls))
    outcome = {}
    for test in unittest.defaultTestLoader.getTestCaseNames(cls):
        outcome[test] = "ok"
    for test, text in result.failures + result.errors:
        outcome[test._testMethodName] = text
    for test, _ in result.skipped:
        outcome[test._testMethodName] = "skip"
    return outcome


def assert_outcomes(cls, ok=(), failing=None, skipped=()):
    """The tests of `cls` in `ok` passed, those in `skipped` (and test_session) were skipped, and
    each of `failing` failed with a report containing its text."""
    outcome = run_case(cls)
    failing = failing or {}
    assert outcome.pop("test_session") == "skip"   # the helper's name, collected and skipped as in TF
    assert set(outcome) == set(ok) | set(failing) | set(skipped), outcome
    bad = {t: outcome[t] for t in ok if outcome[t] != "ok"}
    bad.update({t: outcome[t] for t in skipped if outcome[t] != "skip"})
    assert not bad, bad
    for test, text in failing.items():
        assert text in outcome[test], (test, outcome[test])


# ------------------------------------------------------------------------------------- TestCase
def test_each_test_gets_a_fresh_default_graph_with_the_default_seed():
    seen = []

    class Case(kf.test.TestCase):
        def test_a(self):
            kf.constant(1.0)
            g = kf.get_default_graph()
            seen.append((g, len(g.get_operations()), g.seed))

        test_b = test_a

    class NoSeed(kf.test.TestCase):
        _set_default_seed = False

        def test_a(self):
            seen.append(kf.get_default_graph().seed)

    assert_outcomes(Case, ok=["test_a", "test_b"])
    assert_outcomes(NoSeed, ok=["test_a"])
    (g1, n1, s1), (g2, n2, s2), s3 = seen
    assert g1 is not g2 and n1 == n2 == 1 and s1 == s2 == 87654321 and s3 is None
    assert issubclass(kf.test.TestCase, unittest.TestCase)


def test_tf1_session_idioms():
    seen = {}

    class Case(kf.test.TestCase):
        def test_session_block(self):
            x = kf.constant([1.0, 2.0])
            with self.session() as sess:
                assert kf.get_default_session() is sess and sess.graph is kf.get_default_graph()
                self.assertAllClose(sess.run(x * 2.0), [2.0, 4.0])
                self.assertAllEqual((x + 1.0).eval(), [2.0, 3.0])
            seen["closed"] = sess

        def test_cached_and_test_session_are_one_session(self):
            with self.cached_session() as s1, self.test_session() as s2, self.cached_session() as s3:
                assert s1 is s2 is s3
            seen["cached"] = s1
            with self.assertRaisesRegex(ValueError, "graph used to get the cached session is different"):
                with self.cached_session(graph=kf.Graph()):
                    pass

        def test_evaluate_nested_and_variables(self):
            v = kf.Variable([1.0, 2.0])
            self.evaluate(kf.global_variables_initializer())
            got = self.evaluate({"v": v, "s": [kf.reduce_sum(v), (kf.constant(3),)]})
            self.assertAllClose(got, {"v": [1.0, 2.0], "s": [3.0, (3,)]})

        def test_use_gpu_false_pins_cpu(self):
            with self.session(use_gpu=False):
                self.assertDeviceEqual(kf.constant(1.0).device, "/cpu:0")

        def test_session_on_another_graph(self):
            g = kf.Graph()
            with g.as_default():
                c = kf.constant(5)
            with self.session(graph=g) as sess:
                assert kf.get_default_graph() is g and sess.run(c) == 5

    assert_outcomes(Case, ok=["test_session_block", "test_cached_and_test_session_are_one_session",
                              "test_evaluate_nested_and_variables", "test_use_gpu_false_pins_cpu",
                              "test_session_on_another_graph"])
    for sess in (seen["closed"], seen["cached"]):   # closed by the block / by tearDown
        with pytest.raises(RuntimeError, match="closed Session"):
            sess.run(kf.constant(1))


def test_array_assertions_pass():
    class Case(kf.test.TestCase):
        def test_all(self):
            x = kf.constant([[1.0, 2.0]])
            self.assertAllClose(x, [[1.0, 2.0 + 1e-7]])
            self.assertAllClose({"a": [x, 1.0]}, {"a": [np.array([[1.0, 2.0]]), 1.0]})
            self.assertAllClose([np.nan, 1.0], [np.nan, 1.0])
            self.assertNotAllClose([1.0], [1.1])
            self.assertAllCloseAccordingToType(np.float16([1.0]), np.float16([1.0005]))
            self.assertAllEqual(x, [[1.0, 2.0]])
            self.assertAllEqual([np.nan], [np.nan])
            self.assertAllEqual(kf.constant(["a", "b"]), [b"a", b"b"])
            self.assertNotAllEqual([1, 2], [1, 3])
            self.assertNear(1.0, 1.05, 0.1)
            self.assertArrayNear([1.0, 2.0], [1.01, 2.0], 0.02)
            self.assertNDArrayNear(np.ones(4), np.ones(4) + 0.01, 0.1)
            self.assertShapeEqual(np.zeros((2, 3)), kf.zeros([2, 3]))
            self.assertDeviceEqual("/cpu:0", "/device:CPU:0")
            self.assertAllInRange([0, 4], 0, 4)
            self.assertAllInSet([1, 2, 1], {1, 2})
            self.assertDTypeEqual(np.zeros(2, np.float32), kf.float32)
            self.assertAllGreater([2, 3], 1)
            self.assertAllGreaterEqual([2, 3], 2)
            self.assertAllLess([2, 3], 4)
            self.assertAllLessEqual([2, 3], 3)
            self.assertLen([1], 1)             # absltest's, as in TF's TestCase
            self.assertItemsEqual([1, 2], [2, 1])

    assert_outcomes(Case, ok=["test_all"])


def test_array_assertions_fail_with_tf_messages():
    class Case(kf.test.TestCase):
        def test_close_values(self):
            self.assertAllClose(1.0, 1.1)

        def test_close_shape(self):
            self.assertAllClose(np.ones(2), 1.0)

        def test_close_keys(self):
            self.assertAllClose({"a": 1}, {"b": 1})

        def test_close_tensor(self):
            self.assertAllClose(kf.constant([1.0, 2.0]), [1.0, 2.5])

        def test_according_to_type(self):
            self.assertAllCloseAccordingToType(np.float32([1.0]), np.float32([1.0005]))

        def test_equal(self):
            self.assertAllEqual([1, 2], [1, 3])

        def test_not_equal(self):
            self.assertNotAllEqual([1, 2], [1, 2])

        def test_near(self):
            self.assertNear(1.0, 1.2, 0.1)

        def test_array_near(self):
            self.assertArrayNear([1.0, 2.0], [1.0, 2.5], 0.1)

        def test_ndarray_near(self):
            self.assertNDArrayNear(np.ones(2), np.zeros(2), 0.1)

        def test_shape(self):
            self.assertShapeEqual(np.zeros((2, 3)), kf.zeros([3, 2]))

        def test_shape_type(self):
            self.assertShapeEqual([1], kf.zeros([1]))

        def test_device(self):
            self.assertDeviceEqual("/cpu:0", "/gpu:0")

        def test_range(self):
            self.assertAllInRange(np.array([1, 5]), 0, 4)

        def test_open_range(self):
            self.assertAllInRange([0.0, 1.0], 0.0, 1.0, open_lower_bound=True)

        def test_set(self):
            self.assertAllInSet([1, 7], {1})

        def test_greater(self):
            self.assertAllGreater([1, 2], 1)

        def test_less_equal(self):
            self.assertAllLessEqual([1, 2], 1)

    assert_outcomes(Case, failing={
        "test_close_values": "not close rhs = 1.1",
        "test_close_shape": "Shape mismatch: expected (2,), got ()",
        "test_close_keys": "mismatched keys",
        "test_close_tensor": "not close where = (array([1]),)",
        "test_according_to_type": "rtol=1e-06",
        "test_equal": "not equal lhs = [2]",
        "test_not_equal": "The two values are equal at all elements",
        "test_near": "1.000000 != 1.200000 +/- 0.100000",
        "test_array_near": "2.000000 != 2.500000 +/- 0.100000",
        "test_ndarray_near": "is not < 0.1",
        "test_shape": "Arrays are not equal",
        "test_shape_type": "TypeError: input_a must be a Numpy ndarray",
        "test_device": "Devices /device:CPU:0 and /device:GPU:0 are not equal",
        "test_range": "1 of the 2 element(s) are outside the range [0, 4]",
        "test_open_range": "outside the range (0.0, 1.0]",
        "test_set": "1 unique element(s) are not in the set {1}: [7]",
        "test_greater": "not greater than 1",
        "test_less_equal": "not less than or equal to 1",
    })


def test_proto_and_error_assertions():
    class Case(kf.test.TestCase):
        def test_proto_ok(self):
            node = kf.NodeDef(name="a", op="Const", input=["b", "^c"])
            self.assertProtoEquals('name: "a" op: "Const" input: "b" input: "^c"', node)
            self.assertProtoEquals(kf.NodeDef(name="a", op="Const", input=["b", "^c"]), node)

        def test_proto_differs(self):
            self.assertProtoEquals('name: "a" op: "Identity"', kf.NodeDef(name="a", op="Const"))

        def test_op_error_ok(self):
            p = kf.placeholder(kf.float32, name="p")
            with self.assertRaisesOpError("must feed a value"):
                self.evaluate(p + 1.0)
            with self.assertRaisesWithPredicateMatch(kf.errors.InvalidArgumentError,
                                                     lambda e: e.error_code == kf.errors.INVALID_ARGUMENT):
                self.evaluate(p)
            with self.assertRaisesWithPredicateMatch(ValueError, r"bad \d"):
                raise ValueError("bad 7")

        def test_op_error_not_raised(self):
            with self.assertRaisesOpError("x"):
                pass

        def test_op_error_wrong_message(self):
            with self.assertRaisesOpError("something else"):
                self.evaluate(kf.placeholder(kf.float32))

        def test_wrong_type(self):
            with self.assertRaisesWithPredicateMatch(TypeError, "x"):
                raise ValueError("x")

    assert_outcomes(Case, ok=["test_proto_ok", "test_op_error_ok"], failing={
        "test_proto_differs": '- op: "Identity"\n+ op: "Const"',
        "test_op_error_not_raised": "Exception of type <class 'AssertionError'>: OpError not raised",
        "test_op_error_wrong_message": "Exception of type <class 'kernflow.core.framework.errors."
                                       "InvalidArgumentError'>: You must feed a value",
        "test_wrong_type": "Exception of type <class 'ValueError'>: x",
    })


def test_checked_threads_and_temp_dirs():
    dirs = []

    class Case(kf.test.TestCase):
        def test_joined(self):
            box = []
            t = self.checkedThread(target=box.append, args=(3,))
            t.start()
            t.join()
            assert box == [3] and not t.is_alive()

        def test_raising(self):
            t = self.checkedThread(target=lambda: 1 / 0)
            t.start()
            t.join()

        def test_not_joined(self):
            self.checkedThread(target=lambda: None).start()

        def test_temp_dir_1(self):
            d = self.get_temp_dir()
            assert d == self.get_temp_dir() and os.path.isdir(d)
            dirs.append(d)

        test_temp_dir_2 = test_temp_dir_1

    assert_outcomes(Case, ok=["test_joined", "test_temp_dir_1", "test_temp_dir_2"], failing={
        "test_raising": "Error in checkedThread: division by zero",
        "test_not_joined": "A checked thread was not joined.",
    })
    assert dirs[0] != dirs[1] and all(os.path.dirname(d) == kf.test.get_temp_dir() for d in dirs)


def test_disable_with_predicate_and_with_eager_op_as_function():
    class Case(kf.test.TestCase):
        @kf.test.disable_with_predicate(lambda: True, "never here")
        def test_skipped(self):
            raise AssertionError("ran")

        @kf.test.disable_with_predicate(lambda: False, "runs")
        def test_runs(self):
            pass

    @kf.test.disable_with_predicate(lambda: True, "whole class")
    class Skipped(kf.test.TestCase):
        def test_a(self):
            raise AssertionError("ran")

    assert_outcomes(Case, ok=["test_runs"], skipped=["test_skipped"])
    assert_outcomes(Skipped, skipped=["test_a"])
    assert kf.test.with_eager_op_as_function(Case) is Case
    assert kf.test.with_eager_op_as_function(only_as_function=True)(Case) is Case


# ------------------------------------------------------------------------------------- module helpers
def test_build_and_platform_queries():
    assert kf.test.is_built_with_rocm() is False and kf.test.is_built_with_xla() is False
    assert kf.test.is_built_with_gpu_support() == kf.test.is_built_with_cuda()
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        assert kf.test.is_cpu_target_available("x86") and not kf.test.is_cpu_target_available("aarch64")
    assert not kf.test.is_cpu_target_available("no-such-cpu")
    assert os.path.isfile(os.path.join(kf.test.test_src_dir_path("core/ops"), "math_ops.py"))
    d = kf.test.get_temp_dir()
    assert d == kf.test.get_temp_dir() and os.path.isdir(d)
    assert kf.test.mock is unittest.mock and "TestCase" in kf.test.__all__
    assert isinstance(kf.test.benchmark_config(), kf.ConfigProto)


def test_stub_out_for_testing():
    class Base:
        inherited = "base"

        @staticmethod
        def static():
            return "static"

    class Child(Base):
        own = "own"

    with kf.test.StubOutForTesting() as stubs:
        stubs.Set(Child, "own", "stubbed")
        stubs.SmartSet(Child, "inherited", "child")
        stubs.SmartSet(Base, "static", lambda: "new")
        assert (Child.own, Child.inherited, Base.inherited, Child.static()) == \
            ("stubbed", "child", "base", "new")
        assert Child().static() == "new"                     # still a staticmethod
        with pytest.raises(AttributeError, match="missing"):
            stubs.Set(Child, "missing", 1)
    assert (Child.own, Child.inherited, Child.static()) == ("own", "base", "static")
    assert "inherited" not in vars(Child)


def _graph_def(build):
    g = kf.Graph()
    with g.as_default():
        build()
    return g.as_graph_def()


def test_assert_equal_graph_def():
    a = _graph_def(lambda: (kf.constant(1.0, name="a"), kf.constant(2.0, name="b")))
    b = _graph_def(lambda: (kf.constant(2.0, name="b"), kf.constant(1.0, name="a")))
    kf.test.assert_equal_graph_def(a, b)                   # node order does not matter

    def identity_on(device):
        x = kf.constant(1.0, name="a")
        with kf.device(device):
            kf.identity(x, name="b")

    cases = [
        (_graph_def(lambda: (kf.constant(1.0, name="a"), kf.constant(3.0, name="b"))),
         "Node named 'b' has attr 'value' with value: Tensor<type: float32 shape: [] values: [2.]> "
         "that does not match expected: Tensor<type: float32 shape: [] values: [3.]>"),
        (_graph_def(lambda: kf.constant(1.0, name="a")), "Found unexpected node '{{node b}} = Const["),
        (_graph_def(lambda: kf.identity(kf.constant(1.0, name="a"), name="b")),
         "Node named 'b' has op 'Const' that is not expected 'Identity'"),
    ]
    for expected, message in cases:
        with pytest.raises(AssertionError) as e:
            kf.test.assert_equal_graph_def(a, expected)
        assert message in str(e.value)
    with pytest.raises(AssertionError, match="Did not find expected node '{{node b}}"):
        kf.test.assert_equal_graph_def(_graph_def(lambda: kf.constant(1.0, name="a")), a)
    with pytest.raises(AssertionError, match="has device '/device:CPU:0' that is not expected ''"):
        kf.test.assert_equal_graph_def(_graph_def(lambda: identity_on("/cpu:0")),
                                       _graph_def(lambda: identity_on("")))
    with pytest.raises(TypeError, match="Expected tf.GraphDef for expected, got int"):
        kf.test.assert_equal_graph_def(a, 1)


def test_assert_equal_graph_def_ignores_v2_checkpoint_temp_names():
    def save_path(suffix):
        return lambda: kf.constant(f"_temp_{suffix * 32}/part", name="tmp")
    x, y = _graph_def(save_path("a")), _graph_def(save_path("b"))
    with pytest.raises(AssertionError, match="has attr 'value'"):
        kf.test.assert_equal_graph_def(x, y)
    kf.test.assert_equal_graph_def(x, y, checkpoint_v2=True)


# ------------------------------------------------------------------------------------- benchmarks, main
class _AddBenchmark(kf.test.Benchmark):
    ran = []

    def benchmarkAdd(self):
        g = kf.Graph()
        with g.as_default(), kf.Session(graph=g) as sess:
            result = self.run_op_benchmark(sess, kf.constant(2.0) * 3.0, burn_iters=1, min_iters=3,
                                           name="add", extras={"size": 1}, mbs=4)
        type(self).ran.append(result)

    def benchmarkReport(self):
        self.report_benchmark(iters=5, wall_time=0.5, extras={"k": 2.0, "s": "str"},
                              metrics=[{"name": "acc", "value": 0.9}])


def test_benchmark_reports_and_returns_timings(capsys):
    _AddBenchmark().benchmarkReport()
    assert capsys.readouterr().out == (
        'entry {\n  name: "_AddBenchmark.benchmarkReport"\n  iters: 5\n  wall_time: 0.5\n'
        '  extras {\n    key: "k"\n    value {\n      double_value: 2\n    }\n  }\n'
        '  extras {\n    key: "s"\n    value {\n      string_value: "str"\n    }\n  }\n'
        '  metrics {\n    name: "acc"\n    value: 0.9\n  }\n}\n\n')
    _AddBenchmark.ran.clear()
    _AddBenchmark().benchmarkAdd()
    (r,) = _AddBenchmark.ran
    assert r["iters"] == 3 and r["name"] == "add" and r["wall_time"] > 0
    assert r["throughput"] == pytest.approx(4 / r["wall_time"])
    assert set(r["extras"]) == {"size", "wall_time_mean", "wall_time_stdev"}
    assert 'name: "_AddBenchmark.add"' in capsys.readouterr().out
    assert kf.test.Benchmark.is_abstract() and not _AddBenchmark.is_abstract()
    assert _AddBenchmark().evaluate(kf.constant(2.0) + 1.0) == 3.0


def test_benchmark_report_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_REPORT_FILE_PREFIX", str(tmp_path / "bench_"))
    _AddBenchmark().report_benchmark(iters=1, wall_time=2.0, name="file/x")
    assert "wall_time: 2" in (tmp_path / "bench__AddBenchmark.file__x").read_text()


@pytest.fixture
def main_module(monkeypatch):
    """A fake __main__ module for kf.test.main, with argv and absl's parsed state put back."""
    module = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", module)
    was_parsed = absl_flags.FLAGS.is_parsed()
    with flagsaver.flagsaver():
        yield module
    if not was_parsed:
        absl_flags.FLAGS.unparse_flags()


def test_main_runs_the_main_module_s_tests(main_module, capsys):
    class Good(kf.test.TestCase):
        def test_ok(self):
            self.assertAllEqual(self.evaluate(kf.constant(1) + 1), 2)
    main_module.Good = Good
    with pytest.raises(SystemExit) as e:
        kf.test.main(argv=["prog"])
    assert e.value.code is False and "Ran 2 tests" in capsys.readouterr().err   # test_ok, test_session

    class Bad(kf.test.TestCase):
        def test_bad(self):
            self.assertAllEqual(1, 2)
    main_module.Bad = Bad
    with pytest.raises(SystemExit) as e:
        kf.test.main(argv=["prog", "--quiet"])
    assert e.value.code is True and "FAILED (failures=1" in capsys.readouterr().err


def test_main_with_benchmarks_flag_runs_matching_benchmarks(main_module, capsys):
    _AddBenchmark.ran.clear()
    with pytest.raises(SystemExit) as e:
        kf.test.main(argv=["prog", "--benchmarks=_AddBenchmark.benchmarkAdd"])
    assert e.value.code == 0 and len(_AddBenchmark.ran) == 1
    assert "benchmarkReport" not in capsys.readouterr().out


def test_create_local_cluster_runs_a_graph_across_its_tasks():
    from kernflow.core.testing.processes import have_distributed
    if not have_distributed():
        pytest.skip("kernflow-client/-master/-worker are not installed")
    workers, ps = kf.test.create_local_cluster(num_workers=1, num_ps=1)
    try:
        assert len(workers) == 1 and len(ps) == 1
        g = kf.Graph()
        with g.as_default():
            with kf.device("/job:ps/task:0"):
                v = kf.Variable([1.0, 2.0], name="v")
            with kf.device("/job:worker/task:0"):
                total = kf.reduce_sum(v * 2.0)
        with kf.Session(workers[0].target, graph=g) as sess:
            sess.run(v.initializer)
            assert sess.run(total) == 6.0
            assert sorted(d.name for d in sess.list_devices() if d.device_type == "CPU") == [
                "/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0"]
    finally:
        for server in workers + ps:
            server.stop()

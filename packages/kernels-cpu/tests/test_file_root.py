"""The file root (kernflow.core.runtime.file_root) and every CPU kernel that touches files under it.

With a root set, each kernel works on paths inside it (relative paths are taken relative to it) and
refuses, with InvalidArgumentError naming the op and the path, a path that climbs out with ``..``,
an absolute path elsewhere and a symbolic link pointing out, without creating anything outside.
Without a root nothing changes.
"""

import importlib
import os

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.ops import io_ops
from kernflow.core.runtime import file_root
from kernflow.core.train import checkpoint_format as cf
from kernflow.core.train.saver import Saver

D = kf.data


@pytest.fixture(autouse=True)
def _graph():
    with kf.Graph().as_default():
        yield


@pytest.fixture
def dirs(tmp_path):
    """(root, outside): the configured file root and a sibling directory outside it, each with a
    text file; ``root/escape`` is a symbolic link to `outside`. The root is removed afterwards."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    for d in (root, outside):
        (d / "a.txt").write_bytes(b"line1\nline2\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    file_root.configure(str(root))
    try:
        yield root, outside
    finally:
        file_root.configure(None)


def _refused(sess, fetch, op, path, feed=None):
    with pytest.raises(errors.InvalidArgumentError) as e:
        sess.run(fetch, feed)
    msg = str(e.value)
    assert op in msg and repr(str(path)) in msg and "is outside the file root" in msg, msg
    return msg


def _outside_paths(outside, name):
    """The three ways out: `..` from the root, an absolute path elsewhere, a link pointing out."""
    return [f"../outside/{name}", str(outside / name), f"escape/{name}"]


# ---------------------------------------------------------------------------- the module
def test_configure_root_and_bad_roots(tmp_path):
    assert file_root.root() is None
    file_root.configure(str(tmp_path))
    try:
        assert file_root.root() == os.path.realpath(tmp_path)
    finally:
        file_root.configure(None)
    assert file_root.root() is None
    for bad, why in ((str(tmp_path / "missing"), "is not an existing directory"),
                     ("", "expected a directory path"), ("a\0b", "expected a directory path"),
                     (42, "expected a directory path, got int")):
        with pytest.raises(errors.InvalidArgumentError, match=why):
            file_root.configure(bad)
        assert file_root.root() is None


def test_check_resolves_inside_and_refuses_the_ways_out(dirs):
    root, outside = dirs
    real = os.path.realpath(root)
    assert file_root.check("Op n", "ckpt/model", write=True) == os.path.join(real, "ckpt", "model")
    assert file_root.check("Op n", b"a.txt", write=False) == os.path.join(real, "a.txt")
    assert file_root.check("Op n", str(root / "x" / ".." / "y"), write=True) == os.path.join(real, "y")
    assert file_root.check("Op n", "file://" + str(root / "a.txt"), write=False) == \
        os.path.join(real, "a.txt")
    assert file_root.check("Op n", str(root) + "/", write=True) == real + os.sep   # ROOT/.index
    (root / "inner").symlink_to(root / "a.txt")
    assert file_root.check("Op n", "inner", write=False) == os.path.join(real, "inner")
    (root / "out.txt").symlink_to(outside / "a.txt")
    for path in [*_outside_paths(outside, "m"), "out.txt", "file://" + str(outside / "a.txt"),
                 str(root), "sub/../../outside/m"]:
        with pytest.raises(errors.InvalidArgumentError) as e:
            file_root.check("SaveV2 node s", path, write=True)
        assert str(e.value).startswith(f"SaveV2 node s: {path!r} (resolved to ")
        assert f"is outside the file root {real}: writing it is refused" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError, match="'a\\\\x00b' holds a NUL byte"):
        file_root.check("ReadFile n", "a\0b", write=False)
    with pytest.raises(errors.InvalidArgumentError, match="is a gs:// URL: only local paths"):
        file_root.check("ReadFile n", "gs://bucket/a", write=False)
    assert file_root.check_all("Op n", np.array([[b"a"], [b"b"]], dtype=object), write=False) == \
        [os.path.join(real, "a"), os.path.join(real, "b")]


def test_without_a_root_paths_are_unchanged(tmp_path):
    assert file_root.check("Op n", "../x", write=True) == "../x"
    assert file_root.check("Op n", b"/etc/x", write=False) == "/etc/x"
    assert file_root.check_all("Op n", [b"../a", "b"], write=False) == ["../a", "b"]
    (tmp_path / "f1").write_text("")
    assert file_root.matching_files("Op n", str(tmp_path / "f*")) == [str(tmp_path / "f1")]


def test_the_environment_variable_sets_the_root_and_a_bad_one_refuses_everything(tmp_path, monkeypatch):
    try:
        monkeypatch.setenv(file_root.ENV, str(tmp_path))
        importlib.reload(file_root)
        assert file_root.root() == os.path.realpath(tmp_path)
        monkeypatch.setenv(file_root.ENV, str(tmp_path / "missing"))
        importlib.reload(file_root)
        with pytest.raises(errors.InvalidArgumentError, match="KERNFLOW_FILE_ROOT=.* cannot be used as the "
                                                              "file root .* every file access is refused"):
            file_root.check("ReadFile n", "a", write=False)
        monkeypatch.delenv(file_root.ENV)
        importlib.reload(file_root)
        assert file_root.root() is None
    finally:
        file_root.configure(None)


def test_matching_files_checks_the_pattern_and_every_match(dirs):
    root, outside = dirs
    real = os.path.realpath(root)
    (root / "d").mkdir()
    (root / "d" / "b.txt").write_text("")
    # escape/a.txt matches too, but lies outside: left out
    assert file_root.matching_files("M", "*/*.txt") == [os.path.join(real, "d", "b.txt")]
    assert file_root.matching_files("M", str(root / "d" / "b.txt")) == [os.path.join(real, "d", "b.txt")]
    assert file_root.matching_files("M", "d/none*") == []
    for pattern in ["../outside/*", str(outside / "*"), "escape/*", "d/*/../../../outside/*"]:
        with pytest.raises(errors.InvalidArgumentError, match="is outside the file root"):
            file_root.matching_files("MatchingFiles n", pattern)


def test_matching_files_under_a_root_whose_name_has_wildcards(tmp_path):
    root = tmp_path / "r[1]*"
    root.mkdir()
    (root / "x.txt").write_text("")
    file_root.configure(str(root))
    try:
        assert file_root.matching_files("M", "*.txt") == [os.path.join(os.path.realpath(root), "x.txt")]
    finally:
        file_root.configure(None)


# ---------------------------------------------------------------------------- checkpoints
def _variables():
    v = kf.Variable(np.arange(4, dtype=np.float32), name="v")
    w = kf.Variable(np.int64(7), name="w")
    return v, w


@pytest.mark.parametrize("sharded", [False, True])
def test_saver_round_trip_inside_the_root(dirs, monkeypatch, sharded):
    root, _ = dirs
    monkeypatch.chdir(root)          # (the client's own check that a checkpoint exists: same files)
    v, w = _variables()
    saver = Saver(sharded=sharded)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        for prefix in ("ckpt/model", str(root / "abs" / "model")):
            assert saver.save(sess, prefix) == prefix
            assert cf.bundle_exists(os.path.join(root, prefix))
            sess.run([v.assign(v * 0), w.assign(0)])
            saver.restore(sess, prefix)
            assert sess.run(v).tolist() == [0, 1, 2, 3] and sess.run(w) == 7
    assert {"model.data-00000-of-00001", "model.index"} <= {p.name for p in (root / "ckpt").iterdir()}


def test_save_v2_refuses_every_way_out_and_creates_nothing(dirs):
    root, outside = dirs
    x = kf.constant([1.0, 2.0])
    prefix = kf.placeholder(kf.string, [])
    save = io_ops.save_v2(prefix, ["x"], [""], [x], name="save")
    before = sorted(os.listdir(outside))
    with kf.Session() as sess:
        for path in _outside_paths(outside, "new/model"):
            _refused(sess, save, "SaveV2 save", path, {prefix: path})
    assert sorted(os.listdir(outside)) == before


def test_restore_v2_refuses_checkpoints_outside_and_links_to_their_files(dirs):
    root, outside = dirs
    file_root.configure(None)
    cf.write_bundle(str(outside / "theirs"), {"x": np.ones(2, np.float32)})
    file_root.configure(str(root))
    # a checkpoint inside whose index, or data file, links to the one outside
    os.symlink(outside / "theirs.index", root / "linked.index")
    cf.write_bundle(str(root / "mine"), {"x": np.ones(2, np.float32)})
    os.replace(root / "mine.data-00000-of-00001", root / "kept")
    os.symlink(outside / "theirs.data-00000-of-00001", root / "mine.data-00000-of-00001")
    prefix = kf.placeholder(kf.string, [])
    (restore,) = io_ops.restore_v2(prefix, ["x"], [""], [kf.float32], name="restore")
    with kf.Session() as sess:
        for path in _outside_paths(outside, "theirs"):
            _refused(sess, restore, "RestoreV2 restore", path, {prefix: path})
        real = os.path.realpath(root)
        msg = _refused(sess, restore, "RestoreV2 restore", os.path.join(real, "linked.index"),
                       {prefix: "linked"})
        assert f"resolved to {os.path.realpath(outside / 'theirs.index')})" in msg
        _refused(sess, restore, "RestoreV2 restore", os.path.join(real, "mine.data-00000-of-00001"),
                 {prefix: "mine"})
    assert cf.bundle_exists(str(outside / "theirs"))


def test_merge_v2_refuses_sources_and_destinations_outside(dirs):
    root, outside = dirs
    file_root.configure(None)
    cf.write_bundle(str(outside / "theirs"), {"x": np.ones(2, np.float32)})
    file_root.configure(str(root))
    cf.write_bundle(str(root / "part"), {"y": np.ones(2, np.float32)})
    src, dest = kf.placeholder(kf.string, [None]), kf.placeholder(kf.string, [])
    merge = io_ops.merge_v2_checkpoints(src, dest, name="merge")
    with kf.Session() as sess:
        for path in _outside_paths(outside, "theirs"):
            _refused(sess, merge, "MergeV2Checkpoints merge", path, {src: ["part", path], dest: "all"})
        for path in _outside_paths(outside, "stolen"):
            _refused(sess, merge, "MergeV2Checkpoints merge", path, {src: ["part"], dest: path})
        assert cf.bundle_exists(str(outside / "theirs")) and cf.bundle_exists(str(root / "part"))
        sess.run(merge, {src: ["part"], dest: "sub/all"})   # inside: works
    assert cf.BundleReader(str(root / "sub" / "all")).keys() == ["y"]
    assert sorted(os.listdir(outside)) == ["a.txt", "theirs.data-00000-of-00001", "theirs.index"]


def test_checkpoint_cleanup_stays_inside_the_root(dirs):
    root, outside = dirs
    dead = f"{cf.TEMP_MARKER}-{cf._HOST}-{2 ** 23 + 1}-00"    # a temporary file of a dead writer
    (outside / f"m.index{dead}").write_bytes(b"")
    (root / f"m.index{dead}").write_bytes(b"")
    x = kf.constant([1.0])
    prefix = kf.placeholder(kf.string, [])
    save = io_ops.save_v2(prefix, ["x"], [""], [x], name="save")
    with kf.Session() as sess:
        _refused(sess, save, "SaveV2 save", "../outside/m", {prefix: "../outside/m"})
        sess.run(save, {prefix: "m"})
    assert (outside / f"m.index{dead}").exists()
    assert not (root / f"m.index{dead}").exists() and cf.bundle_exists(str(root / "m"))


# ---------------------------------------------------------------------------- files
def test_read_and_write_file(dirs):
    root, outside = dirs
    name = kf.placeholder(kf.string, [])
    read, write = kf.read_file(name, name="read"), kf.write_file(name, "hi", name="write")
    with kf.Session() as sess:
        sess.run(write, {name: "new/w.txt"})
        assert (root / "new" / "w.txt").read_bytes() == b"hi"
        assert sess.run(read, {name: "new/w.txt"}) == b"hi"
        for path in _outside_paths(outside, "a.txt"):
            _refused(sess, read, "ReadFile node read", path, {name: path})
        for path in _outside_paths(outside, "sub/w.txt"):
            _refused(sess, write, "WriteFile node write", path, {name: path})
    assert sorted(os.listdir(outside)) == ["a.txt"]


def test_matching_files_kernel(dirs):
    root, outside = dirs
    pattern = kf.placeholder(kf.string, [None])
    match = kf.io.matching_files(pattern, name="match")
    with kf.Session() as sess:
        assert sess.run(match, {pattern: ["*.txt"]}).tolist() == \
            [os.path.join(os.path.realpath(root), "a.txt").encode()]
        for path in _outside_paths(outside, "*.txt") + ["d/*/../../../outside/*"]:
            _refused(sess, match, "MatchingFiles match", path, {pattern: ["*.txt", path]})


@pytest.mark.parametrize("make, kind", [
    (lambda: kf.TextLineReader(), "TextLineReader"), (lambda: kf.TFRecordReader(), "TFRecordReader"),
    (lambda: kf.WholeFileReader(), "WholeFileReader"),
    (lambda: kf.FixedLengthRecordReader(record_bytes=2), "FixedLengthRecordReader")])
def test_readers_refuse_work_units_outside(dirs, make, kind):
    root, outside = dirs
    q = kf.FIFOQueue(10, kf.string)
    name = kf.placeholder(kf.string, [])
    enqueue = q.enqueue([name])
    key, value = make().read(q)
    with kf.Session() as sess:
        with kf.python_io.TFRecordWriter(str(root / "r.tfr")) as w:
            w.write(b"rec")
        sess.run(enqueue, {name: "r.tfr" if kind == "TFRecordReader" else "a.txt"})   # inside: read
        if kind == "TFRecordReader":
            assert sess.run(value) == b"rec"
        elif kind == "TextLineReader":
            assert [sess.run(value), sess.run(value)] == [b"line1", b"line2"]
        elif kind == "WholeFileReader":
            assert sess.run(value) == b"line1\nline2\n"
        elif kind == "FixedLengthRecordReader":
            assert [sess.run(value) for _ in range(6)] == [b"li", b"ne", b"1\n", b"li", b"ne", b"2\n"]
        for path in _outside_paths(outside, "a.txt"):
            sess.run(enqueue, {name: path})
            _refused(sess, value, kind, path)


@pytest.mark.parametrize("make, op", [
    (lambda n: D.TextLineDataset(n), "TextLineDataset"), (lambda n: D.TFRecordDataset(n), "TFRecordDataset"),
    (lambda n: D.FixedLengthRecordDataset(n, 2), "FixedLengthRecordDataset")])
def test_file_datasets_refuse_files_outside(dirs, make, op):
    root, outside = dirs
    names = kf.placeholder(kf.string, [None])
    it = make(names).make_initializable_iterator()
    with kf.Session() as sess:
        for path in _outside_paths(outside, "a.txt"):
            _refused(sess, it.initializer, op, path, {names: ["a.txt", path]})


def test_cache_dataset_files_stay_inside(dirs):
    root, outside = dirs
    filename = kf.placeholder(kf.string, [])
    it = D.Dataset.range(3).cache(filename).make_initializable_iterator()
    nxt = it.get_next()
    with kf.Session() as sess:
        sess.run(it.initializer, {filename: "c"})
        assert [sess.run(nxt) for _ in range(3)] == [0, 1, 2]
        with pytest.raises(errors.OutOfRangeError):
            sess.run(nxt)
        assert (root / "c.index").exists()
        for path in _outside_paths(outside, "c"):
            _refused(sess, it.initializer, "CacheDataset", path, {filename: path})
    assert sorted(os.listdir(outside)) == ["a.txt"]


def test_text_file_table_initializer_refuses_files_outside(dirs):
    root, outside = dirs
    from kernflow.core import lookup as L
    for path in _outside_paths(outside, "a.txt"):
        table = L.StaticHashTable(L.TextFileInitializer(path, kf.string, L.TextFileIndex.WHOLE_LINE,
                                                        kf.int64, L.TextFileIndex.LINE_NUMBER), -1)
        with kf.Session() as sess:
            _refused(sess, table.initializer, "InitializeTableFromTextFileV2", path)
    inside = L.StaticHashTable(L.TextFileInitializer("a.txt", kf.string, L.TextFileIndex.WHOLE_LINE,
                                                     kf.int64, L.TextFileIndex.LINE_NUMBER), -1)
    with kf.Session() as sess:
        sess.run(inside.initializer)
        assert sess.run(inside.lookup(kf.constant(["line2"]))).tolist() == [1]


def test_fixed_unigram_sampler_vocab_file_outside(dirs):
    root, outside = dirs
    (outside / "v.csv").write_text("a,1\nb,2\n")
    (root / "v.csv").write_text("a,1\nb,2\n")
    true = np.array([[0]], np.int64)
    ok = kf.nn.fixed_unigram_candidate_sampler(true, 1, 2, False, 2, vocab_file="v.csv", seed=1)
    with kf.Session() as sess:
        assert sess.run(ok[0]).shape == (2,)
    for path in _outside_paths(outside, "v.csv"):
        s = kf.nn.fixed_unigram_candidate_sampler(true, 1, 2, False, 2, vocab_file=path, seed=1)
        with kf.Session() as sess:
            _refused(sess, s[0], "FixedUnigramCandidateSampler", path)


def test_print_v2_to_a_file_outside(dirs):
    root, outside = dirs
    ok = kf.print("x", output_stream="file://log.txt")
    with kf.Session() as sess:
        sess.run(ok)
    assert (root / "log.txt").read_text() == "x\n"
    for path in _outside_paths(outside, "log.txt"):
        with kf.Session() as sess:
            _refused(sess, kf.print("x", output_stream="file://" + path, name="p"), "PrintV2 node p",
                     path)
    assert sorted(os.listdir(outside)) == ["a.txt"]


def test_without_a_root_kernels_use_paths_as_given(tmp_path, monkeypatch):
    work, other = tmp_path / "work", tmp_path / "other"
    work.mkdir()
    monkeypatch.chdir(work)
    v, w = _variables()
    saver = Saver()
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        assert saver.save(sess, "../other/model") == "../other/model"
        saver.restore(sess, "../other/model")
        sess.run(kf.write_file("../other/f.txt", "z"))
        assert sess.run(kf.read_file(str(other / "f.txt"))) == b"z"
        assert sess.run(kf.io.matching_files("../other/*.txt")).tolist() == [b"../other/f.txt"]
    assert cf.bundle_exists(str(other / "model"))

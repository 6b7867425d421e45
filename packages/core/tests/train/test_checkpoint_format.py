"""The checkpoint file format: round trips, the documented layout, atomicity and corruption."""

import os
import struct
import time

import google_crc32c
import numpy as np
import pytest

from kernflow.core.framework import errors
from kernflow.core.protobuf import saver_pb2
from kernflow.core.train import checkpoint_format as cf


def _values():
    r = np.random.RandomState(0)
    return {
        "f32": r.randn(3, 5).astype(np.float32),
        "f64": r.randn(7).astype(np.float64),
        "f16": r.randn(2, 2).astype(np.float16),
        "i8": np.array([-128, 0, 127], np.int8),
        "i16": np.array([[-3, 4]], np.int16),
        "i32": np.int32(-17),
        "i64": np.array([2 ** 62, -(2 ** 40)], np.int64),
        "u8": np.arange(256, dtype=np.uint8),
        "u16": np.array([65535], np.uint16),
        "u32": np.array([2 ** 32 - 1], np.uint32),
        "u64": np.array([2 ** 64 - 1], np.uint64),
        "bool": np.array([[True, False, True]]),
        "c64": np.array([1 + 2j, -3.5j], np.complex64),
        "c128": np.array([[1e300 + 1j]], np.complex128),
        "str": np.array([[b"alpha", b""], ["\u00e9t\u00e9".encode(), b"\x00\xff"]], dtype=object),
        "str_scalar": np.array(b"just one", dtype=object),
        "empty": np.zeros((0, 4), np.float32),
        "empty_str": np.array([], dtype=object),
        "scope/with/slashes": np.ones((1, 1, 1), np.float32),
    }


def test_round_trip_every_dtype(tmp_path):
    prefix = str(tmp_path / "model")
    vals = _values()
    cf.write_bundle(prefix, vals)
    r = cf.BundleReader(prefix)
    assert r.keys() == sorted(vals)
    for name, v in vals.items():
        got = r.read(name)
        v = np.asarray(v)
        assert got.shape == v.shape, name
        if v.dtype == object:
            assert got.dtype == object
            assert got.reshape(-1).tolist() == v.reshape(-1).tolist(), name
        else:
            assert got.dtype == v.dtype, name
            np.testing.assert_array_equal(got, v, err_msg=name)
        assert r.shape(name) == list(v.shape)


def test_files_and_no_leftover_temporaries(tmp_path):
    prefix = str(tmp_path / "sub" / "model")  # the directory is created
    cf.write_bundle(prefix, {"a": np.ones(3)})
    assert sorted(os.listdir(tmp_path / "sub")) == ["model.data-00000-of-00001", "model.index"]
    assert cf.bundle_exists(prefix)


def test_documented_layout_can_be_read_by_hand(tmp_path):
    """Decodes a checkpoint following docs/checkpoint_format.md only (no reader code)."""
    prefix = str(tmp_path / "m")
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    s = np.array([b"ab", b"cde"], dtype=object)
    cf.write_bundle(prefix, {"w": w, "s": s})
    data = open(prefix + ".index", "rb").read()
    magic, version, flags, n = struct.unpack_from("<8sIIQ", data)
    assert (magic, version, flags) == (b"KFCKPTIX", 1, 0)
    assert len(data) == 24 + n + 4
    (crc,) = struct.unpack_from("<I", data, 24 + n)
    assert crc == google_crc32c.value(data[:24 + n])
    idx = saver_pb2.BundleIndex.FromString(data[24:24 + n])
    assert idx.header.num_shards == 1 and idx.header.version == 1
    assert [e.name for e in idx.entries] == ["s", "w"]
    blob = open(prefix + ".data-00000-of-00001", "rb").read()
    assert blob[:8] == b"KFCKPTDT" and struct.unpack_from("<I", blob, 8)[0] == 1
    assert blob[16:32] == idx.header.data_file_ids[0]
    for e in idx.entries:
        assert e.offset % 64 == 0 and e.offset >= 64
        raw = blob[e.offset:e.offset + e.size]
        assert google_crc32c.value(raw) == e.crc32c
    ew = idx.entries[1]
    assert ew.dtype == 1 and [d.size for d in ew.shape.dim] == [3, 4]
    np.testing.assert_array_equal(np.frombuffer(blob[ew.offset:ew.offset + ew.size], "<f4").reshape(3, 4), w)
    es = idx.entries[0]
    raw = blob[es.offset:es.offset + es.size]
    assert struct.unpack_from("<2Q", raw) == (2, 3) and raw[16:] == b"abcde"


def test_big_endian_and_noncontiguous_inputs_are_stored_little_endian(tmp_path):
    prefix = str(tmp_path / "m")
    be = np.arange(6, dtype=">i4").reshape(2, 3)
    strided = np.arange(20, dtype=np.float64)[::3]
    fortran = np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3))
    cf.write_bundle(prefix, {"be": be, "strided": strided, "fortran": fortran})
    r = cf.BundleReader(prefix)
    e = r.entry("be")
    blob = open(prefix + ".data-00000-of-00001", "rb").read()
    assert blob[e.offset:e.offset + e.size] == be.astype("<i4").tobytes()
    got = r.read("be")
    assert got.dtype == np.int32 and got.dtype.isnative
    np.testing.assert_array_equal(got, be)
    np.testing.assert_array_equal(r.read("strided"), strided)
    np.testing.assert_array_equal(r.read("fortran"), fortran)


def test_missing_checkpoint_is_not_found(tmp_path):
    with pytest.raises(errors.NotFoundError, match="Failed to find any matching files for .*nothere"):
        cf.BundleReader(str(tmp_path / "nothere"))


def test_missing_key_and_dtype_mismatch(tmp_path):
    prefix = str(tmp_path / "m")
    cf.write_bundle(prefix, {"w": np.ones(2, np.float32)})
    r = cf.BundleReader(prefix)
    with pytest.raises(errors.NotFoundError, match="Key v not found in checkpoint"):
        r.read("v")
    with pytest.raises(errors.InvalidArgumentError, match="expected dtype float64 does not equal "
                                                          "original dtype float32"):
        r.read("w", np.float64)


def _corrupt(path, offset, xor=0x01):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ xor]))


def test_flipped_data_byte_names_the_tensor(tmp_path):
    prefix = str(tmp_path / "m")
    cf.write_bundle(prefix, {"w": np.arange(100, dtype=np.float32), "b": np.ones(3)})
    r = cf.BundleReader(prefix)
    e = r.entry("w")
    _corrupt(prefix + ".data-00000-of-00001", e.offset + 17)
    np.testing.assert_array_equal(cf.BundleReader(prefix).read("b"), np.ones(3))
    with pytest.raises(errors.DataLossError) as ei:
        cf.BundleReader(prefix).read("w")
    msg = str(ei.value)
    assert "Checksum does not match for tensor 'w'" in msg
    assert f"stored 0x{e.crc32c:08x}, computed 0x" in msg
    assert "m.data-00000-of-00001" in msg


def test_truncated_data_file(tmp_path):
    prefix = str(tmp_path / "m")
    cf.write_bundle(prefix, {"a": np.ones(10), "z": np.arange(1000, dtype=np.int64)})
    path = prefix + ".data-00000-of-00001"
    os.truncate(path, os.path.getsize(path) - 100)
    r = cf.BundleReader(prefix)
    np.testing.assert_array_equal(r.read("a"), np.ones(10))
    with pytest.raises(errors.DataLossError, match=r"is truncated: tensor 'z' needs bytes"):
        r.read("z")
    os.truncate(path, 10)
    with pytest.raises(errors.DataLossError, match="bad header .*tensor 'a'"):
        cf.BundleReader(prefix).read("a")


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty"])
def test_damaged_index(tmp_path, damage):
    prefix = str(tmp_path / "m")
    cf.write_bundle(prefix, {"w": np.ones(4)})
    path = prefix + ".index"
    size = os.path.getsize(path)
    if damage == "truncate":
        os.truncate(path, size - 3)
        pattern = "truncated"
    elif damage == "flip":
        _corrupt(path, 30)
        pattern = "checksum stored 0x"
    elif damage == "magic":
        _corrupt(path, 0)
        pattern = "bad magic"
    else:
        os.truncate(path, 0)
        pattern = "shorter than"
    with pytest.raises(errors.DataLossError, match=f"Index file .*m.index is corrupted: .*{pattern}"):
        cf.BundleReader(prefix)


def test_data_file_from_another_save_is_detected(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    cf.write_bundle(a, {"w": np.ones(4)})
    cf.write_bundle(b, {"w": np.ones(4)})  # same bytes, same offsets and checksums
    os.replace(b + ".data-00000-of-00001", a + ".data-00000-of-00001")
    with pytest.raises(errors.DataLossError, match="does not belong to the index"):
        cf.BundleReader(a).read("w")


def test_overwrite_replaces_values(tmp_path):
    prefix = str(tmp_path / "m")
    cf.write_bundle(prefix, {"w": np.zeros(3), "old": np.ones(1)})
    cf.write_bundle(prefix, {"w": np.full(3, 7.0)})
    r = cf.BundleReader(prefix)
    assert r.keys() == ["w"]
    np.testing.assert_array_equal(r.read("w"), np.full(3, 7.0))


def test_failure_before_index_rename_leaves_no_checkpoint(tmp_path, monkeypatch):
    prefix = str(tmp_path / "m")
    real = os.replace

    def failing(src, dst):
        if dst.endswith(".index"):
            raise OSError(28, "No space left on device", dst)
        return real(src, dst)

    monkeypatch.setattr(cf.os, "replace", failing)
    with pytest.raises(errors.ResourceExhaustedError, match="No space left"):
        cf.write_bundle(prefix, {"w": np.ones(3)})
    assert not cf.bundle_exists(prefix)
    assert not any(cf.TEMP_MARKER in n for n in os.listdir(tmp_path))


def test_writer_errors(tmp_path):
    prefix = str(tmp_path / "m")
    with cf.BundleWriter(prefix) as w:
        w.add("a", np.ones(2))
        with pytest.raises(errors.InvalidArgumentError, match="Adding duplicate key: a"):
            w.add("a", np.ones(2))
        with pytest.raises(errors.InvalidArgumentError, match="non-empty"):
            w.add("", np.ones(2))
    # Leaving the block without finish() discards everything.
    assert os.listdir(tmp_path) == []
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.raises(errors.OpError, match="Failed to create checkpoint"):
        cf.BundleWriter(str(blocker / "m"))


def test_merge_bundles(tmp_path):
    p0, p1 = str(tmp_path / "m-00000-of-00002"), str(tmp_path / "m-00001-of-00002")
    cf.write_bundle(p0, {"a": np.arange(3), "c": np.array([b"x"], dtype=object)})
    cf.write_bundle(p1, {"b": np.ones((2, 2), np.float32)})
    dest = str(tmp_path / "m")
    cf.merge_bundles([p0, p1], dest)
    assert sorted(os.listdir(tmp_path)) == ["m.data-00000-of-00002", "m.data-00001-of-00002",
                                            "m.index"]
    r = cf.BundleReader(dest)
    assert r.num_shards == 2 and r.keys() == ["a", "b", "c"]
    np.testing.assert_array_equal(r.read("a"), np.arange(3))
    np.testing.assert_array_equal(r.read("b"), np.ones((2, 2), np.float32))
    assert r.read("c").tolist() == [b"x"]
    cf.write_bundle(p0, {"a": np.arange(3)})
    cf.write_bundle(p1, {"a": np.arange(3)})
    with pytest.raises(errors.InvalidArgumentError, match="duplicate tensor 'a'"):
        cf.merge_bundles([p0, p1], str(tmp_path / "n"))
    with pytest.raises(errors.NotFoundError):
        cf.merge_bundles([str(tmp_path / "missing")], str(tmp_path / "n"))


def test_delete_bundle_and_atomic_write(tmp_path):
    prefix = str(tmp_path / "m")
    cf.write_bundle(prefix, {"a": np.ones(1)})
    cf.delete_bundle(prefix)
    assert os.listdir(tmp_path) == []
    target = tmp_path / "state"
    cf.atomic_write_bytes(target, b"one")
    cf.atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two" and os.listdir(tmp_path) == ["state"]


def test_large_tensor_round_trip_is_io_bound(tmp_path):
    prefix = str(tmp_path / "big")
    big = np.random.RandomState(1).rand(8 << 20)  # 64 MiB of float64
    t0 = time.perf_counter()
    cf.write_bundle(prefix, {"big": big})
    got = cf.BundleReader(prefix).read("big")
    elapsed = time.perf_counter() - t0
    np.testing.assert_array_equal(got, big)
    # Whole-buffer writes and checksums: far below what per-element Python work would take.
    assert elapsed < 10, f"64 MiB round trip took {elapsed:.1f}s"

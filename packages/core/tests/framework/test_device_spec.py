"""Tests for kernflow.core.framework.device_spec."""

import pytest

from kernflow.core.framework import device_spec as ds
from kernflow.core.framework.device_spec import DeviceSpec


@pytest.mark.parametrize("spec,fields,canonical", [
    ("/job:ps/replica:0/task:1/device:GPU:0",
     ("ps", 0, 1, "GPU", 0), "/job:ps/replica:0/task:1/device:GPU:0"),
    ("/cpu:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("/gpu:1", (None, None, None, "GPU", 1), "/device:GPU:1"),
    ("/device:CPU:*", (None, None, None, "CPU", None), "/device:CPU:*"),
    ("/job:worker", ("worker", None, None, None, None), "/job:worker"),
    ("CPU:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("", (None, None, None, None, None), ""),
    ("/device:cpu:3", (None, None, None, "CPU", 3), "/device:CPU:3"),
    ("/GPU", (None, None, None, "GPU", None), "/device:GPU:*"),
    ("/task:2/job:w", ("w", None, 2, None, None), "/job:w/task:2"),
    ("/job:localhost/replica:0/task:0/cpu:0",
     ("localhost", 0, 0, "CPU", 0),
     "/job:localhost/replica:0/task:0/device:CPU:0"),
    ("/device:XLA_CPU:1", (None, None, None, "XLA_CPU", 1),
     "/device:XLA_CPU:1"),
])
def test_from_string(spec, fields, canonical):
    d = DeviceSpec.from_string(spec)
    assert (d.job, d.replica, d.task, d.device_type,
            d.device_index) == fields
    assert d.to_string() == canonical
    assert str(d) == canonical
    assert ds.canonical_name(spec) == canonical
    assert DeviceSpec.from_string(canonical) == d


@pytest.mark.parametrize("bad", [
    "/job:ps/bogus:1", "/task:x", "/replica:-1", "/device:CPU:x",
    "/cpu:0/gpu:0", "/device:CPU:0/cpu:1", "/job:", "foo", "/job:a:b",
    "/device:CPU",
])
def test_from_string_errors(bad):
    with pytest.raises(ValueError) as info:
        DeviceSpec.from_string(bad)
    assert repr(bad) in str(info.value)


def test_constructor_and_validation():
    d = DeviceSpec(job="ps", replica=0, task=1, device_type="gpu",
                   device_index=2)
    assert d.device_type == "GPU"
    assert d.to_string() == "/job:ps/replica:0/task:1/device:GPU:2"
    assert DeviceSpec().to_string() == ""
    assert DeviceSpec(device_index=3).to_string() == ""
    with pytest.raises(ValueError):
        DeviceSpec(task=-1)
    with pytest.raises(ValueError):
        DeviceSpec(device_type="bad type")


def test_equality_and_hash():
    a = DeviceSpec.from_string("/job:ps/cpu:0")
    b = DeviceSpec(job="ps", device_type="CPU", device_index=0)
    assert a == b
    assert hash(a) == hash(b)
    assert a != DeviceSpec(job="ps")
    assert a != "/job:ps/device:CPU:0"
    assert repr(a) == "DeviceSpec('/job:ps/device:CPU:0')"


def test_parse_from_string_mutates():
    d = DeviceSpec(job="old", task=3)
    result = d.parse_from_string("/replica:1/gpu:0")
    assert result is d
    assert d.job is None and d.task is None
    assert d.replica == 1 and d.device_type == "GPU" and d.device_index == 0


def test_setters():
    d = DeviceSpec()
    d.job = "w"
    d.task = 2
    d.device_type = "cpu"
    d.device_index = 1
    assert d.to_string() == "/job:w/task:2/device:CPU:1"
    with pytest.raises(ValueError):
        d.replica = -3


def test_make_merged_spec():
    base = DeviceSpec.from_string("/job:ps/task:0/device:CPU:0")
    merged = base.make_merged_spec(DeviceSpec.from_string("/task:2/gpu:1"))
    assert merged.to_string() == "/job:ps/task:2/device:GPU:1"
    assert base.to_string() == "/job:ps/task:0/device:CPU:0"
    merged = base.make_merged_spec("/job:worker")
    assert merged.to_string() == "/job:worker/task:0/device:CPU:0"
    # A wildcard index in the overriding spec counts as unset.
    merged = base.make_merged_spec("/device:GPU:*")
    assert merged.to_string() == "/job:ps/task:0/device:GPU:0"


def test_merge_from_mutates():
    d = DeviceSpec.from_string("/job:ps")
    d.merge_from(DeviceSpec.from_string("/gpu:0"))
    assert d.to_string() == "/job:ps/device:GPU:0"
    d.merge_from("/replica:4")
    assert d.to_string() == "/job:ps/replica:4/device:GPU:0"


def test_replace():
    d = DeviceSpec.from_string("/job:ps/task:1/cpu:0")
    r = d.replace(task=5, device_type="gpu")
    assert r.to_string() == "/job:ps/task:5/device:GPU:0"
    assert d.task == 1
    assert d.replace(job=None).job is None
    with pytest.raises(TypeError):
        d.replace(bogus=1)


def test_canonical_name():
    assert ds.canonical_name(None) == ""
    assert ds.canonical_name(DeviceSpec(task=1)) == "/task:1"
    assert ds.canonical_name("/gpu:0") == "/device:GPU:0"
    with pytest.raises(ValueError):
        ds.canonical_name("/nope:0")


def test_merge_device():
    assert ds.merge_device("/job:ps/task:0", "/gpu:0") == \
        "/job:ps/task:0/device:GPU:0"
    assert ds.merge_device("/job:ps/device:CPU:0", "/job:worker") == \
        "/job:worker/device:CPU:0"
    assert ds.merge_device("", "/cpu:0") == "/device:CPU:0"
    assert ds.merge_device("/cpu:0", "") == "/device:CPU:0"
    assert ds.merge_device(None, None) == ""
    assert ds.merge_device("/device:GPU:1", "/device:CPU:0") == \
        "/device:CPU:0"


def test_is_compatible():
    full = ds.full_device_name("localhost", 0, 0, "GPU", 1)
    assert full == "/job:localhost/replica:0/task:0/device:GPU:1"
    assert ds.is_compatible("", full)
    assert ds.is_compatible("/gpu:1", full)
    assert ds.is_compatible("/device:GPU:*", full)
    assert ds.is_compatible("/job:localhost/task:0", full)
    assert not ds.is_compatible("/gpu:0", full)
    assert not ds.is_compatible("/cpu:1", full)
    assert not ds.is_compatible("/job:ps", full)
    assert not ds.is_compatible("/task:1", full)
    assert not ds.is_compatible("/task:0", "/device:GPU:1")


def test_full_device_name_defaults_and_parse():
    assert ds.full_device_name() == \
        "/job:localhost/replica:0/task:0/device:CPU:0"
    d = ds.parse_full_name("/job:localhost/replica:0/task:0/device:CPU:0")
    assert isinstance(d, DeviceSpec)
    assert (d.job, d.replica, d.task, d.device_type, d.device_index) == \
        ("localhost", 0, 0, "CPU", 0)
    with pytest.raises(ValueError):
        ds.parse_full_name("/job:x/bad")

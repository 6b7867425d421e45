"""Device specifications such as ``/job:ps/replica:0/task:1/device:GPU:0``.

A :class:`DeviceSpec` holds five optional fields (job, replica, task,
device type, device index); unset fields act as wildcards. A device index
written as ``*`` is stored as ``None``.
"""

from __future__ import annotations

import re

__all__ = [
    "DeviceSpec", "canonical_name", "merge_device", "is_compatible",
    "full_device_name", "parse_full_name",
]

# Types accepted in the short form ("CPU:0", "/gpu:1"); any type name is
# accepted in the "/device:TYPE:idx" form.
_SHORT_FORM_TYPES = frozenset(
    {"CPU", "GPU", "TPU", "XLA_CPU", "XLA_GPU", "TPU_SYSTEM"})
_TYPE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_JOB_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_FIELDS = ("job", "replica", "task", "device_type", "device_index")


def _check_job(job):
    if job is None:
        return None
    if not isinstance(job, str) or not _JOB_RE.match(job):
        raise ValueError(f"Invalid job name: {job!r}")
    return job


def _check_int(value, what):
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"Invalid {what}: {value!r}")
    if isinstance(value, str):
        if not value.isdigit():
            raise ValueError(f"Invalid {what}: {value!r}")
        return int(value)
    try:
        result = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"Invalid {what}: {value!r}") from None
    if result != value or result < 0:
        raise ValueError(f"Invalid {what}: {value!r}")
    return result


def _check_device_type(device_type):
    if device_type is None:
        return None
    if not isinstance(device_type, str) or not _TYPE_RE.match(device_type):
        raise ValueError(f"Invalid device type: {device_type!r}")
    if device_type.lower() in ("cpu", "gpu"):
        return device_type.upper()
    return device_type


class DeviceSpec:
    """A (possibly partial) device specification.

    Example:
        >>> DeviceSpec.from_string("/job:ps/task:1/gpu:0").to_string()
        '/job:ps/task:1/device:GPU:0'
    """

    __slots__ = ("_job", "_replica", "_task", "_device_type",
                 "_device_index")

    def __init__(self, job=None, replica=None, task=None, device_type=None,
                 device_index=None):
        """Creates a DeviceSpec; every field is optional.

        Args:
            job: Job name string.
            replica: Non-negative replica index.
            task: Non-negative task index.
            device_type: Device type such as ``"CPU"`` or ``"GPU"``
                (``cpu``/``gpu`` are upper-cased).
            device_index: Non-negative device index; None means any.

        Raises:
            ValueError: If a field is malformed.
        """
        self._job = _check_job(job)
        self._replica = _check_int(replica, "replica")
        self._task = _check_int(task, "task")
        self._device_type = _check_device_type(device_type)
        self._device_index = _check_int(device_index, "device index")

    # --- fields (settable for v1 compatibility) -------------------------

    @property
    def job(self):
        """Job name, or None."""
        return self._job

    @job.setter
    def job(self, value):
        self._job = _check_job(value)

    @property
    def replica(self):
        """Replica index, or None."""
        return self._replica

    @replica.setter
    def replica(self, value):
        self._replica = _check_int(value, "replica")

    @property
    def task(self):
        """Task index, or None."""
        return self._task

    @task.setter
    def task(self, value):
        self._task = _check_int(value, "task")

    @property
    def device_type(self):
        """Device type (e.g. ``"CPU"``), or None."""
        return self._device_type

    @device_type.setter
    def device_type(self, value):
        self._device_type = _check_device_type(value)

    @property
    def device_index(self):
        """Device index, or None (any)."""
        return self._device_index

    @device_index.setter
    def device_index(self, value):
        self._device_index = _check_int(value, "device index")

    # --- parsing / printing ---------------------------------------------

    @staticmethod
    def _parse(spec):
        """Parses ``spec`` into a dict of field values."""
        if spec is None:
            return {}
        if isinstance(spec, DeviceSpec):
            return spec._as_dict()
        if not isinstance(spec, str):
            raise ValueError(f"Device spec must be a string, got {spec!r}")
        fields = {}

        def bad(reason):
            return ValueError(
                f"Invalid device spec {spec!r}: {reason}")

        def set_type(dtype, index):
            if "device_type" in fields:
                raise bad("multiple device types")
            try:
                fields["device_type"] = _check_device_type(dtype)
                fields["device_index"] = (
                    None if index in (None, "*")
                    else _check_int(index, "device index"))
            except ValueError as e:
                raise bad(str(e)) from None

        for piece in spec.split("/"):
            if not piece:
                continue
            parts = piece.split(":")
            key = parts[0]
            try:
                if len(parts) == 2 and key == "job":
                    fields["job"] = _check_job(parts[1])
                elif len(parts) == 2 and key == "replica":
                    fields["replica"] = _check_int(parts[1], "replica")
                elif len(parts) == 2 and key == "task":
                    fields["task"] = _check_int(parts[1], "task")
                elif len(parts) == 3 and key == "device":
                    set_type(parts[1], parts[2])
                elif (len(parts) in (1, 2)
                      and key.upper() in _SHORT_FORM_TYPES):
                    set_type(key, parts[1] if len(parts) == 2 else None)
                else:
                    raise bad(f"unknown component {piece!r}")
            except ValueError as e:
                if str(e).startswith("Invalid device spec"):
                    raise
                raise bad(str(e)) from None
        return fields

    @classmethod
    def from_string(cls, spec):
        """Parses a device string into a new DeviceSpec.

        Accepts full and partial names (``"/job:ps/replica:0/task:1/
        device:GPU:0"``, ``"/cpu:0"``, ``"/device:CPU:*"``, ``"CPU:0"``,
        ``""``).

        Args:
            spec: The device string.

        Raises:
            ValueError: If ``spec`` is malformed.
        """
        return cls(**cls._parse(spec))

    def parse_from_string(self, spec):
        """Overwrites the fields set in ``spec`` in place (v1 API).

        Fields that ``spec`` does not mention are reset to None.

        Args:
            spec: The device string.

        Returns:
            self.

        Raises:
            ValueError: If ``spec`` is malformed.
        """
        fields = self._parse(spec)
        for name in _FIELDS:
            setattr(self, "_" + name, fields.get(name))
        return self

    def to_string(self):
        """Returns the canonical string, omitting unset fields."""
        out = []
        if self._job is not None:
            out.append(f"/job:{self._job}")
        if self._replica is not None:
            out.append(f"/replica:{self._replica}")
        if self._task is not None:
            out.append(f"/task:{self._task}")
        if self._device_type is not None:
            index = "*" if self._device_index is None else self._device_index
            out.append(f"/device:{self._device_type}:{index}")
        return "".join(out)

    def _as_dict(self):
        return {name: getattr(self, "_" + name) for name in _FIELDS}

    # --- merging ----------------------------------------------------------

    def make_merged_spec(self, dev):
        """Returns a new spec: ``self`` with fields set in ``dev`` overriding.

        Args:
            dev: A DeviceSpec or device string.
        """
        merged = self._as_dict()
        merged.update({k: v for k, v in DeviceSpec._parse(dev).items()
                       if v is not None})
        return DeviceSpec(**merged)

    def merge_from(self, dev):
        """Merges ``dev`` into ``self`` in place (v1 API).

        Args:
            dev: A DeviceSpec or device string whose set fields override.
        """
        merged = self.make_merged_spec(dev)
        for name in _FIELDS:
            setattr(self, "_" + name, getattr(merged, "_" + name))

    def replace(self, **kwargs):
        """Returns a copy with the given fields replaced.

        Args:
            **kwargs: Any of job, replica, task, device_type, device_index.

        Raises:
            TypeError: On an unknown field name.
        """
        unknown = set(kwargs) - set(_FIELDS)
        if unknown:
            raise TypeError(f"Unknown DeviceSpec fields: {sorted(unknown)}")
        fields = self._as_dict()
        fields.update(kwargs)
        return DeviceSpec(**fields)

    # --- protocol ---------------------------------------------------------

    def __eq__(self, other):
        if not isinstance(other, DeviceSpec):
            return NotImplemented
        return self._as_dict() == other._as_dict()

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        return hash(self.to_string())

    def __repr__(self):
        return f"DeviceSpec({self.to_string()!r})"

    def __str__(self):
        return self.to_string()


def canonical_name(device):
    """Returns the canonical string form of a device.

    Args:
        device: A device string, DeviceSpec, or None (gives ``""``).

    Raises:
        ValueError: If ``device`` is malformed.
    """
    if device is None:
        return ""
    if isinstance(device, DeviceSpec):
        return device.to_string()
    return DeviceSpec.from_string(device).to_string()


def merge_device(outer, inner):
    """Merges a nested device scope into its enclosing one.

    Fields set in ``inner`` override those of ``outer`` (a wildcard index
    in ``inner`` counts as unset).

    Args:
        outer: Enclosing device string/DeviceSpec (or None/"").
        inner: Nested device string/DeviceSpec (or None/"").

    Returns:
        The merged canonical device string.
    """
    return DeviceSpec.from_string(canonical_name(outer)).make_merged_spec(
        canonical_name(inner)).to_string()


def is_compatible(requested, actual_full_name):
    """True if every field set in ``requested`` matches ``actual_full_name``.

    Args:
        requested: A (possibly partial) device string or DeviceSpec.
        actual_full_name: A concrete device name.
    """
    req = DeviceSpec._parse(requested)
    act = DeviceSpec._parse(actual_full_name)
    for name, value in req.items():
        if value is None:
            continue
        other = act.get(name)
        if name == "device_type" and other is not None:
            if value.upper() != other.upper():
                return False
        elif value != other:
            return False
    return True


def full_device_name(job="localhost", replica=0, task=0, device_type="CPU",
                     index=0):
    """Builds a fully specified device name.

    Args:
        job: Job name.
        replica: Replica index.
        task: Task index.
        device_type: Device type, e.g. ``"CPU"``.
        index: Device index.

    Returns:
        A string like ``"/job:localhost/replica:0/task:0/device:CPU:0"``.
    """
    return DeviceSpec(job, replica, task, device_type, index).to_string()


def parse_full_name(name):
    """Parses a device name into a DeviceSpec.

    Partial names are accepted; unset fields stay None.

    Args:
        name: The device name.

    Raises:
        ValueError: If ``name`` is malformed.
    """
    return DeviceSpec.from_string(name)

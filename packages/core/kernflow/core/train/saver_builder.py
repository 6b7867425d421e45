"""Builds the save and restore subgraph of a `Saver` (TF1's BaseSaverBuilder).

The graph built under the name scope "save" (TF's names)::

    save/filename/input  Const "model"
    save/filename        PlaceholderWithDefault
    save/Const           PlaceholderWithDefault      <- SaverDef.filename_tensor_name, fed the prefix
    save/SaveV2          SaveV2(save/Const, names, slices, <variables>)
    save/control_dependency  Identity(save/Const) after save/SaveV2   <- save_tensor_name
    save/RestoreV2       RestoreV2(save/Const, names, slices)
    save/Assign, save/Assign_1...  Assign(variable, restored)
    save/restore_all     NoOp after the assigns        <- restore_op_name

Saveables are ordered by checkpoint name. With ``sharded=True`` each device's variables are saved
by their own SaveV2 (to ``<prefix>-<i>-of-<n>``) and MergeV2Checkpoints joins them into ``<prefix>``.
"""

from __future__ import annotations

import collections

from kernflow.core.framework import device_spec as _device_spec
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.ops import array_ops, control_flow_ops, io_ops, state_ops
from kernflow.core.protobuf import saver_pb2

__all__ = ["SaveSpec", "SaveableObject", "ReferenceVariableSaveable", "PartitionedVariableSaveable",
           "BaseSaverBuilder", "BulkSaverBuilder", "op_list_to_dict", "validate_and_slice_inputs",
           "SAVEABLE_OBJECTS"]

# TF's GraphKeys.SAVEABLE_OBJECTS: extra objects saved by default (e.g. lookup tables).
SAVEABLE_OBJECTS = "saveable_objects"
_VARIABLE_OPS = ("Variable", "VariableV2", "AutoReloadVariable")


class SaveSpec:
    """One tensor a saveable writes: its value, slice spec ("" for all of it) and checkpoint name."""

    def __init__(self, tensor, slice_spec, name, dtype=None, device=None):
        self._tensor = tensor
        self.slice_spec = slice_spec
        self.name = name
        if callable(tensor) and not isinstance(tensor, _ops.Tensor):
            if dtype is None or device is None:
                raise AssertionError("When passing a callable `tensor` to a SaveSpec, an explicit "
                                     "dtype and device must be provided.")
            self.dtype, self.device = dtype, device
        else:
            self.dtype = (dtype or tensor.dtype).base_dtype
            self.device = tensor.device if device is None else device

    @property
    def tensor(self):
        """The tensor to save (a callable is called each time this is read)."""
        return self._tensor() if callable(self._tensor) and not isinstance(self._tensor, _ops.Tensor) \
            else self._tensor


class SaveableObject:
    """Something a Saver can save and restore: a list of `SaveSpec`s and a `restore` method.

    Args:
        op: the object being saved (used to detect one object saved under two names).
        specs: the `SaveSpec`s to write.
        name: the name prefix of the specs in the checkpoint.
    """

    def __init__(self, op, specs, name):
        self.op = op
        self.specs = specs
        self.name = name

    @property
    def device(self):
        return self.specs[0].device

    @property
    def restore_specs(self):
        """The specs to read back (by default those written)."""
        return self.specs

    def restore(self, restored_tensors, restored_shapes):
        """Returns an op that puts `restored_tensors` (one per spec) back into the object."""
        raise NotImplementedError


class ReferenceVariableSaveable(SaveableObject):
    """Saves and restores a `kf.Variable` (its VariableV2 reference)."""

    def __init__(self, var, slice_spec, name):
        super().__init__(var, [SaveSpec(var, slice_spec, name, dtype=var.dtype)], name)

    def restore(self, restored_tensors, restored_shapes):
        restored = restored_tensors[0]
        if restored_shapes is not None:
            restored = array_ops.reshape(restored, restored_shapes[0])
        return state_ops.assign(self.op, restored,
                                validate_shape=restored_shapes is None
                                and self.op.get_shape().is_fully_defined())


class PartitionedVariableSaveable(SaveableObject):
    """Saves the parts of a partitioned variable as one whole tensor; restores each part's slice.

    The parts are concatenated (along the split axis) where the SaveV2 that writes them runs, so
    the checkpoint holds one entry with the full name and full shape whatever the partitioning;
    each part is restored with a RestoreV2 slice spec ("10 4 4,3:-"), which also restores a
    checkpoint written by a plain variable or by a different number of parts.

    Args:
        parts: the part variables, each with a `_save_slice_info` naming the same full variable.
        name: the checkpoint name (the full variable's name).

    Raises:
        ValueError: a part lacks slice info, the parts name different variables, or they do not
            cover the full variable.
    """

    def __init__(self, parts, name):
        parts = list(parts)
        infos = [getattr(v, "_save_slice_info", None) for v in parts]
        if any(i is None for i in infos):
            raise ValueError(f"Saving variable slices under '{name}' needs a save_slice_info on "
                             f"every part: {[v.name for v, i in zip(parts, infos) if i is None]}")
        if len({(i.full_name, tuple(i.full_shape)) for i in infos}) != 1:
            raise ValueError(f"The slices saved under '{name}' belong to different variables: "
                             f"{sorted({i.full_name for i in infos})}")
        order = sorted(range(len(parts)), key=lambda k: infos[k].var_offset)
        self._parts = [parts[k] for k in order]
        self._infos = [infos[k] for k in order]
        self._axis = _check_cover(self._infos, name)
        self._full = None
        dtype = self._parts[0].dtype.base_dtype
        spec = SaveSpec(self._full_tensor, "", name, dtype=dtype, device=self._parts[0].device)
        super().__init__(tuple(self._parts), [spec], name)

    def _full_tensor(self):
        # Built once, under the device scope of the SaveV2 that consumes it.
        if self._full is None:
            values = [_variable_ref(v) for v in self._parts]
            if len(values) == 1:
                self._full = array_ops.identity(values[0], name="concat_" + _leaf(self.name))
            else:
                self._full = array_ops.concat(values, self._axis, name="concat_" + _leaf(self.name))
        return self._full

    @property
    def restore_specs(self):
        return [SaveSpec(_variable_ref(v), i.spec, self.name, dtype=v.dtype.base_dtype)
                for v, i in zip(self._parts, self._infos)]

    def restore(self, restored_tensors, restored_shapes):
        assigns = []
        for k, (v, t) in enumerate(zip(self._parts, restored_tensors)):
            if restored_shapes is not None:
                t = array_ops.reshape(t, restored_shapes[k])
            assigns.append(state_ops.assign(_variable_ref(v), t, validate_shape=True))
        return control_flow_ops.group(*assigns)


def _leaf(name: str) -> str:
    return name.replace("/", "_")


def _check_cover(infos, name) -> int:
    """The split axis of slices that tile their full variable exactly (ValueError otherwise)."""
    full = list(infos[0].full_shape)
    axes = {a for i in infos for a, (o, s, f) in enumerate(zip(i.var_offset, i.var_shape, full))
            if o != 0 or s != f}
    if len(axes) > 1:
        raise ValueError(f"The slices of '{name}' are split along several axes {sorted(axes)}")
    axis = axes.pop() if axes else 0
    at = 0
    for i in infos:
        if i.var_offset[axis] != at:
            break
        at += i.var_shape[axis]
    if at != (full[axis] if full else 0) or not full:
        raise ValueError(f"The slices of '{name}' saved together must cover the whole variable "
                         f"of shape {full} exactly: got {[(i.var_offset, i.var_shape) for i in infos]}")
    return axis


def _is_variable_tensor(t) -> bool:
    return isinstance(t, _ops.Tensor) and t.op.type in _VARIABLE_OPS


def _variable_ref(var):
    if isinstance(var, _ops.Tensor):
        return var
    if hasattr(var, "_ref"):
        return var._ref()
    return _ops.convert_to_tensor(var, as_ref=True)


def op_list_to_dict(op_list, convert_variable_to_tensor=True):
    """Maps each variable of `op_list` to its checkpoint name: the variable's op name.

    Raises:
        TypeError: `op_list` is not a list (or holds something that is not a variable).
        ValueError: two variables have the same name.
    """
    if not isinstance(op_list, (list, tuple, set)):
        raise TypeError(f"Variables to save should be passed in a dict or a list: {op_list}")
    from kernflow.core.ops.partitioned_variables import PartitionedVariable
    names = {}
    for var in sorted(op_list, key=lambda x: getattr(x, "name", "")):
        if isinstance(var, SaveableObject):
            names[var.name] = var
            continue
        if isinstance(var, PartitionedVariable):
            if var.name in names:
                raise ValueError(f"At least two variables have the same name: {var.name}")
            names[var.name] = list(var)
            continue
        info = getattr(var, "_save_slice_info", None)
        if info is not None:
            # A part of a partitioned variable: saved with its siblings under the full name.
            slices = names.setdefault(info.full_name, [])
            if not isinstance(slices, list):
                raise ValueError(f"Mixing slices and non-slices with the same name: "
                                 f"{info.full_name}")
            slices.append(var)
            continue
        if convert_variable_to_tensor:
            var = _variable_ref(var)
            if not _is_variable_tensor(var):
                raise TypeError(f"Variable to save is not a Variable: {var}")
        name = var.op.name
        if name in names:
            raise ValueError(f"At least two variables have the same name: {name}")
        names[name] = var
    return names


def _saveables_for(op, name):
    if not isinstance(name, str):
        raise TypeError(f"names_to_saveables must be a dict mapping string names to trackable "
                        f"operations. Name is not a string: {name}")
    if isinstance(op, SaveableObject):
        return [op]
    from kernflow.core.ops.partitioned_variables import PartitionedVariable
    if isinstance(op, (list, tuple, PartitionedVariable)):
        return [PartitionedVariableSaveable(op, name)]
    var = _variable_ref(op) if not isinstance(op, _ops.Tensor) else op
    if not _is_variable_tensor(var):
        raise TypeError(f"names_to_saveables must be a dict mapping string names to "
                        f"Tensors/Variables. Not a variable: {var}")
    return [ReferenceVariableSaveable(var, "", name)]


def validate_and_slice_inputs(names_to_saveables):
    """Turns a var_list (list or {name: variable}) into `SaveableObject`s sorted by name.

    Raises:
        ValueError: one variable appears under two names, or two variables share a name.
    """
    if not isinstance(names_to_saveables, dict):
        names_to_saveables = op_list_to_dict(names_to_saveables)
    saveables, seen = [], set()
    for name, op in sorted(names_to_saveables.items(), key=lambda x: x[0]):
        for s in _saveables_for(op, name):
            key = id(s.op) if s.op is not None else None
            if key is not None and key in seen:
                raise ValueError(f"The same saveable will be restored with two names: {s.name}")
            saveables.append(s)
            seen.add(key)
    return saveables


def _set_cpu0(device: str) -> str:
    spec = _device_spec.DeviceSpec.from_string(device or "")
    return spec.replace(device_type="CPU", device_index=0).to_string()


class BaseSaverBuilder:
    """Builds save/restore ops with one RestoreV2 per saveable.

    Args:
        write_version: SaverDef.V2 (the only format written; V1 is accepted and written as V2).
    """

    SaveSpec = SaveSpec
    SaveableObject = SaveableObject
    VariableSaveable = ReferenceVariableSaveable

    def __init__(self, write_version=saver_pb2.SaverDef.V2):
        self._write_version = saver_pb2.SaverDef.V2 if write_version == saver_pb2.SaverDef.V1 \
            else write_version

    def save_op(self, filename_tensor, saveables):
        """A SaveV2 op writing every spec of `saveables` to `filename_tensor`."""
        names, tensors, slices = [], [], []
        for s in saveables:
            for spec in s.specs:
                names.append(spec.name)
                tensors.append(spec.tensor)
                slices.append(spec.slice_spec)
        return io_ops.save_v2(filename_tensor, names, slices, tensors)

    def restore_op(self, filename_tensor, saveable, preferred_shard):
        """One RestoreV2 per spec of `saveable`; returns the restored tensors."""
        del preferred_shard
        return [io_ops.restore_v2(filename_tensor, [spec.name], [spec.slice_spec], [spec.dtype])[0]
                for spec in saveable.restore_specs]

    def bulk_restore(self, filename_tensor, saveables, preferred_shard, restore_sequentially):
        """Restores every spec of `saveables`; returns the tensors in spec order."""
        del restore_sequentially
        out = []
        for s in saveables:
            device = _set_cpu0(s.device) if s.device else None
            with _ops.device(device):
                out.extend(self.restore_op(filename_tensor, s, preferred_shard))
        return out

    def sharded_filename(self, filename_tensor, shard, num_shards):
        return io_ops.sharded_filename(filename_tensor, shard, num_shards)

    # ------------------------------------------------------------------ graph pieces
    def _AddSaveOps(self, filename_tensor, saveables):  # noqa: N802 - TF name
        # File I/O has CPU kernels only: built under a GPU scope, the save runs on that task's CPU.
        dev = filename_tensor.device
        if dev and _device_spec.DeviceSpec.from_string(dev).device_type not in (None, "CPU"):
            with _ops.device(_set_cpu0(dev)):
                save = self.save_op(filename_tensor, saveables)
        else:
            save = self.save_op(filename_tensor, saveables)
        with _ops.colocate_with(filename_tensor), _ops.control_dependencies([save]):
            return array_ops.identity(filename_tensor, name="control_dependency")

    def _AddShardedSaveOps(self, checkpoint_prefix, per_device):  # noqa: N802 - TF name
        n = len(per_device)
        num_shards = array_ops.constant(n, dtype=_dtypes.int32, name="num_shards")
        saves, prefixes, last = [], [], None
        for shard, (device, saveables) in enumerate(per_device):
            last = device
            with _ops.device(_set_cpu0(device)):
                p = self.sharded_filename(checkpoint_prefix, shard, num_shards)
                prefixes.append(p)
                saves.append(self._AddSaveOps(p, saveables))
        with _ops.control_dependencies([s.op for s in saves]), _ops.device(_set_cpu0(last)):
            merge = io_ops.merge_v2_checkpoints(prefixes, checkpoint_prefix, delete_old_dirs=True)
            with _ops.control_dependencies([merge]):
                return array_ops.identity(checkpoint_prefix)

    def _AddRestoreOps(self, filename_tensor, saveables, restore_sequentially, reshape,  # noqa: N802
                       preferred_shard=-1, name="restore_all"):
        if restore_sequentially:
            assigns = []
            for s in saveables:
                with _ops.control_dependencies(assigns[-1:]):
                    tensors = self.bulk_restore(filename_tensor, [s], preferred_shard, True)
                    assigns.append(s.restore(tensors, self._shapes(s) if reshape else None))
            return control_flow_ops.group(*assigns, name=name)
        all_tensors = self.bulk_restore(filename_tensor, saveables, preferred_shard, False)
        assigns, i = [], 0
        for s in saveables:
            tensors = all_tensors[i:i + len(s.restore_specs)]
            i += len(s.restore_specs)
            assigns.append(s.restore(tensors, self._shapes(s) if reshape else None))
        return control_flow_ops.group(*assigns, name=name)

    @staticmethod
    def _shapes(saveable):
        out = []
        for spec in saveable.restore_specs:
            v = spec.tensor
            shape = v.get_shape()
            out.append(shape.as_list() if shape.is_fully_defined() else array_ops.shape(v))
        return out

    def _AddShardedRestoreOps(self, filename_tensor, per_device, restore_sequentially,  # noqa: N802
                              reshape):
        restores = []
        for shard, (device, saveables) in enumerate(per_device):
            with _ops.device(device):
                restores.append(self._AddRestoreOps(filename_tensor, saveables, restore_sequentially,
                                                    reshape, preferred_shard=shard,
                                                    name="restore_shard"))
        return control_flow_ops.group(*restores, name="restore_all")

    @staticmethod
    def _GroupByDevices(saveables):  # noqa: N802 - TF name
        per_device = collections.defaultdict(list)
        for s in saveables:
            devices = {_device_spec.canonical_name(spec.device) if spec.device else ""
                       for spec in s.specs}
            if len(devices) != 1:
                raise ValueError(f"All tensors of a saveable object must be on the same device: "
                                 f"{s.name}")
            per_device[devices.pop()].append(s)
        return sorted(per_device.items(), key=lambda t: t[0])

    # ------------------------------------------------------------------ entry points
    def build(self, names_to_saveables, reshape=False, sharded=False, max_to_keep=5,
              keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
              filename="model"):
        """Builds save and restore ops; returns the `SaverDef` naming them."""
        return self._build_internal(names_to_saveables, reshape, sharded, max_to_keep,
                                    keep_checkpoint_every_n_hours, name, restore_sequentially,
                                    filename)

    def _build_internal(self, names_to_saveables, reshape=False, sharded=False, max_to_keep=5,
                        keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
                        filename="model", build_save=True, build_restore=True):
        if not build_save or not build_restore:
            raise ValueError("save and restore operations need to be built together when eager "
                             "execution is not enabled.")
        saveables = validate_and_slice_inputs(names_to_saveables)
        if max_to_keep is None:
            max_to_keep = 0
        graph = _ops._get_graph_from_inputs([s.op for s in saveables if isinstance(s.op, _ops.Tensor)])
        with graph.as_default(), _ops.name_scope(name, "save"):
            default = array_ops.constant(filename or "model", dtype=_dtypes.string,
                                         name="filename/input")
            filename_tensor = array_ops.placeholder_with_default(default, shape=(), name="filename")
            filename_tensor = array_ops.placeholder_with_default(filename_tensor, shape=(), name="Const")
            if sharded:
                per_device = self._GroupByDevices(saveables)
                save_tensor = self._AddShardedSaveOps(filename_tensor, per_device)
                restore_op = self._AddShardedRestoreOps(filename_tensor, per_device,
                                                        restore_sequentially, reshape)
            else:
                save_tensor = self._AddSaveOps(filename_tensor, saveables)
                restore_op = self._AddRestoreOps(filename_tensor, saveables, restore_sequentially,
                                                 reshape)
        return saver_pb2.SaverDef(filename_tensor_name=filename_tensor.name,
                                  save_tensor_name=save_tensor.name, restore_op_name=restore_op.name,
                                  max_to_keep=max_to_keep, sharded=sharded,
                                  keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
                                  version=self._write_version)


class BulkSaverBuilder(BaseSaverBuilder):
    """The default builder: one RestoreV2 (on CPU) for every variable."""

    def bulk_restore(self, filename_tensor, saveables, preferred_shard, restore_sequentially):
        del restore_sequentially, preferred_shard
        specs = [(spec.name, spec.slice_spec, spec.dtype) for s in saveables
                 for spec in s.restore_specs]
        names, slices, dtypes = zip(*specs)
        with _ops.device("/device:CPU:0"):
            return io_ops.restore_v2(filename_tensor, list(names), list(slices), list(dtypes))

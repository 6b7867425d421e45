from kernflow.core.protobuf import allocation_description_pb2 as _allocation_description_pb2
from kernflow.core.protobuf import tensor_shape_pb2 as _tensor_shape_pb2
from kernflow.core.protobuf import types_pb2 as _types_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TensorDescription(_message.Message):
    __slots__ = ("dtype", "shape", "allocation_description")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATION_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    dtype: _types_pb2.DataType
    shape: _tensor_shape_pb2.TensorShapeProto
    allocation_description: _allocation_description_pb2.AllocationDescription
    def __init__(self, dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ..., allocation_description: _Optional[_Union[_allocation_description_pb2.AllocationDescription, _Mapping]] = ...) -> None: ...

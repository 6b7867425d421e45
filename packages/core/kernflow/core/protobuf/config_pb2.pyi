from kernflow.core.protobuf import cost_graph_pb2 as _cost_graph_pb2
from kernflow.core.protobuf import graph_pb2 as _graph_pb2
from kernflow.core.protobuf import step_stats_pb2 as _step_stats_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GPUOptions(_message.Message):
    __slots__ = ("per_process_gpu_memory_fraction", "allow_growth", "visible_device_list")
    PER_PROCESS_GPU_MEMORY_FRACTION_FIELD_NUMBER: _ClassVar[int]
    ALLOW_GROWTH_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_DEVICE_LIST_FIELD_NUMBER: _ClassVar[int]
    per_process_gpu_memory_fraction: float
    allow_growth: bool
    visible_device_list: str
    def __init__(self, per_process_gpu_memory_fraction: _Optional[float] = ..., allow_growth: _Optional[bool] = ..., visible_device_list: _Optional[str] = ...) -> None: ...

class OptimizerOptions(_message.Message):
    __slots__ = ("do_common_subexpression_elimination", "do_constant_folding", "do_function_inlining", "global_jit_level")
    class GlobalJitLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        DEFAULT: _ClassVar[OptimizerOptions.GlobalJitLevel]
        OFF: _ClassVar[OptimizerOptions.GlobalJitLevel]
        ON_1: _ClassVar[OptimizerOptions.GlobalJitLevel]
        ON_2: _ClassVar[OptimizerOptions.GlobalJitLevel]
    DEFAULT: OptimizerOptions.GlobalJitLevel
    OFF: OptimizerOptions.GlobalJitLevel
    ON_1: OptimizerOptions.GlobalJitLevel
    ON_2: OptimizerOptions.GlobalJitLevel
    DO_COMMON_SUBEXPRESSION_ELIMINATION_FIELD_NUMBER: _ClassVar[int]
    DO_CONSTANT_FOLDING_FIELD_NUMBER: _ClassVar[int]
    DO_FUNCTION_INLINING_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_JIT_LEVEL_FIELD_NUMBER: _ClassVar[int]
    do_common_subexpression_elimination: bool
    do_constant_folding: bool
    do_function_inlining: bool
    global_jit_level: OptimizerOptions.GlobalJitLevel
    def __init__(self, do_common_subexpression_elimination: _Optional[bool] = ..., do_constant_folding: _Optional[bool] = ..., do_function_inlining: _Optional[bool] = ..., global_jit_level: _Optional[_Union[OptimizerOptions.GlobalJitLevel, str]] = ...) -> None: ...

class GraphOptions(_message.Message):
    __slots__ = ("optimizer_options", "enable_recv_scheduling", "infer_shapes", "place_pruned_graph")
    OPTIMIZER_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ENABLE_RECV_SCHEDULING_FIELD_NUMBER: _ClassVar[int]
    INFER_SHAPES_FIELD_NUMBER: _ClassVar[int]
    PLACE_PRUNED_GRAPH_FIELD_NUMBER: _ClassVar[int]
    optimizer_options: OptimizerOptions
    enable_recv_scheduling: bool
    infer_shapes: bool
    place_pruned_graph: bool
    def __init__(self, optimizer_options: _Optional[_Union[OptimizerOptions, _Mapping]] = ..., enable_recv_scheduling: _Optional[bool] = ..., infer_shapes: _Optional[bool] = ..., place_pruned_graph: _Optional[bool] = ...) -> None: ...

class ConfigProto(_message.Message):
    __slots__ = ("device_count", "intra_op_parallelism_threads", "inter_op_parallelism_threads", "use_per_session_threads", "placement_period", "device_filters", "gpu_options", "allow_soft_placement", "log_device_placement", "graph_options", "operation_timeout_in_ms")
    class DeviceCountEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    DEVICE_COUNT_FIELD_NUMBER: _ClassVar[int]
    INTRA_OP_PARALLELISM_THREADS_FIELD_NUMBER: _ClassVar[int]
    INTER_OP_PARALLELISM_THREADS_FIELD_NUMBER: _ClassVar[int]
    USE_PER_SESSION_THREADS_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_PERIOD_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    GPU_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SOFT_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    LOG_DEVICE_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    GRAPH_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    OPERATION_TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    device_count: _containers.ScalarMap[str, int]
    intra_op_parallelism_threads: int
    inter_op_parallelism_threads: int
    use_per_session_threads: bool
    placement_period: int
    device_filters: _containers.RepeatedScalarFieldContainer[str]
    gpu_options: GPUOptions
    allow_soft_placement: bool
    log_device_placement: bool
    graph_options: GraphOptions
    operation_timeout_in_ms: int
    def __init__(self, device_count: _Optional[_Mapping[str, int]] = ..., intra_op_parallelism_threads: _Optional[int] = ..., inter_op_parallelism_threads: _Optional[int] = ..., use_per_session_threads: _Optional[bool] = ..., placement_period: _Optional[int] = ..., device_filters: _Optional[_Iterable[str]] = ..., gpu_options: _Optional[_Union[GPUOptions, _Mapping]] = ..., allow_soft_placement: _Optional[bool] = ..., log_device_placement: _Optional[bool] = ..., graph_options: _Optional[_Union[GraphOptions, _Mapping]] = ..., operation_timeout_in_ms: _Optional[int] = ...) -> None: ...

class RunOptions(_message.Message):
    __slots__ = ("trace_level", "timeout_in_ms", "inter_op_thread_pool", "output_partition_graphs", "report_tensor_allocations_upon_oom")
    class TraceLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NO_TRACE: _ClassVar[RunOptions.TraceLevel]
        SOFTWARE_TRACE: _ClassVar[RunOptions.TraceLevel]
        HARDWARE_TRACE: _ClassVar[RunOptions.TraceLevel]
        FULL_TRACE: _ClassVar[RunOptions.TraceLevel]
    NO_TRACE: RunOptions.TraceLevel
    SOFTWARE_TRACE: RunOptions.TraceLevel
    HARDWARE_TRACE: RunOptions.TraceLevel
    FULL_TRACE: RunOptions.TraceLevel
    TRACE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    INTER_OP_THREAD_POOL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    REPORT_TENSOR_ALLOCATIONS_UPON_OOM_FIELD_NUMBER: _ClassVar[int]
    trace_level: RunOptions.TraceLevel
    timeout_in_ms: int
    inter_op_thread_pool: int
    output_partition_graphs: bool
    report_tensor_allocations_upon_oom: bool
    def __init__(self, trace_level: _Optional[_Union[RunOptions.TraceLevel, str]] = ..., timeout_in_ms: _Optional[int] = ..., inter_op_thread_pool: _Optional[int] = ..., output_partition_graphs: _Optional[bool] = ..., report_tensor_allocations_upon_oom: _Optional[bool] = ...) -> None: ...

class RunMetadata(_message.Message):
    __slots__ = ("step_stats", "cost_graph", "partition_graphs")
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    COST_GRAPH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    step_stats: _step_stats_pb2.StepStats
    cost_graph: _cost_graph_pb2.CostGraphDef
    partition_graphs: _containers.RepeatedCompositeFieldContainer[_graph_pb2.GraphDef]
    def __init__(self, step_stats: _Optional[_Union[_step_stats_pb2.StepStats, _Mapping]] = ..., cost_graph: _Optional[_Union[_cost_graph_pb2.CostGraphDef, _Mapping]] = ..., partition_graphs: _Optional[_Iterable[_Union[_graph_pb2.GraphDef, _Mapping]]] = ...) -> None: ...

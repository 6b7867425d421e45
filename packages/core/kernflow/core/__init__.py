"""kernflow.core: the TensorFlow 1.x graph API (``import kernflow.core as kf``) and the runtime.

Names follow ``tf.compat.v1``: build a graph with the op wrappers, run it in a `Session`.
"""

from kernflow.core.framework import errors
from kernflow.core.framework.device_spec import DeviceSpec
from kernflow.core.framework.dtypes import *  # noqa: F403 - kf.float32 and friends
from kernflow.core.framework.dtypes import DType, as_dtype
from kernflow.core.framework.ops import (Graph, GraphKeys, Operation, Tensor, add_to_collection,
                                         add_to_collections, colocate_with, control_dependencies,
                                         convert_to_tensor, device, get_collection,
                                         get_collection_ref, get_default_graph, is_tensor,
                                         name_scope, register_tensor_conversion_function,
                                         reset_default_graph)
from kernflow.core.framework.tensor_shape import Dimension, TensorShape, dimension_at_index, dimension_value
from kernflow.core.framework.graph_io import import_graph_def
from kernflow.core.client.session import InteractiveSession, Session, get_default_session
from kernflow.core.protobuf.config_pb2 import (ConfigProto, GPUOptions, GraphOptions,
                                               OptimizerOptions, RunMetadata, RunOptions)
from kernflow.core.protobuf.graph_pb2 import GraphDef, NodeDef

from kernflow.core.ops.array_ops import *  # noqa: F403
from kernflow.core.ops.math_ops import *  # noqa: F403
from kernflow.core.ops.control_flow_ops import *  # noqa: F403
from kernflow.core.ops.state_ops import *  # noqa: F403
from kernflow.core.ops.variables import *  # noqa: F403
from kernflow.core.ops.clip_ops import *  # noqa: F403
from kernflow.core.ops.gradients_impl import *  # noqa: F403
from kernflow.core.ops.session_ops import *  # noqa: F403
from kernflow.core.ops import training_ops as _training_ops  # noqa: F401 - declares the Apply* ops
from kernflow.core.ops import fused_ops as _fused_ops  # noqa: F401 - ops of the fusion pass
from kernflow.core.ops.optional import load_optional_families as _load_optional_families
from kernflow.core.ops.partitioned_variables import (PartitionedVariable,
                                                     create_partitioned_variables,
                                                     fixed_size_partitioner,
                                                     min_max_variable_partitioner,
                                                     variable_axis_size_partitioner)

from kernflow.core.ops.variables import Variable as _Variable

_load_optional_families(globals())
_Variable._overload_operators()

from kernflow.core import nn  # noqa: E402
from kernflow.core import sparse  # noqa: E402
from kernflow.core import sets  # noqa: E402
from kernflow.core import train  # noqa: E402
from kernflow.core import test  # noqa: E402
from kernflow.core import layers  # noqa: E402
from kernflow.core import losses  # noqa: E402
from kernflow.core import metrics  # noqa: E402
from kernflow.core import math  # noqa: E402
from kernflow.core import linalg  # noqa: E402
from kernflow.core import quantization  # noqa: E402
from kernflow.core import random  # noqa: E402
from kernflow.core import signal  # noqa: E402
from kernflow.core import distributions  # noqa: E402
from kernflow.core import audio  # noqa: E402
spectral = signal
from kernflow.core import app  # noqa: E402
from kernflow.core import tf_logging as logging  # noqa: E402
from kernflow.core import image  # noqa: E402
from kernflow.core import strings  # noqa: E402
from kernflow.core import flags  # noqa: E402
from kernflow.core import gfile  # noqa: E402
from kernflow.core import data  # noqa: E402
from kernflow.core import estimator  # noqa: E402
from kernflow.core import python_io  # noqa: E402
from kernflow.core import io  # noqa: E402
from kernflow.core import bitwise  # noqa: E402
from kernflow.core import manip  # noqa: E402
from kernflow.core import graph_util  # noqa: E402
from kernflow.core import queue_ns as queue  # noqa: E402
from kernflow.core import types_ns as types  # noqa: E402
from kernflow.core import saved_model  # noqa: E402
from kernflow.core import summary  # noqa: E402
from kernflow.core.protobuf.event_pb2 import Event, LogMessage, SessionLog  # noqa: E402
from kernflow.core.protobuf.summary_pb2 import HistogramProto, Summary, SummaryMetadata  # noqa: E402
from kernflow.core import lookup  # noqa: E402
from kernflow.core import debugging  # noqa: E402
from kernflow.core import config  # noqa: E402
from kernflow.core import dtypes_ns as dtypes  # noqa: E402
from kernflow.core import nest_ns as nest  # noqa: E402
from kernflow.core import feature_column  # noqa: E402
from kernflow.core import mixed_precision  # noqa: E402

initializers.tables_initializer = tables_initializer  # noqa: F405 - (lookup_ops loads after init_ops)

__version__ = "0.1.0"

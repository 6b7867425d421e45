"""Training utilities shared by the hooks, the monitored sessions and the `Supervisor` (TF1's
training_util): `kf.train.write_graph` and the cached read of the global step."""

from __future__ import annotations

import os

from google.protobuf import text_format

from kernflow.core.framework import ops as _ops
from kernflow.core.train import checkpoint_format as _cf
from kernflow.core.train.learning_rate import get_global_step

__all__ = ["write_graph"]

# The collection caching the tensor that reads the global step for hooks (TF's name).
GLOBAL_STEP_READ_KEY = "global_step_read_op_cache"


def write_graph(graph_or_graph_def, logdir, name, as_text=True) -> str:
    """Writes a graph (or GraphDef) to ``logdir/name`` atomically, creating `logdir` if needed.

    Args:
        graph_or_graph_def: a `Graph` or a `GraphDef` protobuf.
        logdir: the directory.
        name: the file name (e.g. "graph.pbtxt").
        as_text: text format (default) or binary.

    Returns:
        The path written.
    """
    graph_def = graph_or_graph_def
    if isinstance(graph_or_graph_def, _ops.Graph):
        graph_def = graph_or_graph_def.as_graph_def()
    path = os.path.join(os.fspath(logdir), name)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    data = text_format.MessageToString(graph_def).encode("utf-8") if as_text \
        else graph_def.SerializeToString()
    try:
        _cf.atomic_write_bytes(path, data)
    except OSError as e:
        raise _cf.os_error(e, f"Failed to write graph {path}") from e
    return path


def get_global_step_read(graph=None):
    """The tensor reading the global step for hooks, or None when it was not created yet."""
    g = graph or _ops.get_default_graph()
    reads = g.get_collection(GLOBAL_STEP_READ_KEY)
    if len(reads) > 1:
        raise RuntimeError(f"There are multiple items in collection {GLOBAL_STEP_READ_KEY}. There "
                           "should be only one.")
    return reads[0] if reads else None


def get_or_create_global_step_read(graph=None):
    """A tensor with the value of the global step (one per graph, cached in a collection).

    Hooks fetch it in their `before_run`, so they see the step before or after the call's update,
    whichever the executor ran first; they re-read it when the difference matters.

    Returns:
        The tensor, or None if the graph has no global step.
    """
    g = graph or _ops.get_default_graph()
    read = get_global_step_read(g)
    if read is not None:
        return read
    step = get_global_step(g)
    if step is None:
        return None
    with g.as_default(), _ops.name_scope(None), _ops.name_scope(step.op.name + "/"):
        read = _ops.convert_to_tensor(step) + 0
    g.add_to_collection(GLOBAL_STEP_READ_KEY, read)
    return read


def global_step_reader(session, graph=None):
    """fn() -> the global step's current buffer (a 0-d array: take `int()` of it at once, it
    changes in place), read without running a step, or None.

    The hooks that watch the global step (`StepCounterHook`, `SummarySaverHook`...) fetch the
    global step read in every step in TF, and run the session again for its value after the
    update when they act on it. In the embedded runtime a ref variable in host memory can be
    read directly after the step instead (the exact value after the update, in ~0.2 us, where a
    fetch added to every step cost ~2 us of a 220 us step: tools/bench_summaries.py); the hooks
    use this reader when `session` offers one and fetch the read tensor as TF's do otherwise
    (a remote session, a global step on a GPU, a session of another kind).

    Args:
        session: the raw session the hook got in `after_create_session`.
        graph: the graph of the global step (default: the session's graph).

    Returns:
        The reader, or None. The reader raises FailedPreconditionError while the global step is
        uninitialized.
    """
    step = get_global_step(graph if graph is not None else getattr(session, "graph", None))
    factory = getattr(session, "_variable_reader", None)
    if step is None or factory is None:
        return None
    return factory(step.op.name)

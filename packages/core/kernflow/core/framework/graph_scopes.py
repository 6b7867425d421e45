"""The module-level TF1 scopes and collection helpers, on the default graph (`kf.name_scope`,
`kf.control_dependencies`, `init_scope`, `kf.device`, `kf.colocate_with`, collections).

Re-exported by `kernflow.core.framework.ops`, which they are written against.
"""

from __future__ import annotations

import contextlib

from kernflow.core.framework.ops import _get_graph_from_inputs, get_default_graph

__all__ = ["name_scope", "control_dependencies", "init_scope", "device", "colocate_with",
           "add_to_collection", "add_to_collections", "get_collection", "get_collection_ref"]


def name_scope(name, default_name=None, values=None):
    """TF1 `name_scope(name, default_name, values)` on the graph of `values` (or the default)."""
    g = _get_graph_from_inputs(values or [])
    n = name if name is not None else default_name
    if n is None and name is None and default_name is None:
        n = ""
    return g.name_scope(n)


def control_dependencies(control_inputs):
    return get_default_graph().control_dependencies(control_inputs)


@contextlib.contextmanager
def init_scope():
    """A scope for creating state (variables, optimizer slots, global step, queues): no outer
    control dependencies and, as TF1's, outside any cond or while loop being built, so state made
    inside a loop body (a `get_variable` in an RNN cell) lives in the root frame."""
    g = get_default_graph()
    saved = g._get_control_flow_context()
    g._set_control_flow_context(None)
    try:
        with g.control_dependencies(None):
            yield
    finally:
        g._set_control_flow_context(saved)


def device(device_name_or_function):
    return get_default_graph().device(device_name_or_function)


def colocate_with(op, ignore_existing=False):
    return get_default_graph().colocate_with(op, ignore_existing)


def add_to_collection(name, value):
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    get_default_graph().add_to_collections(names, value)


def get_collection(key, scope=None):
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key):
    return get_default_graph().get_collection_ref(key)

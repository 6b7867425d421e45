"""`kf.train.Scaffold`: the init, ready and save pieces a monitored session needs (TF1).

`finalize()` fills each piece not given to the constructor from its graph collection, creating a
default (and adding it to the collection) when the collection is empty, then finalizes the graph:

| piece | collection | default |
|---|---|---|
| init_op | INIT_OP | `global_variables_initializer()` |
| ready_op | READY_OP | `report_uninitialized_variables()` (global and local variables) |
| ready_for_local_init_op | READY_FOR_LOCAL_INIT_OP | `report_uninitialized_variables(global_variables())` |
| local_init_op | LOCAL_INIT_OP | `Scaffold.default_local_init_op()`: local variables + TABLE_INITIALIZERS |
| summary_op | SUMMARY_OP | `kf.summary.merge_all()` (None when there are no summaries) |
| saver | SAVERS | `Saver(sharded=True, allow_empty=True)` |

Example::

    scaffold = kf.train.Scaffold(init_fn=lambda scaffold, sess: warm_start(sess))
    with kf.train.MonitoredTrainingSession(scaffold=scaffold, checkpoint_dir=d) as sess:
        ...
"""

from __future__ import annotations

import logging

from kernflow.core.framework import ops as _ops
from kernflow.core.framework.graph_keys import GraphKeys

__all__ = ["Scaffold"]

_log = logging.getLogger(__name__)


def _default_init_op():
    from kernflow.core.ops import variables
    return variables.global_variables_initializer()


def _default_ready_op():
    from kernflow.core.ops import variables
    return variables.report_uninitialized_variables()


def _default_ready_for_local_init_op():
    from kernflow.core.ops import variables
    return variables.report_uninitialized_variables(variables.global_variables())


def _default_summary_op():
    from kernflow.core.summary.summary_ops import merge_all
    return merge_all()


def _default_saver():
    from kernflow.core.protobuf import saver_pb2
    from kernflow.core.train.saver import Saver
    return Saver(sharded=True, allow_empty=True, write_version=saver_pb2.SaverDef.V2)


class Scaffold:
    """Creates or gathers the pieces needed to initialize, check and save a model.

    Pieces given here are used as they are (and not added to the collections); the others come
    from the graph's collections or are created by `finalize()`.

    Args:
        init_op: op initializing the variables when no checkpoint is restored.
        init_feed_dict: feeds for `init_op`.
        init_fn: fn(scaffold, session) called after `init_op`.
        ready_op: op returning the names of uninitialized variables (empty when ready).
        ready_for_local_init_op: the same for what `local_init_op` needs.
        local_init_op: op run in every new session (local variables, tables).
        summary_op: the merged summary op.
        saver: the `Saver` for checkpoints.
        copy_from_scaffold: a `Scaffold` whose pieces fill those not given here.
        local_init_feed_dict: feeds for `local_init_op`.

    Raises:
        TypeError: `copy_from_scaffold` is not a Scaffold.
    """

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None, saver=None,
                 copy_from_scaffold=None, local_init_feed_dict=None):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            other = copy_from_scaffold

            def pick(mine, name):
                return mine if mine is not None else getattr(other, "_" + name)
            init_op, init_feed_dict = pick(init_op, "init_op"), pick(init_feed_dict, "init_feed_dict")
            ready_op = pick(ready_op, "ready_op")
            ready_for_local_init_op = pick(ready_for_local_init_op, "ready_for_local_init_op")
            local_init_op = pick(local_init_op, "local_init_op")
            local_init_feed_dict = pick(local_init_feed_dict, "local_init_feed_dict")
            summary_op, saver = pick(summary_op, "summary_op"), pick(saver, "saver")
            init_fn = pick(init_fn, "user_init_fn")
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._summary_op = summary_op
        self._saver = saver
        self._local_init_feed_dict = local_init_feed_dict
        self._graph = None

    def finalize(self):
        """Creates the missing pieces and finalizes the graph; returns self.

        Raises:
            RuntimeError: a collection holds more than one candidate for a piece.
        """
        if self._graph is None:
            self._graph = _ops.get_default_graph()
        graph = self._graph
        with graph.as_default():
            if self._init_op is None:
                self._init_op = self.get_or_default("init_op", GraphKeys.INIT_OP, _default_init_op)
            if self._ready_op is None:
                self._ready_op = self.get_or_default("ready_op", GraphKeys.READY_OP, _default_ready_op)
            if self._ready_for_local_init_op is None:
                self._ready_for_local_init_op = self.get_or_default(
                    "ready_for_local_init_op", GraphKeys.READY_FOR_LOCAL_INIT_OP,
                    _default_ready_for_local_init_op)
            if self._local_init_op is None:
                self._local_init_op = self.get_or_default("local_init_op", GraphKeys.LOCAL_INIT_OP,
                                                          Scaffold.default_local_init_op)
            if self._summary_op is None:
                self._summary_op = self.get_or_default("summary_op", GraphKeys.SUMMARY_OP,
                                                       _default_summary_op)
            if self._saver is None:
                self._saver = self.get_or_default("saver", GraphKeys.SAVERS, _default_saver)
            self._saver.build()
        if not graph.finalized:
            graph.finalize()
            _log.info("Graph was finalized.")
        return self

    @property
    def init_fn(self):
        """fn(session) calling the constructor's init_fn(scaffold, session), or None."""
        return self._init_fn

    @property
    def init_op(self):
        return self._init_op

    @property
    def ready_op(self):
        return self._ready_op

    @property
    def ready_for_local_init_op(self):
        return self._ready_for_local_init_op

    @property
    def local_init_op(self):
        return self._local_init_op

    @property
    def summary_op(self):
        return self._summary_op

    @property
    def saver(self):
        return self._saver

    @property
    def init_feed_dict(self):
        return self._init_feed_dict

    @property
    def local_init_feed_dict(self):
        return self._local_init_feed_dict

    @staticmethod
    def get_or_default(arg_name, collection_key, default_constructor):
        """The single element of a collection of the default graph, or a new default added to it.

        Raises:
            RuntimeError: the collection holds more than one element.
        """
        elements = _ops.get_collection(collection_key)
        if elements:
            if len(elements) > 1:
                raise RuntimeError(f"More than one item in the collection \"{collection_key}\". "
                                   f"Please indicate which one to use by passing it to the "
                                   f"kf.train.Scaffold constructor as:  "
                                   f"kf.train.Scaffold({arg_name}=item to use)")
            return elements[0]
        op = default_constructor()
        if op is not None:
            _ops.add_to_collection(collection_key, op)
        return op

    @staticmethod
    def default_local_init_op():
        """An op initializing the local variables and the tables (TABLE_INITIALIZERS) of the
        default graph."""
        from kernflow.core.ops import control_flow_ops, variables
        return control_flow_ops.group(variables.local_variables_initializer(),
                                      *_ops.get_collection(GraphKeys.TABLE_INITIALIZERS))

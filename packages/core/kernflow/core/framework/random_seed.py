"""Graph- and op-level random seeds, with TF1's rules (`tf.compat.v1.set_random_seed`, `get_seed`).

A random op has two int attrs, ``seed`` and ``seed2``; both zero means "seed the kernel from OS
entropy" (nondeterministic). `get_seed` turns the graph-level seed (``Graph.seed``) and an
optional op-level seed into that pair:

* neither set: ``(None, None)`` (the op gets seed=0, seed2=0, nondeterministic);
* graph seed set, op seed None: ``(graph_seed, op count of the graph)``, so a graph built the same
  way twice draws the same numbers;
* graph seed None, op seed set: ``(DEFAULT_GRAPH_SEED, op_seed)``;
* both set: ``(graph_seed, op_seed)``.

A pair that comes out ``(0, 0)`` is replaced by ``(0, 2**31 - 1)``: zeros mean "nondeterministic"
to the kernels, which is not what a user who asked for seed 0 wants.
"""

from __future__ import annotations

from kernflow.core.framework import ops as _ops

__all__ = ["DEFAULT_GRAPH_SEED", "get_seed", "set_random_seed"]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1


def _truncate_seed(seed) -> int:
    return int(seed) % _MAXINT32


def get_seed(op_seed):
    """Returns the (graph-level, op-level) seed pair a random op should use.

    Args:
        op_seed: the op-level seed (an int) or None.

    Returns:
        A tuple ``(seed1, seed2)`` of ints, or ``(None, None)`` when neither the default graph's
        seed nor `op_seed` is set.
    """
    graph = _ops.get_default_graph()
    global_seed = graph.seed
    if global_seed is not None:
        if op_seed is None:
            op_seed = graph.version
        seeds = (_truncate_seed(global_seed), _truncate_seed(op_seed))
    elif op_seed is not None:
        seeds = (DEFAULT_GRAPH_SEED, _truncate_seed(op_seed))
    else:
        seeds = (None, None)
    if seeds == (0, 0):
        return (0, _MAXINT32)
    return seeds


def set_random_seed(seed):
    """Sets the graph-level random seed of the default graph.

    Random ops created afterwards in this graph without an op-level seed get deterministic seeds
    derived from `seed` and their position in the graph (see `get_seed`).

    Args:
        seed: an int, or None to clear the graph-level seed.
    """
    _ops.get_default_graph().seed = None if seed is None else int(seed)

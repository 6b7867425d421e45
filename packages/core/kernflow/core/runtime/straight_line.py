"""The straight-line executor: a partition compiled to one Python function.

A plan whose kernels are all synchronous and that has no control flow is compiled to a function
that calls the kernels in topological order, one statement per node, with every intermediate in a
local variable deleted right after its last consumer (TF's single-threaded executor, compiled).
Kernels are bound as globals of the generated code, preloaded constants too; a failing statement
maps back to its node through the generated code's line numbers, so errors name the op.

The function is what the inline path calls (`ExecutorPlan.run_inline`); `StraightLineExecution`
wraps it in the executor interface (`execution.Execution`). The frames executor is the reference
it must agree with (see `execution`).
"""

from __future__ import annotations

import linecache
import weakref

from kernflow.core.framework import errors
from kernflow.core.runtime.execution import STRAIGHT_LINE, Execution, node_error

__all__ = ["StraightLineExecution", "call_statement", "compile_straight_line", "deref",
           "exec_generated", "generated_line_node", "node_statement"]


def compile_straight_line(plan, inplace: set, release: bool = True):
    """Compiles `plan` into ``fn(args, ctx) -> fetched values``.

    Args:
        plan: the `ExecutorPlan` (no asynchronous kernel, no control flow).
        inplace: ids of nodes whose in-place kernel may write into input 0's buffer
            (`executor.inplace_nodes`).
        release: delete each intermediate after its last consumer (benchmarks turn it off).

    Returns:
        The function; its ``source``, ``namespace`` and ``line_nodes`` attributes show the generated
        code, its globals and the node of each line.
    """
    nodes = plan.nodes
    last_use: dict[int, int] = {}
    for n in nodes:
        for s in n.inputs:
            last_use[s] = n.id
    pinned = set(plan.retval_slots)
    g = {"_errors": errors}
    if plan.device is not None and getattr(plan.device, "has_device_memory", False):
        g["_to_host"], g["_to_device"] = plan.device.to_host, plan.device.to_device
    lines = ["def _run(_args, _ctx):"]
    line_node = {}
    for i, s in enumerate(plan.arg_slots):
        lines.append(f"    v{s} = _args[{i}]")
    for s, v in enumerate(plan._init_vals):
        if v is not None:
            g[f"c{s}"] = v

    def ref(s, by_value):
        name = f"c{s}" if plan._init_vals[s] is not None else f"v{s}"
        return deref(name) if by_value else name

    for n in nodes:
        stmt, _ = node_statement(n, [ref(s, d) for s, d in zip(n.inputs, n.deref)], g, inplace)
        if stmt is None:
            continue  # nothing to run: its control edges are honoured by the statement order
        line_node[len(lines) + 1] = n
        lines.append("    " + stmt)
        dead = [s for s in n.inputs if last_use.get(s) == n.id and s not in pinned
                and (s in plan.arg_slots or plan._init_vals[s] is None)]
        for i in range(n.num_outputs):
            s = n.out_base + i
            if s not in last_use and s not in pinned:
                dead.append(s)
        if dead and release:
            lines.append(f"    del {', '.join(f'v{s}' for s in dict.fromkeys(dead))}")
    rets = [ref(s, False) for s in plan.retval_slots]
    lines.append(f"    return [{', '.join(rets)}]")
    src = "\n".join(lines) + "\n"
    filename = f"<kernflow plan {plan.id} on {plan.device.name if plan.device else '?'}>"
    inner = exec_generated(src, filename, g)["_run"]

    def run(args, ctx):
        try:
            return inner(args, ctx)
        except Exception as e:  # noqa: BLE001 - re-raised as a TF error naming the node
            raise node_error(e, generated_line_node(e, filename, line_node)) from e

    run.source = src
    run.namespace = g
    run.line_nodes = line_node
    return run


def deref(name: str) -> str:
    """The generated expression for the buffer of the Var in variable `name` (a ref input read by
    value): its `_value` without a call, `read()` (FailedPreconditionError) when it has none. A
    Python call per read cost a training step of seven variables ~1 us more inside the step."""
    return f"({name}._value if {name}._value is not None else {name}.read())"



def node_statement(n, args: list, g: dict, inplace: set):
    """(the generated statement of plan node `n`, whether it calls a kernel); (None, False) for a
    NoOp without inputs (nothing to run). Binds the kernel into the namespace `g`.

    Args:
        n: the plan `_Node`.
        args: the expressions of its inputs, in order.
        g: the generated code's globals.
        inplace: ids of nodes whose in-place kernel may write into input 0's buffer.
    """
    g[f"k{n.id}"] = n.compute
    if n.op_type == "NoOp" and not n.inputs:
        return None, False
    args = list(args)
    for pos, fn in n.convert:
        args[pos] = f"{'_to_host' if fn == 'host' else '_to_device'}({args[pos]})"
    outs = [f"v{n.out_base + i}" for i in range(n.num_outputs)]
    if n.forwards and n.num_outputs == 1 and len(args) == 1 and not n.needs_ctx and not n.convert:
        return f"{outs[0]} = {args[0]}", False   # Identity: a name binding, no call
    if n.needs_ctx:
        args.insert(0, "_ctx")
    kname = f"k{n.id}"
    if n.id in inplace:
        kname = f"k{n.id}_ip"   # input 0 is a dead, unaliased buffer: write the result into it
        g[kname] = n.inplace
    return call_statement(outs, f"{kname}({', '.join(args)})"), True


def call_statement(outs: list, call: str) -> str:
    """The generated statement for a kernel call with output variables `outs`: the bare call,
    ``v = call`` or ``a, b = call``."""
    if not outs:
        return call
    return f"{', '.join(outs)} = {call}"


def exec_generated(src: str, filename: str, namespace: dict) -> dict:
    """Runs generated source into `namespace`, registered with linecache so tracebacks show it
    while a function it defined lives (plans evicted from a session's cache take their source)."""
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(compile(src, filename, "exec"), namespace)  # noqa: S102 - generated from a plan, no user text
    for v in list(namespace.values()):
        if getattr(getattr(v, "__code__", None), "co_filename", None) == filename:
            weakref.finalize(v, linecache.cache.pop, filename, None)
    return namespace


def generated_line_node(e: BaseException, filename: str, line_node: dict):
    """The node of the innermost line of generated code `filename` in e's traceback (or None)."""
    tb = e.__traceback__
    node = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            node = line_node.get(tb.tb_lineno)
        tb = tb.tb_next
    return node


class StraightLineExecution(Execution):
    """One run of a plan's straight-line function, behind the executor interface.

    `start` runs the whole step on the calling thread; `abort` cannot interrupt a statement that is
    running (kernels here never block), but a run aborted before `start` runs nothing. A traced step
    records no per-node stats here: callers trace with a dataflow executor.
    """

    executor = STRAIGHT_LINE

    def __init__(self, plan, args, ctx, done=None):
        super().__init__(plan, ctx, done)
        self._args = args
        self._outputs = None

    def start(self) -> None:
        if self.error is None:
            try:
                self._outputs = self.plan.straight_line(self._args, self.ctx)
            except Exception as e:  # noqa: BLE001 - the step fails with a TF error naming the node
                self.abort(node_error(e, None))
        self._args = None
        self._finish()

    def results(self) -> list:
        if self.error is not None:
            raise self.error
        return self._outputs

"""Hook specifications of the `kernflow` pluggy project (entry-point group ``kernflow``).

Every hook hands the plugin a registry to add to (registrar style) and returns nothing. Hooks are
called once per process, the first time the runtime needs what they provide (not at import), in
plugin registration order. A plugin may implement any subset. Built-in kernels (kernflow-kernels-cpu,
kernflow-kernels-gpu) use exactly these hooks; see docs/plugins.md.
"""

import pluggy

hookspec = pluggy.HookspecMarker("kernflow")
hookimpl = pluggy.HookimplMarker("kernflow")


@hookspec
def kernflow_register_ops(registry):
    """Declare custom op types.

    Called before the first kernel lookup and before `kernflow.core.plugins.registries()` returns.
    Use ``registry.register_op(name, inputs=..., outputs=..., attrs=..., shape_fn=..., doc=...)``
    (the signature language of `kernflow.core.framework.op_def_registry.register_op`). To give users a
    Python wrapper, import your module's wrapper function directly; ops are usable by name through
    ``kf.load_op("Name")`` too.
    """


@hookspec
def kernflow_register_devices(registry):
    """Add device factories: ``registry.register_device_factory(device_type, factory, priority)``.

    Called when the first session (or `kf.Session.list_devices`) needs devices. ``factory(count,
    config, job, replica, task)`` returns up to `count` `Device` objects for that task; it may
    return none (for example when no GPU is present). Higher priority types are preferred by
    placement.
    """


@hookspec
def kernflow_register_kernels(registry):
    """Add op kernels: ``registry.register(op_type, device_type, factory, constraints=..., ...)``.

    Called once, when the first kernel is looked up. Kernels are keyed by (op type, device type,
    dtype constraints); registering the same key twice raises an error naming both call sites.
    """


@hookspec
def kernflow_register_optimizers(registry):
    """Add optimizers by name: ``registry.register(name, optimizer_class)``.

    Called the first time `kf.train.get_optimizer(name)` (or a CLI flag naming an optimizer) looks
    one up.
    """


@hookspec
def kernflow_register_transports(registry):
    """Add tensor transports: ``registry.register(name, factory, priority=0)``.

    Called the first time a process negotiates a transport with a peer task or answers GetStatus.
    ``factory()`` returns a `kernflow.core.runtime.transport.Transport` (one per process): how a
    tensor moves from the task that produced it to a task (or client) that receives it. Between two
    tasks the transport of the highest priority that both serve and that reaches the peer is used,
    "grpc" (kernflow-client) otherwise; see `kernflow.core.runtime.transport`.
    """


@hookspec
def kernflow_register_session_factories(registry):
    """Add session factories by target scheme: ``registry.register(scheme, factory)``.

    Called by the first `kf.Session(target)`. ``factory(target, graph, config)`` returns an object
    with ``run(feed_names, feed_values, fetch_names, targets, options, run_metadata)`` (names in,
    values out), ``close()`` and ``list_devices()``; a ``reset(target, containers, config)``
    attribute of the factory implements `kf.Session.reset`. The empty scheme ``""`` is the
    embedded runtime.
    """


@hookspec
def kernflow_register_servers(registry):
    """Add in-process task servers by protocol: ``registry.register(protocol, factory)``.

    Called by the first `kf.train.Server(cluster, job_name, task_index, protocol=...)`, after the
    arguments are checked. ``factory(cluster=, job_name=, task_index=, config=)`` receives a
    `ClusterSpec` in which that task exists with a ``host:port`` address and returns an unstarted
    server with ``target`` (the session target of its master), ``cluster_spec`` (with a bound port
    in place of port 0), ``start()`` (idempotent), ``join(timeout=None)`` and ``stop()`` (called
    once). kernflow-worker registers ``"grpc"``; core registers none.
    """


@hookspec
def kernflow_register_commands(registry):
    """Add `kernflow` CLI subcommands: ``registry.register(name, help, configure, run, identity=None)``.

    Called when the `kernflow` command starts. ``configure(argparse_parser)`` adds options;
    ``run(args) -> int`` executes the command; the optional ``identity(args)`` returns the
    `ProcessIdentity` (service name, resource attributes) that tracing, metrics and logging are set
    up with before ``run``. Every command also gets ``--trace``, ``--metrics`` and ``--log-level``.
    """

"""Registries handed to plugin hooks. Each explains itself: duplicates name both call sites and
failed lookups list what does exist."""

from __future__ import annotations

import dataclasses
import difflib
import threading
from typing import Any, Callable

from kernflow.core.framework import errors
from kernflow.core.framework import op_def_registry
from kernflow.core.framework.op_def_registry import call_site

__all__ = ["OpRegistrar", "KernelDef", "KernelRegistry", "DeviceRegistry", "NamedRegistry",
           "TransportRegistry", "ServerRegistry", "CommandRegistry"]


class OpRegistrar:
    """Handed to `kernflow_register_ops`: declares custom op types in the global op registry."""

    def register_op(self, name: str, **kwargs):
        """Same arguments as `op_def_registry.register_op`; re-running the same hook is a no-op."""
        site = call_site()
        old = op_def_registry.lookup(name)
        if old is not None and old.site == site:
            return old
        op = op_def_registry.register_op(name, **kwargs)
        op.site = site
        return op


@dataclasses.dataclass
class KernelDef:
    """How to build the kernel of one op type on one device type.

    `factory(ctx)` receives a `KernelConstruction` (attrs, dtypes, device) and returns the compute
    callable: ``compute(*inputs)`` for sync kernels (``compute(step_ctx, *inputs)`` when
    `needs_ctx`), ``compute(step_ctx, inputs, done)`` for async ones. A kernel with one output returns
    the value; with several, a sequence.
    """
    op_type: str
    device_type: str
    factory: Callable
    constraints: dict[str, tuple] = dataclasses.field(default_factory=dict)
    site: str = ""
    # True, or fn(inputs) -> bool evaluated per run: the executor hands such kernels to the inter-op
    # pool instead of running them inline (TF's OpKernel::IsExpensive).
    expensive: Any = False
    is_async: bool = False
    needs_ctx: bool = False
    # Input/output arg names kept in host memory on accelerator devices.
    host_memory: tuple = ()
    # Buffer forwarding (TF's forward_input_or_allocate_output): `fresh` kernels always return
    # newly allocated outputs; `inplace(ctx)` builds a compute that may write its result into input
    # 0's buffer (falling back to allocating); `forwards` kernels return input 0 itself (Identity).
    # The executor uses `inplace` only when input 0 is a fresh buffer nothing else reads later.
    fresh: bool = False
    inplace: Callable | None = None
    forwards: bool = False

    def matches(self, attrs: dict) -> bool:
        for attr, allowed in self.constraints.items():
            v = attrs.get(attr)
            if v is None:
                continue
            if isinstance(v, list):
                if any(x.base_dtype not in allowed for x in v):
                    return False
            elif getattr(v, "base_dtype", v) not in allowed:
                return False
        return True


class KernelRegistry:
    """Kernels keyed by (op type, device type, dtype constraints)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._kernels: dict[tuple[str, str], list[KernelDef]] = {}

    def register(self, op_type: str, device_type: str, factory: Callable, *, constraints=None,
                 expensive=False, is_async=False, needs_ctx=False, host_memory=(), site=None,
                 fresh=False, inplace=None, forwards=False) -> KernelDef:
        """Registers a kernel factory. See `KernelDef` for the calling conventions.

        Args:
            constraints: {attr name: iterable of DTypes the kernel supports}, e.g. {"T": [float32]}.

        Raises:
            ValueError: if a kernel with the same key exists (naming both call sites).
        """
        from kernflow.core.framework import dtypes
        cons = {k: tuple(dtypes.as_dtype(t) for t in v) for k, v in (constraints or {}).items()}
        kd = KernelDef(op_type, device_type.upper(), factory, cons, site or call_site(), expensive,
                       is_async, needs_ctx, tuple(host_memory), fresh, inplace, forwards)
        with self._lock:
            lst = self._kernels.setdefault((op_type, kd.device_type), [])
            for old in lst:
                if old.constraints == cons:
                    raise ValueError(f"kernel for ({op_type}, {kd.device_type}, {_cons_str(cons)}) "
                                     f"registered twice: first at {old.site}, again at {kd.site}")
            lst.append(kd)
        return kd

    def register_simple(self, op_type: str, device_type: str, fn: Callable, *, inplace_fn=None,
                        **kwargs) -> KernelDef:
        """Registers `fn(*inputs)` as the compute function (its attrs are not needed).

        `inplace_fn(*inputs)`, if given, may write its result into input 0 (see `KernelDef`).
        """
        kwargs.setdefault("site", call_site())
        if inplace_fn is not None:
            kwargs["inplace"] = lambda ctx: inplace_fn
            kwargs.setdefault("fresh", True)
        return self.register(op_type, device_type, lambda ctx: fn, **kwargs)

    def find(self, op_type: str, device_type: str, attrs: dict) -> KernelDef | None:
        """Returns the kernel of `op_type` on `device_type` for these attrs, or None."""
        for kd in self._kernels.get((op_type, device_type), ()):
            if kd.matches(attrs):
                return kd
        return None

    def lookup(self, op_type: str, device_type: str, attrs: dict, node_name: str = "") -> KernelDef:
        """Like `find`, but raises NotFoundError naming the devices that do have a kernel."""
        kd = self.find(op_type, device_type, attrs)
        if kd is not None:
            return kd
        have = sorted({d for (op, d), lst in self._kernels.items() if op == op_type and lst})
        if have:
            regs = "; ".join(f"device='{kd.device_type}'; {_cons_str(kd.constraints)}"
                             for d in have for kd in self._kernels[(op_type, d)])
            msg = (f"No registered '{op_type}' OpKernel for '{device_type}' devices compatible with "
                   f"node {node_name or op_type} (attrs {_attrs_str(attrs)}). Registered: {regs}")
        else:
            close = difflib.get_close_matches(op_type, sorted({op for op, _ in self._kernels}), n=3)
            msg = (f"No OpKernel was registered to support Op '{op_type}' used by node "
                   f"{node_name or op_type} on any device."
                   + (f" Similar ops with kernels: {', '.join(close)}." if close else ""))
        raise errors.NotFoundError(None, None, msg)

    def device_types_for(self, op_type: str, attrs: dict) -> list[str]:
        """Returns the device types with a kernel for this op and attrs."""
        return sorted({d for (op, d), lst in self._kernels.items()
                       if op == op_type and any(k.matches(attrs) for k in lst)})

    def op_types(self, device_type: str | None = None) -> set[str]:
        return {op for (op, d), lst in self._kernels.items() if lst and (device_type in (None, d))}

    def kernel_defs(self, device_type: str | None = None) -> list[KernelDef]:
        """Every registered kernel (of `device_type` when given), by op type."""
        with self._lock:
            return [kd for (op, d), lst in sorted(self._kernels.items())
                    if device_type in (None, d) for kd in lst]


def _cons_str(cons) -> str:
    return ", ".join(f"{k} in [{', '.join(d.name for d in v)}]" for k, v in cons.items()) or "any types"


def _attrs_str(attrs) -> str:
    return "{" + ", ".join(f"{k}={getattr(v, 'name', v)}" for k, v in attrs.items()
                          if getattr(v, "base_dtype", None) is not None) + "}"


@dataclasses.dataclass
class DeviceFactory:
    device_type: str
    factory: Callable
    priority: int
    site: str


class DeviceRegistry:
    """Device factories by device type ("CPU", "GPU"...)."""

    def __init__(self):
        self._factories: dict[str, DeviceFactory] = {}

    def register_device_factory(self, device_type: str, factory: Callable, priority: int = 0) -> None:
        """Registers ``factory(count, config, job, replica, task) -> list[Device]``.

        Raises:
            ValueError: if the type already has a factory (both sites named).
        """
        site = call_site()
        t = device_type.upper()
        old = self._factories.get(t)
        if old is not None:
            raise ValueError(f"device type {t} registered twice: first at {old.site}, again at {site}")
        self._factories[t] = DeviceFactory(t, factory, priority, site)

    def device_types(self) -> list[str]:
        """Registered types, highest priority first."""
        return [f.device_type for f in sorted(self._factories.values(), key=lambda f: -f.priority)]

    def priority(self, device_type: str) -> int:
        f = self._factories.get(device_type)
        return f.priority if f else -1

    def create_devices(self, config=None, job="localhost", replica=0, task=0) -> list:
        """Creates the devices of one task, honouring ``config.device_count``."""
        counts = dict(config.device_count) if config is not None else {}
        out = []
        for t in self.device_types():
            n = counts.get(t, counts.get(t.lower(), None))
            if n == 0:
                continue
            out.extend(self._factories[t].factory(n, config, job, replica, task))
        return out


class NamedRegistry:
    """A name -> object registry (optimizers, session factories)."""

    def __init__(self, what: str):
        self._what = what
        self._items: dict[str, tuple[Any, str]] = {}

    def register(self, name: str, obj) -> None:
        """Registers `obj` as `name`. Raises ValueError on a duplicate, naming both sites."""
        site = call_site()
        if name in self._items:
            raise ValueError(f"{self._what} {name!r} registered twice: first at "
                             f"{self._items[name][1]}, again at {site}")
        self._items[name] = (obj, site)

    def get(self, name: str):
        """Returns the object registered as `name`.

        Raises:
            NotFoundError: listing the registered names.
        """
        try:
            return self._items[name][0]
        except KeyError:
            raise errors.NotFoundError(None, None, f"no {self._what} named {name!r}; registered: "
                                       f"{', '.join(sorted(map(repr, self._items))) or 'none'}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name) -> bool:
        return name in self._items


class TransportRegistry(NamedRegistry):
    """Tensor transports by name, each with a priority (`kernflow.core.runtime.transport`)."""

    def __init__(self):
        super().__init__("transport")
        self._priority: dict[str, int] = {}

    def register(self, name: str, factory, priority: int = 0) -> None:
        """Registers ``factory() -> Transport`` as `name`.

        Args:
            name: what tasks advertise in GetStatus and name in RecvTensor ("grpc", "shm").
            factory: called once per process, when a task first negotiates with a peer or answers
                GetStatus; returns a `kernflow.core.runtime.transport.Transport`.
            priority: between two tasks, the transport of the highest priority that both serve
                (and that can reach the peer) is used; ties go by name.

        Raises:
            ValueError: on a duplicate name (both call sites named) or an empty or malformed name.
        """
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"transport name {name!r}: use letters, digits, '-' and '_'")
        site = call_site()
        if name in self._items:
            raise ValueError(f"transport {name!r} registered twice: first at {self._items[name][1]}, "
                             f"again at {site}")
        self._items[name] = (factory, site)
        self._priority[name] = int(priority)

    def by_priority(self) -> list[tuple[str, object]]:
        """(name, factory) of every transport, highest priority first, ties by name."""
        return [(n, self._items[n][0]) for n in sorted(self._items, key=lambda n: (-self._priority[n], n))]

    def priority(self, name: str) -> int:
        """The priority `name` was registered with (NotFoundError listing the names if none)."""
        self.get(name)
        return self._priority[name]


# What to install for each server protocol kernflow ships, named when none is registered for it.
SERVER_PACKAGES = {"grpc": "`pip install packages/client packages/master packages/worker` "
                           "(kernflow-client, kernflow-master, kernflow-worker)"}


class ServerRegistry(NamedRegistry):
    """In-process task servers by protocol ("grpc"): what `kf.train.Server` builds."""

    def __init__(self):
        super().__init__("server factory")

    def get(self, protocol: str):
        """Returns the server factory registered for `protocol`.

        Raises:
            ImportError: no plugin serves a protocol kernflow ships ("grpc"); names what to install.
            ValueError: no plugin serves any other protocol; lists the registered ones.
        """
        if protocol in self:
            return super().get(protocol)
        have = ", ".join(map(repr, self.names())) or "none"
        if protocol in SERVER_PACKAGES:
            raise ImportError(f"kf.train.Server(protocol={protocol!r}) needs kernflow's distributed "
                              f"runtime, and no installed plugin serves {protocol!r} (server protocols: "
                              f"{have}); install it with {SERVER_PACKAGES[protocol]}")
        raise ValueError(f"Unsupported protocol {protocol!r}: no installed plugin serves it (server "
                         f"protocols: {have})")


@dataclasses.dataclass
class Command:
    name: str
    help: str
    configure: Callable
    run: Callable
    site: str
    identity: Callable | None = None


class CommandRegistry:
    """`kernflow` CLI subcommands contributed by plugins."""

    def __init__(self):
        self.commands: dict[str, Command] = {}

    def register(self, name: str, help: str, configure: Callable, run: Callable,
                 identity: Callable | None = None) -> None:
        """Adds a subcommand.

        Args:
            name: the subcommand (``kernflow NAME``).
            help: one line for ``kernflow --help``.
            configure: ``configure(argparse_parser)`` adds the command's options.
            run: ``run(args) -> int`` executes it.
            identity: ``identity(args) -> ProcessIdentity`` (`kernflow.core.process_identity`):
                the service name and resource attributes that tracing, metrics and logging give
                this process, from its parsed arguments (default: service ``kernflow-NAME``).
        """
        site = call_site()
        if name in self.commands:
            raise ValueError(f"command {name!r} registered twice: first at "
                             f"{self.commands[name].site}, again at {site}")
        self.commands[name] = Command(name, help, configure, run, site, identity)

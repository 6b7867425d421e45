"""kernflow-kernels-cpu: the CPU device and numpy kernels, an ordinary `kernflow` entry-point plugin.

Each module maps one op family to numpy callables (`register(registry)`); `plugin` wires them to
the hooks.
"""

"""`kf.nn`: neural-network ops (kernflow.core.ops.nn_ops)."""

try:
    from kernflow.core.ops.nn_ops import *  # noqa: F403
except ModuleNotFoundError as _e:  # until the family lands
    if _e.name != "kernflow.core.ops.nn_ops":
        raise

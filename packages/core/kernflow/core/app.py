"""`kf.app`: TF1's `tf.app.run`, which runs a script's ``main(argv)`` and exits with its result.

TF1 parses its absl flags from `argv` first; kernflow has no `tf.flags` yet (`kf.app.flags` is not
provided), so `run` passes `argv` (default `sys.argv`) to `main` as it is.
"""

from __future__ import annotations

import sys

__all__ = ["run"]


def run(main=None, argv=None):
    """Calls ``main(argv)`` (default: the caller module's `main`, argv `sys.argv`) and exits with
    its return value, as TF1's `tf.app.run` does.

    Raises:
        SystemExit: always, with main's return value.
    """
    if main is None:
        main = sys.modules["__main__"].main
    sys.exit(main(sys.argv if argv is None else list(argv)))

"""The file root: an optional directory that confines every path a graph's ops touch in this process.

A server that runs graphs sent by clients (`kernflow worker`, `kernflow master`) can be given a
root (``--file-root DIR``, or the ``KERNFLOW_FILE_ROOT`` environment variable read at import). Every
kernel that opens, creates, lists, renames or deletes files (SaveV2, RestoreV2, MergeV2Checkpoints,
ReadFile, WriteFile, MatchingFiles, the readers and file datasets, lookup tables and samplers read
from files, ``PrintV2`` to ``file://``) then passes its paths through `check` and uses the path it
returns. Without a root (the default of the embedded runtime) `check` returns the path unchanged
after one module-level ``None`` test, so kernels pay nothing.

Under a root:

* a relative path is taken relative to the root, not to the process's working directory;
* the path is resolved with `os.path.realpath`, so ``..`` components and symbolic links (of the
  directories on the way and of the file itself) are followed before the comparison: a path is
  accepted only if what it resolves to lies inside the root;
* the last component is kept as given (a checkpoint prefix is not a file: its files are the prefix
  plus ``.index`` and ``.data-...``), so the returned path must itself lie below the root: ``ROOT``
  (whose ``ROOT.index`` is a sibling of the root) is refused, ``ROOT/`` is not;
* NUL bytes, and URLs of any scheme but ``file://`` (which is stripped), are refused;
* every refusal is an `errors.InvalidArgumentError` naming the op and the offending path.

The client process's `kernflow.core.gfile` is not confined: it runs with the user's own rights.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from typing import NamedTuple

from kernflow.core.framework import errors

__all__ = ["ENV", "configure", "root", "check", "check_all", "matching_files", "add_argument",
           "configure_from_args"]

ENV = "KERNFLOW_FILE_ROOT"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


class _Root(NamedTuple):
    path: str             # the resolved root (as configured, when `broken`)
    inside: str           # `path` with one trailing separator: every accepted path starts so
    broken: str | None    # why the root cannot be used (a bad KERNFLOW_FILE_ROOT): checks fail closed


# None when unconfined. Replaced whole, never changed, so a check reads one consistent root.
_state: _Root | None = None


def _resolve_root(path) -> str:
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise errors.InvalidArgumentError(None, None, f"file root: expected a directory path, got "
                                          f"{type(path).__name__}")
    text = os.fsdecode(os.fspath(path))
    if not text or "\0" in text:
        raise errors.InvalidArgumentError(None, None, f"file root: expected a directory path, got "
                                          f"{text!r}")
    resolved = os.path.realpath(os.path.abspath(text))
    if not os.path.isdir(resolved):
        raise errors.InvalidArgumentError(None, None, f"file root: {text!r} is not an existing "
                                          f"directory (resolved to {resolved})")
    return resolved


def _make(path: str, broken: str | None = None) -> _Root:
    return _Root(path, path.rstrip(os.sep) + os.sep, broken)


def configure(root_dir: str | os.PathLike | None) -> None:
    """Sets this process's file root; None removes it (every path allowed, as without a root).

    Args:
        root_dir: an existing directory (relative to the working directory), or None.

    Raises:
        InvalidArgumentError: `root_dir` is empty, holds a NUL byte or is not an existing directory.
    """
    global _state
    _state = None if root_dir is None else _make(_resolve_root(root_dir))


def root() -> str | None:
    """The resolved file root of this process, or None when paths are not confined."""
    st = _state
    return None if st is None else st.path


def _load_environment() -> None:
    global _state
    value = os.environ.get(ENV, "")
    if not value:
        return
    try:
        _state = _make(_resolve_root(value))
    except errors.InvalidArgumentError as e:
        _state = _make(value, f"{ENV}={value!r} cannot be used as the file root ({e.message}), so "
                              f"every file access is refused")


def _refuse(op_name: str, path: str, why: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, f"{op_name}: {path!r} {why}")


def _text(path) -> str:
    if isinstance(path, str):
        return path
    if isinstance(path, (bytes, bytearray, memoryview)):
        return os.fsdecode(bytes(path))
    return os.fsdecode(os.fspath(path))


def _absolute(st: _Root, op_name: str, path) -> tuple[str, str]:
    """(the path as text, its absolute form under the root), or a refusal."""
    text = _text(path)
    if st.broken is not None:
        raise _refuse(op_name, text, f"was refused: {st.broken}")
    if "\0" in text:
        raise _refuse(op_name, text, f"holds a NUL byte (file root {st.path})")
    local = text
    m = _SCHEME.match(text)
    if m:
        if m.group(1).lower() != "file":
            raise _refuse(op_name, text, f"is a {m.group(1)}:// URL: only local paths inside the "
                                         f"file root {st.path} are allowed")
        local = text[m.end():]
    return text, local if os.path.isabs(local) else os.path.join(st.path, local)


def _resolve(absolute: str) -> tuple[str, str]:
    """(the path to use: directories resolved, the last component as given; what it resolves to)."""
    head, tail = os.path.split(absolute)
    kept = os.path.realpath(head)
    kept = kept + os.sep if not tail else os.path.join(kept, tail)
    return kept, os.path.realpath(absolute)


def _is_inside(st: _Root, kept: str, target: str) -> bool:
    return kept.startswith(st.inside) and (target + os.sep).startswith(st.inside)


def _confine(st: _Root, op_name: str, text: str, absolute: str, write: bool) -> str:
    kept, target = _resolve(absolute)
    if not _is_inside(st, kept, target):
        shown = target if kept.startswith(st.inside) else kept
        raise _refuse(op_name, text, f"(resolved to {shown}) is outside the file root {st.path}: "
                                     f"{'writing' if write else 'reading'} it is refused")
    return kept


def check(op_name: str, path, *, write: bool) -> str:
    """The path an op should use for `path`, which must lie inside the file root.

    Args:
        op_name: the op and node, for the message (e.g. ``"SaveV2 node save/SaveV2"``).
        path: a file path or checkpoint prefix (str, bytes or PathLike); relative to the root.
        write: whether the op creates, changes or removes it (worded in the message).

    Returns:
        `path` itself (as str) without a root; else its resolved absolute form, the last component
        as given (see the module docstring).

    Raises:
        InvalidArgumentError: a root is set and `path` resolves outside it, holds a NUL byte or is a
            URL of another scheme than ``file://``.
    """
    st = _state
    if st is None:
        return _text(path)
    text, absolute = _absolute(st, op_name, path)
    return _confine(st, op_name, text, absolute, write)


def check_all(op_name: str, paths, *, write: bool) -> list[str]:
    """`check` over each path of a list or a string array of any shape; the results, flattened.

    Raises:
        InvalidArgumentError: as `check`, for the first path outside the root.
    """
    import numpy as np
    flat = paths.reshape(-1) if isinstance(paths, np.ndarray) else list(paths)
    return [check(op_name, p, write=write) for p in flat]


def matching_files(op_name: str, pattern) -> list[str]:
    """The files matching the glob `pattern` (unsorted), every one inside the file root.

    Under a root, the directories before the first component with a wildcard are resolved as by
    `check`, and the rest of the pattern must not climb out of them lexically (``*/../..``). A match
    that resolves outside the root (a wildcard matched a symbolic link pointing out) is left out, as
    a file the op could not read; the others are returned resolved as by `check`.

    Raises:
        InvalidArgumentError: a root is set and the pattern lies outside it.
    """
    st = _state
    if st is None:
        return _glob.glob(_text(pattern))
    text, absolute = _absolute(st, op_name, pattern)
    parts = absolute.split(os.sep)
    # (wildcards count after the root only: the root's own name may hold "[" or "*")
    skip = len(st.inside.split(os.sep)) - 1 if absolute.startswith(st.inside) else 0
    first = next((i for i in range(skip, len(parts)) if _glob.has_magic(parts[i])), None)
    if first is None:
        found = _confine(st, op_name, text, absolute, False)
        return [found] if os.path.lexists(found) else []
    fixed = os.path.realpath(os.sep.join(parts[:first]) or os.sep)
    lexical = os.path.normpath(os.path.join(fixed, *parts[first:]))
    if not (fixed + os.sep).startswith(st.inside) or not (lexical + os.sep).startswith(st.inside):
        raise _refuse(op_name, text, f"(resolved to {lexical}) is outside the file root {st.path}: "
                                     f"listing it is refused")
    matches = _glob.glob(os.path.join(_glob.escape(fixed), *parts[first:]))
    return [kept for kept, target in map(_resolve, matches) if _is_inside(st, kept, target)]


def add_argument(parser) -> None:
    """Adds ``--file-root DIR`` to a server command's argparse parser."""
    parser.add_argument("--file-root", default=None, metavar="DIR",
                        help="confine every path the graphs' ops read or write on this server "
                             "(checkpoints, readers, ReadFile/WriteFile, ...) to DIR; paths out of it "
                             f"are refused (default: ${ENV}, else unconfined)")


def configure_from_args(args) -> None:
    """Applies ``--file-root`` (when given; else the environment's root stays).

    Raises:
        InvalidArgumentError: DIR is not an existing directory.
    """
    if getattr(args, "file_root", None):
        configure(args.file_root)


_load_environment()

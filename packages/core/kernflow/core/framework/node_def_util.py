"""Helpers for NodeDef input strings ("node", "node:1", "^node")."""

from __future__ import annotations

__all__ = ["parse_input"]


def parse_input(s: str) -> tuple[str, int, bool]:
    """Parses a NodeDef input string into (node name, output index, is_control)."""
    if s.startswith("^"):
        return s[1:], -1, True
    name, sep, idx = s.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx), False
    return s, 0, False

#!/usr/bin/env python3
"""How much of the tf.compat.v1 public API kernflow provides, per namespace.

Reads the TF1 name lists (a JSON dict: namespace -> public names, e.g. "tf", "nn", "nn.rnn_cell") and
checks each name on the matching kernflow object: "tf" is ``kernflow.core`` itself, any other
namespace is the dotted attribute path under it ("nn.rnn_cell" -> ``kf.nn.rnn_cell``). A namespace
kernflow lacks counts 0.

A name counts as covered when the attribute exists and is not a placeholder. A placeholder is an
object (function, class, module, ...) with a truthy ``_kernflow_unsupported`` attribute: code that
exposes a TF1 name only to raise NotImplementedError marks it so, and it does not count.

Names in ``EXCLUDED`` (TF-internal plumbing, TPU/XLA, build info) are still counted in the totals but
are also reported separately as "covered of non-excluded".

Usage:
    python tools/api_coverage.py                      # table + one JSON line
    python tools/api_coverage.py --missing nn         # the names kf.nn lacks
    python tools/api_coverage.py --write-baseline     # write tools/api_coverage_baseline.json
    python tools/api_coverage.py --check tools/api_coverage_baseline.json
        # exit 1 if any namespace's covered count went down against the baseline
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# A copy of the shared notes' tf1_api_names.json, kept in the repository so CI can read it.
DEFAULT_NAMES = os.path.join(HERE, "tf1_api_names.json")
DEFAULT_BASELINE = os.path.join(HERE, "api_coverage_baseline.json")
UNSUPPORTED_MARKER = "_kernflow_unsupported"

_TPU_XLA = "TPU/XLA/MLIR: no such hardware or compiler in kernflow"
_BUILD = "TF build/ABI information of the C++ library"
_INTERNAL = "TF-internal plumbing, not a modelling API"
_V2 = "TF2 behaviour switches; kernflow is TF1 graph mode only"
_OTHER_PROJECT = "a separate project's API (Keras, TFLite, absl)"

# name -> reason. Keys are "namespace.name" ("tf.compat", "saved_model.TPU").
EXCLUDED = {
    "tf.compat": _INTERNAL, "tf.raw_ops": _INTERNAL, "tf.user_ops": _INTERNAL,
    "tf.sysconfig": _INTERNAL, "tf.load_library": _INTERNAL, "tf.load_op_library": _INTERNAL,
    "tf.load_file_system_library": _INTERNAL, "tf.resource_loader": _INTERNAL,
    "tf.autograph": _INTERNAL, "tf.profiler": _INTERNAL, "tf.experimental": _INTERNAL,
    "tf.tpu": _TPU_XLA, "tf.xla": _TPU_XLA, "tf.mlir": _TPU_XLA,
    "tf.COMPILER_VERSION": _BUILD, "tf.CXX11_ABI_FLAG": _BUILD, "tf.CXX_VERSION": _BUILD,
    "tf.GIT_VERSION": _BUILD, "tf.MONOLITHIC_BUILD": _BUILD,
    "tf.keras": _OTHER_PROJECT, "tf.lite": _OTHER_PROJECT,
    "tf.enable_eager_execution": _V2, "tf.enable_v2_behavior": _V2, "tf.enable_v2_tensorshape": _V2,
    "tf.enable_control_flow_v2": _V2, "tf.enable_resource_variables": _V2,
    "tf.enable_tensor_equality": _V2,
    "saved_model.TPU": _TPU_XLA, "saved_model.experimental": _INTERNAL,
    "test.is_built_with_xla": _TPU_XLA, "test.is_built_with_rocm": _BUILD,
    "test.experimental": _INTERNAL, "test.with_eager_op_as_function": _V2,
    "flags.tf_decorator": _INTERNAL,
}


def load_names(path: str) -> dict[str, list[str]]:
    """Returns the namespace -> sorted unique names dict from the JSON file at `path`."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return {ns: sorted(set(names)) for ns, names in data.items()}


def resolve_namespace(kf, ns: str):
    """Returns the kernflow object for TF1 namespace `ns` ("tf", "nn.rnn_cell"), or None."""
    obj = kf
    if ns == "tf":
        return obj
    for part in ns.split("."):
        obj = getattr(obj, part, None)
        if obj is None or is_placeholder(obj):
            return None
    return obj


def is_placeholder(obj) -> bool:
    """True if `obj` is a NotImplementedError stand-in marked with `_kernflow_unsupported`."""
    try:
        return bool(getattr(obj, UNSUPPORTED_MARKER, False))
    except Exception:  # an object whose __getattr__ raises something odd is not a marker
        return False


def has_name(obj, name: str) -> bool:
    """True if `obj` provides `name` and it is not a placeholder."""
    if obj is None:
        return False
    try:
        value = getattr(obj, name)
    except Exception:
        return False
    return not is_placeholder(value)


def coverage(kf, names: dict[str, list[str]]) -> dict[str, dict]:
    """Returns, per namespace: total, covered, excluded, covered_non_excluded, missing (names)."""
    result = {}
    for ns, ns_names in names.items():
        obj = resolve_namespace(kf, ns)
        present = {n for n in ns_names if has_name(obj, n)}
        excluded = {n for n in ns_names if f"{ns}.{n}" in EXCLUDED}
        result[ns] = {
            "total": len(ns_names),
            "covered": len(present),
            "excluded": len(excluded),
            "covered_non_excluded": len(present - excluded),
            "missing": [n for n in ns_names if n not in present],
        }
    return result


def summary(cov: dict[str, dict]) -> dict[str, dict]:
    """The JSON-able counts (no name lists) of a `coverage` result, including an "ALL" row."""
    out = {ns: {k: v for k, v in row.items() if k != "missing"} for ns, row in cov.items()}
    out["ALL"] = {k: sum(row[k] for row in out.values())
                  for k in ("total", "covered", "excluded", "covered_non_excluded")}
    return out


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:5.1f}%" if b else "    -"


def format_table(counts: dict[str, dict]) -> str:
    """Returns a plain-text table of `summary` counts."""
    lines = [f"{'namespace':<14} {'covered':>8} {'total':>6} {'%':>6}   {'non-excluded':>14} {'%':>6}"]
    for ns, row in counts.items():
        non_ex = row["total"] - row["excluded"]
        lines.append(f"{ns:<14} {row['covered']:>8} {row['total']:>6} {_pct(row['covered'], row['total'])}"
                     f"   {row['covered_non_excluded']:>6} / {non_ex:<5} "
                     f"{_pct(row['covered_non_excluded'], non_ex)}")
    return "\n".join(lines)


def regressions(counts: dict[str, dict], baseline: dict[str, dict]) -> list[str]:
    """Returns one message per namespace whose covered count is below the baseline's."""
    out = []
    for ns, base in baseline.items():
        if ns == "ALL":
            continue
        now = counts.get(ns, {}).get("covered", 0)
        if now < base["covered"]:
            out.append(f"{ns}: covered {now} < baseline {base['covered']}")
    return out


def main(argv=None) -> int:
    """Command-line entry point; returns the exit status."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--names", default=DEFAULT_NAMES, help="TF1 name lists (JSON: namespace -> names)")
    p.add_argument("--check", metavar="FILE", help="fail (exit 1) if coverage fell below this baseline")
    p.add_argument("--write-baseline", nargs="?", const=DEFAULT_BASELINE, metavar="FILE",
                   help=f"write the counts as a baseline (default {os.path.relpath(DEFAULT_BASELINE)})")
    p.add_argument("--missing", metavar="NS", help="list the names namespace NS lacks")
    args = p.parse_args(argv)

    import kernflow.core as kf
    cov = coverage(kf, load_names(args.names))
    if args.missing:
        if args.missing not in cov:
            print(f"unknown namespace {args.missing!r}; known: {', '.join(cov)}", file=sys.stderr)
            return 2
        for n in cov[args.missing]["missing"]:
            reason = EXCLUDED.get(f"{args.missing}.{n}")
            print(n if reason is None else f"{n}  (excluded: {reason})")
        return 0
    counts = summary(cov)
    print(format_table(counts))
    print(json.dumps(counts, sort_keys=True))
    if args.write_baseline:
        with open(args.write_baseline, "w", encoding="utf-8") as f:
            json.dump(counts, f, indent=1, sort_keys=True)
            f.write("\n")
    if args.check:
        with open(args.check, encoding="utf-8") as f:
            bad = regressions(counts, json.load(f))
        for msg in bad:
            print(f"API coverage regression: {msg}", file=sys.stderr)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

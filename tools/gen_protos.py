"""Regenerate the checked-in protobuf modules from the .proto sources.

Each package keeps its .proto files under ``packages/<pkg>/protos/`` in folders that match the
Python import path (``kernflow/core/protobuf/graph.proto`` has ``package kernflow.core.protobuf``),
so the generated ``*_pb2.py`` land beside the package's code and import each other without fix-ups.

Usage:
    python tools/gen_protos.py           # regenerate in place
    python tools/gen_protos.py --check   # exit 1 if the checked-in code differs (CI runs this)
"""

from __future__ import annotations

import argparse
import filecmp
import pathlib
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
# (package dir, whether it defines gRPC services); proto roots of earlier entries are on the
# include path of later ones, so client protos may import core's.
PACKAGES = [("packages/core", False), ("packages/client", True)]


def _generate(out_root: pathlib.Path) -> list[pathlib.Path]:
    from grpc_tools import protoc  # imported lazily: only developers need grpcio-tools

    include = [str(pathlib.Path(protoc.__file__).parent / "_proto")]
    written = []
    for pkg, services in PACKAGES:
        proto_root = ROOT / pkg / "protos"
        if not proto_root.is_dir():
            continue
        include.append(str(proto_root))
        sources = sorted(str(p.relative_to(proto_root)) for p in proto_root.rglob("*.proto"))
        out = out_root / pkg
        out.mkdir(parents=True, exist_ok=True)
        args = ["protoc", *(f"-I{i}" for i in include), f"--python_out={out}", f"--pyi_out={out}"]
        if services:
            args.append(f"--grpc_python_out={out}")
        if protoc.main(args + sources) != 0:
            raise SystemExit(f"protoc failed for {pkg}")
        written += [p.relative_to(out_root) for p in out.rglob("*_pb2*.py*")]
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if checked-in code is stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_root = pathlib.Path(tmp)
        stale = []
        for rel in _generate(tmp_root):
            target = ROOT / rel
            if args.check:
                if not target.exists() or not filecmp.cmp(tmp_root / rel, target, shallow=False):
                    stale.append(str(rel))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(tmp_root / rel, target)
        if stale:
            print("generated protobuf code is stale; run python tools/gen_protos.py:", *stale, sep="\n  ")
            return 1
    print("protos up to date" if args.check else "protos regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main())

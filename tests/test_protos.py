"""The checked-in generated protobuf code matches the .proto sources (tools/gen_protos.py --check)."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_generated_protos_are_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_protos.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "protos up to date" in r.stdout

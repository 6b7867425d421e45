"""The examples of docs/plugins.md run as written.

Every fenced ```python block right after a ``<!-- doc-test -->`` line is run on its own, in a fresh
interpreter: plugin hooks are called once per process and an example registers its own plugin
module, so two examples in one process (or one in the test process) would see each other's ops and
kernels. An example checks itself with asserts; a non-zero exit fails its test.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "plugins.md"
MARKER = "<!-- doc-test -->"
_BLOCK = re.compile(r"^" + re.escape(MARKER) + r"[ \t]*\n```python\n(.*?)^```[ \t]*$", re.M | re.S)


def _examples() -> list[tuple[str, str]]:
    """(id, code) of each marked block; the id is the section heading and the block's line."""
    text = DOC.read_text()
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start(1)) + 1
        before = re.sub(r"^```.*?^```", "", text[:m.start()], flags=re.M | re.S)  # not code comments
        heading = re.findall(r"^#+ (.+)$", before, re.M)
        section = re.sub(r"[^A-Za-z0-9_]+", "-", heading[-1] if heading else "top").strip("-")
        out.append((f"{section}-line{line}", m.group(1)))
    return out


EXAMPLES = _examples()


def test_every_marker_is_followed_by_a_python_block():
    assert DOC.read_text().count(MARKER) == len(EXAMPLES), \
        f"a {MARKER} line in {DOC.name} is not directly followed by a ```python block"
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("code", [c for _, c in EXAMPLES], ids=[i for i, _ in EXAMPLES])
def test_doc_example_runs(code, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KERNFLOW_DISABLE_PLUGINS"}
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr

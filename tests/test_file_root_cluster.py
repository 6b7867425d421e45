"""A worker started with --file-root confines a remote client's checkpoints to that directory.

``kernflow worker`` runs in a child process with ``--file-root`` (KERNFLOW_FILE_ROOT's flag) and
``kernflow master``
in another; the client in this process saves and restores inside the root, and its saves to
``../outside`` and to an absolute path elsewhere are refused with InvalidArgumentError, creating
nothing outside.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.runtime import file_root
from kernflow.core.testing.processes import ChildProcess, free_ports, have_distributed
from kernflow.core.train.saver import Saver

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_distributed(), reason="kernflow-master/-worker not installed")]

_START_TIMEOUT_S = 30.0


def _cli(name, args, env):
    return ChildProcess(name, [sys.executable, "-m", "kernflow.core.cli", *args],
                        env=dict(env, PYTHONUNBUFFERED="1"))


def test_a_remote_save_outside_the_workers_file_root_is_refused(tmp_path, monkeypatch):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k != file_root.ENV}
    spec = json.dumps({"worker": [f"localhost:{free_ports(1)[0]}"]})
    kids = []
    try:
        kids.append(_cli("kernflow worker", ["worker", "--cluster-spec", spec, "--grace", "0",
                                             "--file-root", str(root)], env))
        kids[0].expect("listening on", _START_TIMEOUT_S)
        kids.append(_cli("kernflow master", ["master", "--cluster-spec", spec, "--port", "0"], env))
        target = kids[1].expect("kernflow master serving", _START_TIMEOUT_S).split()[3]
        monkeypatch.chdir(root)    # the client's own existence check sees the worker's files
        with kf.Graph().as_default(), kf.device("/job:worker/task:0"):
            v = kf.Variable(np.arange(3, dtype=np.float32), name="v")
            saver = Saver()
            with kf.Session(target) as sess:
                sess.run(v.initializer)
                assert saver.save(sess, "ckpt/model") == "ckpt/model"
                sess.run(v.assign([7, 7, 7]))
                saver.restore(sess, "ckpt/model")
                assert sess.run(v).tolist() == [0, 1, 2]
                for path in ("../outside/model", str(outside / "sub" / "model")):
                    with pytest.raises(errors.InvalidArgumentError) as e:
                        saver.save(sess, path)
                    assert "SaveV2" in str(e.value) and repr(path) in str(e.value)
                    assert f"is outside the file root {os.path.realpath(root)}" in str(e.value)
        assert (root / "ckpt" / "model.index").is_file()
        assert os.listdir(outside) == []
    finally:
        for k in kids:
            k.kill()


def test_a_worker_refuses_a_file_root_that_is_not_a_directory(tmp_path):
    kid = _cli("kernflow worker", ["worker", "--file-root", str(tmp_path / "missing")], dict(os.environ))
    try:
        rc = kid.proc.wait(_START_TIMEOUT_S)
        kid.expect("kernflow worker: file root: ", 5)
        out = kid.output()
    finally:
        kid.kill()
    assert rc == 2 and "Traceback" not in out
    assert "kernflow worker: file root: " in out and "is not an existing directory" in out

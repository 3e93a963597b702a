"""A kept executor's workspace, told empty on the event loop without a
thread (``_executors._already_empty``) only when it is: anything a block
left, or execbox's code files, sends it to the full emptying."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

from execbox._workspace import INTERNAL_DIR
from execbox.backends._block_run import CODE_DIR
from execbox.server._executors import _already_empty, _emptied


def executor_in(root: Path) -> SimpleNamespace:
    return SimpleNamespace(workspace=SimpleNamespace(path=root))


def test_only_execbox_folder_is_empty_and_anything_else_is_not(tmp_path: Path) -> None:
    executor = executor_in(tmp_path)
    assert _already_empty(executor)
    (tmp_path / INTERNAL_DIR).mkdir()
    assert _already_empty(executor)
    (tmp_path / CODE_DIR).mkdir(parents=True)
    assert not _already_empty(executor)
    assert _emptied(executor) and _already_empty(executor)
    for made in ("out.txt", ".hidden"):
        (tmp_path / made).write_text("left by a block")
        assert not _already_empty(executor)
        assert _emptied(executor) and _already_empty(executor)
    os.symlink("/etc", tmp_path / "link")
    assert not _already_empty(executor)
    assert _emptied(executor) and Path("/etc/passwd").exists()


def test_a_workspace_that_is_gone_is_not_empty(tmp_path: Path) -> None:
    assert not _already_empty(executor_in(tmp_path / "missing"))

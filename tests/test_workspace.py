from __future__ import annotations

import os

import pytest

from execbox import PathEscapeError, Workspace, WorkspaceError


def test_temporary_workspace_is_removed_on_close():
    ws = Workspace()
    path = ws.path
    ws.write_text("a.txt", "x")
    assert path.is_dir()
    ws.close()
    assert not path.exists()


def test_given_workspace_is_kept(tmp_path):
    with Workspace(tmp_path / "w") as ws:
        ws.write_text("a.txt", "x")
    assert (tmp_path / "w" / "a.txt").read_text() == "x"


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/../../x", "", "~/x", ".execbox/code/x.py"])
def test_paths_outside_are_refused(tmp_path, bad):
    ws = Workspace(tmp_path / "w")
    with pytest.raises(PathEscapeError) as info:
        ws.resolve(bad)
    assert "workspace" in str(info.value) or "execbox" in str(info.value)


def test_symlink_out_is_refused_for_write_and_download(tmp_path):
    ws = Workspace(tmp_path / "w")
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (ws.path / "link.txt").symlink_to(secret)
    (ws.path / "dirlink").symlink_to(tmp_path)
    with pytest.raises(PathEscapeError):
        ws.download("link.txt")
    with pytest.raises(PathEscapeError):
        ws.write_text("link.txt", "overwrite")
    with pytest.raises(PathEscapeError):
        ws.write_text("dirlink/new.txt", "x")
    assert secret.read_text() == "top secret"
    assert not (tmp_path / "new.txt").exists()


def test_symlink_inside_is_not_written_through(tmp_path):
    ws = Workspace(tmp_path / "w")
    ws.write_text("real.txt", "1")
    (ws.path / "alias.txt").symlink_to(ws.path / "real.txt")
    with pytest.raises(PathEscapeError, match="symlink"):
        ws.write_text("alias.txt", "2")
    assert ws.download("real.txt") == b"1"


def test_upload_download_list(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"\x00\x01")
    ws = Workspace(tmp_path / "w")
    ws.upload(src, "in/data.bin")
    ws.upload(b"abc", "b.txt")
    assert ws.download("in/data.bin") == b"\x00\x01"
    ws.download("b.txt", tmp_path / "copy.txt")
    assert (tmp_path / "copy.txt").read_bytes() == b"abc"
    assert [(f.path, f.is_dir) for f in ws.list()] == [("b.txt", False), ("in", True), ("in/data.bin", False)]


def test_changes_do_not_follow_symlinks(tmp_path):
    ws = Workspace(tmp_path / "w")
    outside = tmp_path / "outside"
    outside.mkdir()
    before = ws.snapshot()
    (ws.path / "escape").symlink_to(outside)
    (outside / "huge.txt").write_text("x")
    ws.write_text("made.txt", "y")
    changed = Workspace.changes(before, ws.snapshot())
    assert changed == ["escape", "made.txt"]


def test_workspace_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(Exception, match="is a file"):
        Workspace(f)
    assert os.path.isfile(f)


def test_remove_takes_a_file_a_link_or_an_empty_folder_and_nothing_outside(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    with Workspace(tmp_path / "ws") as ws:
        ws.write_text("d/a.txt", "x")
        os.symlink(outside, ws.path / "link")
        ws.remove("link")  # the link goes, never what it points at
        assert outside.read_text() == "keep"
        with pytest.raises(WorkspaceError):
            ws.remove("d")  # not empty
        ws.remove("d/a.txt")
        ws.remove("d")
        assert ws.list() == []
        with pytest.raises(WorkspaceError, match="no file"):
            ws.remove("missing.txt")
        for bad in ("../outside.txt", str(outside), ".execbox", ".", ""):
            with pytest.raises(PathEscapeError):
                ws.remove(bad)
        assert outside.exists()


def test_list_gives_each_entry_its_mtime():
    with Workspace() as ws:
        ws.write_text("a.txt", "x")
        (entry,) = ws.list()
        assert entry.mtime == pytest.approx(os.stat(ws.path / "a.txt").st_mtime)

"""Host files: what a block must not read or write, and links it plants for
the host to follow."""

from __future__ import annotations

import ast
import os
import socket
import sys
import threading
from pathlib import Path

import pytest

from execbox import CodeBlock, PathEscapeError, WorkspaceError
from tests.security.conftest import DOCKER_MODES, SEALED, run_then_healthy

HOME = os.path.expanduser("~")


def _host_text(path: str) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


# (case, path inside the jail; "{secret}" is the planted file)
UNREADABLE = [
    ("planted-secret", "{secret}"),
    ("proc-1-root", "/proc/1/root{secret}"),
    ("proc-self-root", "/proc/self/root{secret}"),
    ("proc-1-cwd-climb", "/proc/1/cwd/../../../../../..{secret}"),
    ("home-bashrc", f"{HOME}/.bashrc"),
    ("home-npmrc", f"{HOME}/.npmrc"),
    ("home-ssh-key", f"{HOME}/.ssh/id_rsa"),
    ("etc-shadow", "/etc/shadow"),
    ("etc-gshadow", "/etc/gshadow"),
    ("etc-passwd", "/etc/passwd"),
    ("etc-hostname", "/etc/hostname"),
    ("etc-machine-id", "/etc/machine-id"),
    ("proc-1-root-shadow", "/proc/1/root/etc/shadow"),
]


# A container has its own copy of these (the image's /etc/passwd, the
# container's hostname file written by the engine): readable, but not the host's.
CONTAINER_OWN = {"/etc/passwd", "/etc/hostname"}


@pytest.mark.parametrize("path", [p for _, p in UNREADABLE], ids=[c for c, _ in UNREADABLE])
def test_host_file_is_unreadable(mode, hostile, secret, path):
    secret_path, token = secret
    host = _host_text(str(secret_path) if "{secret}" in path else path)
    path = path.replace("{secret}", str(secret_path))
    if mode in DOCKER_MODES and path in CONTAINER_OWN:
        code = f"import os\nst = os.stat({path!r})\nprint(st.st_dev, st.st_ino)\nprint(open({path!r}, 'rb').read())"
        result = run_then_healthy(hostile, "python", code)
        assert result.exit_code == 0, result.output
        identity, content = result.stdout.split("\n", 1)
        if os.path.exists(path):
            here = os.stat(path)
            assert identity != f"{here.st_dev} {here.st_ino}", f"the container sees the host's {path}"
        seen = ast.literal_eval(content.strip()).decode(errors="replace")
        assert socket.gethostname() not in seen.split(), f"{path} names the host"
        assert token not in result.output
        return
    result = run_then_healthy(hostile, "python", f"print(open({path!r}, 'rb').read())")
    assert result.exit_code != 0, result.output
    assert result.error is not None and result.error.name in (
        "FileNotFoundError",
        "PermissionError",
        "NotADirectoryError",
        "OSError",
    ), result.output
    assert token not in result.output
    for line in (host or "").splitlines()[:5]:
        if len(line.strip()) > 8:
            assert line not in result.output


def test_home_lists_no_host_files(mode, hostile):
    # The interpreter may live under the home (pyenv): only its own directory may show.
    needed = {
        Path(os.path.realpath(p)).relative_to(HOME).parts[0]
        for p in (sys.prefix, sys.base_prefix)
        if os.path.realpath(p).startswith(HOME + "/")
    }
    # A root host's home is /root, which an image has too (its own, mode 0700):
    # listing it as nobody is refused, which shows nothing of the host's either.
    # The Landlock tier sees the host's home, and is refused listing it.
    refused = "PermissionError" if mode in DOCKER_MODES or mode == "landlock" else "()"
    code = (
        f"import os\ntry:\n    print(sorted(os.listdir({HOME!r})) if os.path.isdir({HOME!r}) else [])\n"
        f"except {refused}:\n    print([])\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code == 0, result.output
    seen = set(eval(result.output))
    assert seen <= needed, f"host home entries visible in the jail: {sorted(seen - needed)}"


WALK = r"""
import os, sys
skip = {"/proc", "/usr", "/dev", os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
hits = []
for top in ("/", "/proc/1/root/", "/proc/self/root/"):
    for root, dirs, files in os.walk(top):
        if "/" + root[len(top):].strip("/") in skip:
            dirs[:] = []
            continue
        for name in files:
            full = os.path.join(root, name)
            if name == "secret.txt":
                hits.append(full)
            try:
                if os.path.getsize(full) < 4096 and TOKEN in open(full, errors="replace").read():
                    hits.append(full)
            except OSError:
                pass
print("HITS", hits)
"""


def test_walking_the_filesystem_finds_no_secret(hostile, secret):
    _, token = secret
    # reversed: the code file of the block, in the workspace, must not hold the token itself
    result = run_then_healthy(hostile, "python", f"TOKEN = {token[::-1]!r}[::-1]\n" + WALK)
    assert result.exit_code == 0, result.output
    assert "HITS []" in result.output
    assert token not in result.output


@pytest.mark.parametrize(
    "source", ["environ", "proc-self-environ", "proc-1-environ", "proc-host-pid-environ"]
)
def test_host_environment_is_not_visible(make_hostile, monkeypatch, secret, source):
    _, token = secret
    monkeypatch.setenv("EXECBOX_TEST_SECRET", token)
    executor = make_hostile()
    code = {
        "environ": "import os; print(dict(os.environ))",
        "proc-self-environ": "print(open('/proc/self/environ', 'rb').read())",
        "proc-1-environ": "print(open('/proc/1/environ', 'rb').read())",
        "proc-host-pid-environ": f"print(open('/proc/{os.getpid()}/environ', 'rb').read())",
    }[source]
    result = run_then_healthy(executor, "python", code)
    assert token not in result.output
    assert "EXECBOX_TEST_SECRET" not in result.output
    if source == "proc-host-pid-environ":
        assert result.exit_code != 0, result.output


WRITABLE_ELSEWHERE = [
    ("usr", "/usr/execbox-pwned"),
    ("usr-bin", "/usr/bin/execbox-pwned"),
    ("etc", "/etc/execbox-pwned"),
    ("home", f"{HOME}/execbox-pwned"),
    ("root-dir", "/execbox-pwned"),
    ("interpreter-site-packages", os.path.join(sys.prefix, "lib", "execbox-pwned.pth")),
    ("proc-1-root-etc", "/proc/1/root/etc/execbox-pwned"),
]


@pytest.mark.parametrize("target", [t for _, t in WRITABLE_ELSEWHERE], ids=[c for c, _ in WRITABLE_ELSEWHERE])
def test_cannot_write_outside_the_workspace(hostile, target):
    assert not os.path.exists(target)
    try:
        result = run_then_healthy(hostile, "python", f"open({target!r}, 'w').write('pwned')\nprint('wrote')")
        assert result.exit_code != 0, result.output
        assert "wrote" not in result.stdout
        assert not os.path.exists(target)
    finally:
        if os.path.exists(target):
            os.unlink(target)


def test_host_tmp_outside_the_workspace_is_not_written(hostile, tmp_path):
    # The workspace lives under the host's tmp_path: its parent exists in the
    # jail only as an empty directory of the private /tmp.
    target = tmp_path / "pwned.txt"
    code = (
        f"import os\nos.makedirs({str(tmp_path)!r}, exist_ok=True)\n"
        f"open({str(target)!r}, 'w').write('pwned')\nprint(os.listdir({str(tmp_path)!r}))"
    )
    result = run_then_healthy(hostile, "python", code)
    assert not target.exists()
    assert "secret.txt" not in result.output


def test_symlinks_to_host_files_are_not_read_by_the_host(mode, hostile, secret):
    secret_path, token = secret
    code = (
        f"import os\nos.symlink({str(secret_path)!r}, 'leak.txt')\nos.symlink('/etc/shadow', 'shadow')\n"
        f"os.symlink('../secret.txt', 'relative.txt')\nprint('planted')"
    )
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code == 0, result.output
    ws = hostile.workspace
    if mode == "remote":  # the server refuses to hand a link out: the mirror gets none, nor what it points to
        assert not any(os.path.lexists(ws.path / name) for name in ("leak.txt", "shadow", "relative.txt"))
        assert {"leak.txt", "shadow", "relative.txt"} <= set(hostile.mirror_skipped)
        assert token not in result.to_json() + repr(ws.list())
        return
    for name in ("leak.txt", "shadow", "relative.txt"):
        assert os.path.islink(ws.path / name)
        with pytest.raises(PathEscapeError):
            ws.download(name)
        with pytest.raises(PathEscapeError):
            ws.resolve(name)
    text = result.to_text() + result.to_json() + repr(ws.list())
    assert token not in text
    assert "root:" not in text


def test_host_does_not_write_through_a_planted_directory_link(mode, hostile, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    code = f"import os\nos.symlink({str(outside)!r}, 'dirlink')\nos.symlink({str(outside / 'report.txt')!r}, 'report.txt')"
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code == 0, result.output
    if mode == "remote":  # no link comes into the mirror; what it sends meets the links there, refused
        assert not os.path.lexists(hostile.workspace.path / "dirlink")
        hostile.workspace.write_text("dirlink/pwned.txt", "pwned")
        hostile.workspace.write_text("report.txt", "pwned")
        assert hostile.run(CodeBlock("python", "print('ran')")).output == "ran\n"
        assert {"dirlink/pwned.txt", "report.txt"} <= set(hostile.mirror_skipped)
        saved = hostile.run(CodeBlock("python", "print('ran')", "dirlink/x.py"))
        assert saved.error is not None and saved.error.name == "PathEscape"
        assert list(outside.iterdir()) == []
        return
    for name in ("dirlink/pwned.txt", "report.txt"):
        with pytest.raises(PathEscapeError):
            hostile.workspace.write_text(name, "pwned")
    with pytest.raises(PathEscapeError):
        hostile.workspace.upload(b"pwned", "dirlink/up.txt")
    saved = hostile.run(CodeBlock("python", "print('ran')", "dirlink/x.py"))
    assert saved.error is not None and saved.error.name == "PathEscape"
    assert list(outside.iterdir()) == []


def test_hardlinks_to_host_files_fail(hostile, secret):
    secret_path, _ = secret
    code = (
        "import os\nfor n, src in enumerate(["
        + repr(str(secret_path))
        + ", '/etc/ld.so.cache', '/usr/bin/env', '/proc/1/root"
        + str(secret_path)
        + "']):\n"
        "    try:\n        os.link(src, f'hl{n}')\n        print('LINKED', src)\n"
        "    except OSError as exc:\n        print('refused', src, exc.errno)\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code == 0, result.output
    assert "LINKED" not in result.output
    assert secret_path.stat().st_nlink == 1
    assert not any((hostile.workspace.path / f"hl{n}").exists() for n in range(4))


# Gets execbox's own folder out of the way: deleted where the block may (the
# jail is the user), else moved (as root, the files in it are root's, and
# the jail owns only the workspace folder itself). The namespace sandbox
# mounts it read-only for its blocks: the block says "sealed" and stops.
MOVE_AWAY = (
    "import errno, shutil, sys\ntry:\n    try:\n        shutil.rmtree('.execbox')\n"
    "    except PermissionError:\n        os.rename('.execbox', '.execbox-moved')\n"
    "except OSError as exc:\n    if exc.errno not in (errno.EROFS, errno.EBUSY):\n        raise\n"
    "    print('sealed')\n    sys.exit(0)"
)


def test_replacing_the_internal_folder_with_a_link_out_does_not_redirect_host_writes(mode, hostile, tmp_path):
    # The host writes the code file of every block under .execbox/: a block
    # that turns it into a link must not make the host write where it points.
    outside = tmp_path / "outside"
    outside.mkdir()
    code = f"import os\n{MOVE_AWAY}\nos.symlink({str(outside)!r}, '.execbox')\nprint('swapped')"
    result = hostile.run(CodeBlock("python", code))
    assert ("sealed" if mode in SEALED else "swapped") in result.output, result.output
    after = hostile.run(CodeBlock("python", "print(6*7)"))
    written = [str(p.relative_to(outside)) for p in outside.rglob("*")]
    assert written == [], f"the host wrote through the planted link: {written}"
    assert after.output == "42\n"


def test_deleting_the_internal_folder_leaves_the_executor_working(mode, hostile):
    result = run_then_healthy(hostile, "python", f"import os\n{MOVE_AWAY}\nprint('gone')")
    assert result.exit_code == 0 and ("sealed" if mode in SEALED else "gone") in result.output, result.output
    if mode != "remote":  # the server's folder; the mirror has none of its own
        assert (hostile.workspace.path / ".execbox").is_dir()


def test_a_planted_fifo_does_not_hang_the_host(hostile):
    result = run_then_healthy(hostile, "python", "import os\nos.mkfifo('out.txt')\nprint('planted')")
    assert result.exit_code == 0, result.output
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(hostile.workspace.download("out.txt"))
        except (WorkspaceError, OSError) as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(3)
    hung = reader.is_alive()
    if hung:  # unblock the reader
        fd = os.open(hostile.workspace.path / "out.txt", os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        reader.join(3)
    assert not hung, "Workspace.download blocked on a FIFO the block planted"

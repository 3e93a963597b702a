"""The MCP server's file tools (list_files, read_file, write_file) against
paths a model sends and what a block left in the workspace: links to host
files and folders, a FIFO, a huge file, a file that grows while it is read,
a name that swaps between a file and a link. Driven as a client would,
through the MCP protocol (the SDK's client, in memory), the blocks run by
the server's own executor (the sandbox; the jailed Jupyter kernel where the
attack needs a thread that outlives its block). Judged on the host: no host
file read or written, every call answered within a deadline, a tool error
(not a protocol error) naming what to change (security issue 27)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from execbox import Executor, JupyterExecutor, SandboxExecutor, Workspace
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require
from tests.security.conftest import LIMITS

# Every call of a scenario ends by then (a FIFO must not hang the server).
DEADLINE_S = 120
MIB = 1 << 20


def _require() -> None:
    require("mcp", importlib.util.find_spec("mcp") is not None, "pip install 'execbox[mcp]' (./dev.sh does)")
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")


def serve(factory: Callable[[], Executor], scenario: Callable[[Any], Awaitable[None]]) -> None:
    """Run ``scenario(call)`` against an MCP server on ``factory``'s executor;
    ``call(tool, **arguments)`` returns (is_error, the answer's text)."""
    _require()
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from execbox.tools.mcp import create_server

    async def main() -> None:
        with anyio.fail_after(DEADLINE_S):
            async with Client(create_server(executor_factory=factory), read_timeout_seconds=60) as client:

                async def call(tool: str, **arguments: Any) -> tuple[bool, str]:
                    try:
                        result = await client.call_tool(tool, arguments)
                    except MCPError as exc:  # a protocol error: the model has nothing to fix
                        raise AssertionError(
                            f"{tool}({arguments!r}) failed as a protocol error: {exc}"
                        ) from None
                    return bool(result.is_error), "\n".join(
                        c.text for c in result.content if c.type == "text"
                    )

                await scenario(call)

    anyio.run(main)


def sandbox(workspace: Path) -> Callable[[], Executor]:
    return lambda: SandboxExecutor(workspace=Workspace(workspace), limits=LIMITS)


def kernel(workspace: Path) -> Callable[[], Executor]:
    return lambda: JupyterExecutor(workspace=Workspace(workspace), limits=LIMITS, kernel="sandbox")


def host_secret(tmp_path: Path) -> tuple[Path, str]:
    folder = tmp_path / "host"
    folder.mkdir()
    token = f"execbox-secret-{os.urandom(8).hex()}"
    (folder / "secret.txt").write_text(token + "\n")
    return folder, token


async def plant(call: Any, code: str) -> None:
    failed, answer = await call("run_code", code=code)
    assert not failed and answer.startswith("exitcode: 0"), answer


def test_paths_that_leave_the_workspace_are_tool_errors(tmp_path):
    folder, token = host_secret(tmp_path)
    workspace = tmp_path / "ws"
    secret = str(folder / "secret.txt")
    escapes = [
        os.path.relpath(secret, workspace),
        secret,
        "~/secret.txt",
        "~root",
        "a\0b",
        "sub/../../host/secret.txt",
        ".execbox/code/x.py",
        "x" * 300,
        "new\nline/../../host/secret.txt",
    ]

    async def scenario(call: Any) -> None:
        for path in escapes:
            for tool, arguments in (
                ("read_file", {}),
                ("list_files", {}),
                ("write_file", {"content": token}),
            ):
                failed, answer = await call(tool, path=path, **arguments)
                assert failed, (tool, path, answer)
                assert token not in answer and str(workspace) not in answer, (tool, path, answer)

    serve(sandbox(workspace), scenario)
    assert sorted(os.listdir(folder)) == ["secret.txt"]
    assert (folder / "secret.txt").read_text() == token + "\n"


def test_names_a_block_chose_do_not_forge_listing_lines(tmp_path):
    forged = "ok.txt  (3 bytes)\nsecret-of-the-host.txt  (9 bytes)"

    async def scenario(call: Any) -> None:
        await plant(call, f"open({forged!r}, 'w').write('x')\n")
        failed, listing = await call("list_files", path=".")
        assert not failed, listing
        assert not [line for line in listing.splitlines() if line.startswith("secret-of-the-host")], listing
        failed, answer = await call("write_file", path="two\nlines.txt", content="x")
        assert not failed and len(answer.splitlines()) == 1, answer

    serve(sandbox(tmp_path / "ws"), scenario)


def test_links_a_block_planted_are_never_followed(tmp_path):
    folder, token = host_secret(tmp_path)
    secret = str(folder / "secret.txt")
    code = (
        f"import os\nos.symlink({secret!r}, 'x')\nos.symlink({str(folder)!r}, 'd')\n"
        "os.symlink('../../..', 'up')\nos.makedirs('sub')\nos.symlink('../d', 'sub/d')\n"
    )
    up = os.path.relpath(secret, "/")

    async def scenario(call: Any) -> None:
        await plant(call, code)
        for path in ("x", "d/secret.txt", f"up/{up}", "sub/d/secret.txt"):
            failed, answer = await call("read_file", path=path)
            assert failed and token not in answer, (path, answer)
        for path in ("d", "up", "sub/d"):
            failed, answer = await call("list_files", path=path)
            assert failed and "secret.txt" not in answer, (path, answer)
        for path in ("x", "d/planted.txt", "sub/d/planted.txt"):
            failed, answer = await call("write_file", path=path, content="planted by the model")
            assert failed, (path, answer)
        failed, listing = await call("list_files", path=".")
        assert not failed and "secret.txt" not in listing and token not in listing, listing

    serve(sandbox(tmp_path / "ws"), scenario)
    assert sorted(os.listdir(folder)) == ["secret.txt"]
    assert (folder / "secret.txt").read_text() == token + "\n"


def test_a_hardlink_to_a_host_file_is_not_written_through(tmp_path):
    """Guard: the jail sees host files read-only on other mounts, so a hard
    link to one cannot be made in the workspace; were it made, write_file
    must not change the host's file."""
    target = os.path.realpath("/etc/os-release")
    before = Path(target).read_bytes()
    code = (
        f"import os\ntry:\n    os.link({target!r}, 'hl')\n    print('linked')\n"
        "except OSError as exc:\n    print('refused', exc.errno)\n"
    )

    async def scenario(call: Any) -> None:
        await plant(call, code)
        await call("write_file", path="hl", content="written by the model")

    serve(sandbox(tmp_path / "ws"), scenario)
    assert Path(target).read_bytes() == before


def test_a_fifo_hangs_no_call(tmp_path):
    async def scenario(call: Any) -> None:
        await plant(call, "import os\nos.mkfifo('pipe')\nos.makedirs('sub')\nos.mkfifo('sub/pipe')\n")
        for path in ("pipe", "sub/pipe"):
            for tool, arguments in (("read_file", {}), ("write_file", {"content": "x"})):
                failed, answer = await call(tool, path=path, **arguments)
                assert failed and "FIFO" in answer, (tool, path, answer)
            failed, answer = await call("list_files", path=path)
            assert not failed and "is a file" in answer, answer

    serve(sandbox(tmp_path / "ws"), scenario)


def _bytes_read() -> int:
    """Bytes this process (the server is in it) has read so far."""
    with open("/proc/self/io") as handle:
        return int(next(line for line in handle if line.startswith("rchar:")).split()[1])


def test_a_huge_file_is_refused_unread(tmp_path):
    """Guard: a 512 MiB sparse file is refused by its size, before a read."""
    from execbox.tools.mcp import MAX_IMAGE_BYTES

    async def scenario(call: Any) -> None:
        await plant(call, "with open('huge', 'wb') as f:\n    f.truncate(512 << 20)\n")
        before = _bytes_read()
        failed, answer = await call("read_file", path="huge")
        assert _bytes_read() - before <= MAX_IMAGE_BYTES + MIB
        assert failed and "run code to read a part of it" in answer, answer

    serve(sandbox(tmp_path / "ws"), scenario)


GROWING = """
import os, threading
def grow():
    with open('grow', 'wb') as f:
        while not os.path.exists('stop'):
            for size in range(0, 64 << 20, 64 << 10):
                f.truncate(size)
            f.truncate(0)
threading.Thread(target=grow, daemon=True).start()
print('growing')
"""


def test_a_file_growing_while_read_is_read_only_up_to_the_bound(tmp_path):
    """A thread the kernel keeps grows a sparse file from 0 to 64 MiB over
    and over: a size looked at before the read says little. No call may
    read more than the tools' bound (5 MiB and a byte), whatever it found.
    (Before the bound, 2 runs in 3 of 150 calls read 14 MiB or more in one.)"""
    _require()
    require("ipykernel", importlib.util.find_spec("ipykernel") is not None, "pip install 'execbox[jupyter]'")
    from execbox.tools.mcp import MAX_IMAGE_BYTES

    async def scenario(call: Any) -> None:
        await plant(call, GROWING)
        worst = 0
        for _ in range(400):
            before = _bytes_read()
            await call("read_file", path="grow")
            worst = max(worst, _bytes_read() - before)
        await call("write_file", path="stop", content="")
        assert worst <= MAX_IMAGE_BYTES + MIB, f"one read_file call read {worst / MIB:.1f} MiB"

    serve(kernel(tmp_path / "ws"), scenario)


SWAPPING = """
import os, threading
def step(action, *args):
    try:
        action(*args)
    except OSError:
        pass
def swap():
    os.makedirs('real', exist_ok=True)
    open('real/inside.txt', 'w').write('plain')
    while not os.path.exists('stop'):
        step(os.symlink, {secret!r}, 'x.new')
        step(os.rename, 'x.new', 'x')           # x: a link to the host's secret
        step(os.symlink, {folder!r}, 'd')       # d: a link to the host's folder
        step(os.unlink, 'x')
        step(lambda: open('x', 'x').write('plain'))  # x: a file
        step(os.unlink, 'd')
        step(os.rename, 'real', 'd')            # d: a folder
        step(os.rename, 'd', 'real')
threading.Thread(target=swap, daemon=True).start()
print('swapping')
"""


def test_a_name_swapped_for_a_link_meanwhile_is_never_followed(tmp_path):
    """A thread the kernel keeps swaps ``x`` between a file and a link to a
    host secret, and ``d`` between a folder and a link to the secret's
    folder, while the model reads, lists and writes them."""
    _require()
    require("ipykernel", importlib.util.find_spec("ipykernel") is not None, "pip install 'execbox[jupyter]'")
    folder, token = host_secret(tmp_path)
    code = SWAPPING.format(secret=str(folder / "secret.txt"), folder=str(folder))

    async def scenario(call: Any) -> None:
        await plant(call, code)
        for _ in range(200):
            for tool, arguments in (
                ("read_file", {"path": "x"}),
                ("read_file", {"path": "d/secret.txt"}),
                ("list_files", {"path": "d"}),
                ("write_file", {"path": "d/w.txt", "content": "w"}),
                ("write_file", {"path": "x", "content": "w"}),
            ):
                _, answer = await call(tool, **arguments)
                assert token not in answer and "secret.txt  (" not in answer, (tool, arguments, answer)
        await call("write_file", path="stop", content="")

    serve(kernel(tmp_path / "ws"), scenario)
    assert sorted(os.listdir(folder)) == ["secret.txt"]
    assert (folder / "secret.txt").read_text() == token + "\n"

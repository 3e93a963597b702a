"""The MCP server (``execbox mcp``), driven by the MCP SDK's own client over
stdio and streamable HTTP, plus a few in-process checks of its error paths."""

from __future__ import annotations

import base64
import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from execbox import BackendUnavailableError, ConfigurationError, LocalExecutor
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require

HAVE_MCP = importlib.util.find_spec("mcp") is not None
if HAVE_MCP:
    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError

TOOLS = {"run_code", "list_files", "read_file", "write_file", "reset_session"}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PLOT_TO_FILE = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "plt.plot([1, 3, 2])\nplt.savefig('plot.png')\nprint('saved')\n"
)
ENV = {"PYTHONPATH": os.pathsep.join(sys.path)}


def require_mcp() -> None:
    require("mcp", HAVE_MCP, "pip install 'execbox[mcp]' (./dev.sh does)")


def stdio(*args: str) -> Any:
    """A client that starts ``execbox mcp ARGS`` and talks to it over stdio."""
    require_mcp()
    params = StdioServerParameters(command=sys.executable, args=["-m", "execbox.cli", "mcp", *args], env=ENV)
    return Client(params, read_timeout_seconds=60)


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


def images(result: Any) -> list[bytes]:
    return [base64.b64decode(c.data) for c in result.content if c.type == "image"]


# -- stdio, local backend --------------------------------------------------------


def test_stdio_lists_the_tools_and_runs_code_then_cleans_up():
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        async with stdio("--backend", "local") as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert set(listed) == TOOLS
            run = listed["run_code"].input_schema
            assert run["required"] == ["code"]
            assert run["properties"]["language"]["default"] == "python"
            assert listed["write_file"].input_schema["required"] == ["path", "content"]
            assert listed["read_file"].annotations.read_only_hint is True
            assert all(listed[name].description for name in TOOLS)

            ok = await client.call_tool("run_code", {"code": "import os\nprint(6 * 7)\nprint(os.getcwd())"})
            assert not ok.is_error
            assert text(ok).startswith("exitcode: 0 (execution succeeded)\nCode output: 42\n")
            seen["workspace"] = Path(text(ok).splitlines()[2].strip())

            failed = await client.call_tool("run_code", {"code": "x = 1\n1 / 0\n"})
            assert not failed.is_error  # the code failed, the tool did not
            assert text(failed).startswith("exitcode: 1 (execution failed)")
            assert "Traceback" in text(failed) and "ZeroDivisionError: division by zero" in text(failed)

            shell = await client.call_tool("run_code", {"code": "echo from-sh; exit 3", "language": "sh"})
            assert text(shell).startswith("exitcode: 3 (execution failed)\nCode output: from-sh")

            unknown = await client.call_tool("run_code", {"code": "DISPLAY 'x'.", "language": "cobol"})
            assert text(unknown).startswith("exitcode: 1 (execution failed)")
            assert "Unsupported language 'cobol'" in text(unknown) and "python" in text(unknown)

            plot = await client.call_tool("run_code", {"code": PLOT_TO_FILE})
            assert "saved" in text(plot) and "plot.png" in text(plot)
            [png] = images(plot)
            assert png.startswith(PNG_MAGIC) and len(png) > 1000
            assert [c.mime_type for c in plot.content if c.type == "image"] == ["image/png"]

            assert seen["workspace"].is_dir() and (seen["workspace"] / "plot.png").is_file()

    anyio.run(scenario)
    # the client closed stdin: the server stopped, closed its executor, removed its temporary workspace
    assert not seen["workspace"].exists()


def test_stdio_output_comes_as_progress_while_the_code_runs():
    """The run prints, then waits for a file that the client writes only on
    seeing that print in a progress notification: output held back to the
    end would leave it waiting (and the test failing)."""
    messages: list[tuple[float, str]] = []

    async def scenario() -> None:
        async with stdio("--backend", "local") as client:
            where = Path(
                text(await client.call_tool("run_code", {"code": "import os; print(os.getcwd())"}))
                .splitlines()[1]
                .removeprefix("Code output: ")
                .strip()
            )

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                messages.append((progress, message or ""))
                if "waiting" in (message or ""):
                    (where / "go").write_text("")

            code = (
                "import os, time\nprint('waiting', flush=True)\nfor _ in range(300):\n"
                "    if os.path.exists('go'):\n        break\n    time.sleep(0.05)\n"
                "print('answered' if os.path.exists('go') else 'nobody answered')\n"
            )
            ran = await client.call_tool("run_code", {"code": code}, progress_callback=on_progress)
            assert "answered" in text(ran) and "nobody" not in text(ran)

    anyio.run(scenario)
    assert messages and "waiting" in messages[0][1]
    assert [p for p, _ in messages] == sorted({p for p, _ in messages})  # grows with every message


def test_stdio_files_stay_inside_the_workspace(tmp_path):
    work = tmp_path / "work"
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")

    async def scenario() -> None:
        async with stdio("--backend", "local", "--workspace", str(work)) as client:
            assert text(await client.call_tool("list_files", {})) == "The workspace is empty."
            wrote = await client.call_tool(
                "write_file", {"path": "data/notes.txt", "content": "héllo\nwörld\n"}
            )
            assert not wrote.is_error and "data/notes.txt" in text(wrote)
            assert (work / "data" / "notes.txt").read_text(encoding="utf-8") == "héllo\nwörld\n"

            read = await client.call_tool("read_file", {"path": "data/notes.txt"})
            assert not read.is_error and text(read) == "héllo\nwörld\n"

            ran = await client.call_tool("run_code", {"code": "print(open('data/notes.txt').read().upper())"})
            assert "HÉLLO\nWÖRLD" in text(ran)

            listing = text(await client.call_tool("list_files", {}))
            assert listing.splitlines() == ["data/", "data/notes.txt  (14 bytes)"]
            assert (
                text(await client.call_tool("list_files", {"path": "data"})) == "data/notes.txt  (14 bytes)"
            )

            (work / "blob.bin").write_bytes(b"\x00\xff\x00binary")
            blob = await client.call_tool("read_file", {"path": "blob.bin"})
            assert not blob.is_error and "binary file" in text(blob) and "not shown" in text(blob)

            missing = await client.call_tool("read_file", {"path": "nope.txt"})
            assert missing.is_error and "nope.txt" in text(missing)
            folder = await client.call_tool("read_file", {"path": "data"})
            assert folder.is_error and "is a folder" in text(folder)

            os.symlink(outside, work / "link.txt")
            for call, args, reason in [
                ("read_file", {"path": "../outside.txt"}, "climbs out of the workspace"),
                ("read_file", {"path": "/etc/passwd"}, "is absolute"),
                ("read_file", {"path": "link.txt"}, "symlink"),
                ("write_file", {"path": "../escaped.txt", "content": "x"}, "climbs out of the workspace"),
                ("write_file", {"path": "/tmp/escaped.txt", "content": "x"}, "is absolute"),
                ("write_file", {"path": "link.txt", "content": "x"}, "symlink"),
                ("list_files", {"path": ".."}, "climbs out of the workspace"),
                ("list_files", {"path": "/etc"}, "is absolute"),
            ]:
                refused = await client.call_tool(call, args)
                assert refused.is_error, (call, args)
                assert reason in text(refused) and "use a relative path inside the workspace" in text(refused)
            assert "secret" not in text(await client.call_tool("read_file", {"path": "link.txt"}))

    anyio.run(scenario)
    assert outside.read_text() == "secret"
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/escaped.txt").exists()
    assert (work / "data" / "notes.txt").exists()  # a given workspace is kept


def test_stdio_default_backend_is_the_sandbox(tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    work = tmp_path / "work"
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the workspace")

    async def scenario() -> None:
        async with stdio("--workspace", str(work)) as client:
            assert (
                text(await client.call_tool("reset_session", {})) == "Nothing to reset: no code has run yet."
            )
            await client.call_tool("write_file", {"path": "in.txt", "content": "21"})
            ran = await client.call_tool(
                "run_code",
                {
                    "code": "import os\nprint(int(open('in.txt').read()) * 2)\n"
                    f"print(os.path.exists({str(secret)!r}))"
                },
            )
            assert text(ran).startswith("exitcode: 0 (execution succeeded)\nCode output: 42\nFalse")
            plot = await client.call_tool("run_code", {"code": PLOT_TO_FILE})
            assert images(plot) and images(plot)[0].startswith(PNG_MAGIC), text(plot)
            reset = text(await client.call_tool("reset_session", {}))
            assert "sandbox backend keeps no state" in reset and "Files in the workspace stay" in reset
            assert text(await client.call_tool("read_file", {"path": "in.txt"})) == "21"

    anyio.run(scenario)
    assert (work / "plot.png").read_bytes().startswith(PNG_MAGIC)


def _peak_mib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no VmHWM for {pid}")


def _mcp_server_pid() -> int:
    """The ``execbox mcp`` this test process started (its only one)."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for child in (task / "children").read_text().split():
            command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            if command[1:4] == [b"-m", b"execbox.cli", b"mcp"]:
                found.append(int(child))
    assert len(found) == 1, found
    return found[0]


def test_stdio_a_flood_of_output_comes_back_capped_and_the_server_stays_flat(tmp_path):
    """512 MiB printed under the server's 1 MiB cap: the answer holds the
    cap's worth, the progress messages their tails, and the server's peak
    memory does not grow with what was printed (security issue 39: 64 MiB
    printed came back whole through MCP and grew the server by 425 MiB)."""
    printed_mib = 512
    flood = (
        f"import sys\nchunk = b'x' * (1 << 20)\nfor _ in range({printed_mib}):\n"
        "    sys.stdout.buffer.write(chunk)\nsys.stdout.flush()\nprint('done')\n"
    )
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def scenario() -> None:
        async with stdio("--backend", "local", "--workspace", str(tmp_path)) as client:
            await client.call_tool("run_code", {"code": "print('warm')"})
            pid = _mcp_server_pid()
            before = _peak_mib(pid)
            ran = await client.call_tool("run_code", {"code": flood}, progress_callback=on_progress)
            grown = _peak_mib(pid) - before
            answer = text(ran)
            assert answer.startswith("exitcode: 0") and answer.rstrip().endswith("done"), answer[-200:]
            assert "bytes of output dropped" in answer and len(answer) < 2 << 20, len(answer)
            assert grown < 64, f"the MCP server's peak memory grew by {grown} MiB (from {before})"

    anyio.run(scenario)
    assert all(len(message) <= 4000 for message in messages)


def test_the_images_of_one_run_are_bounded_by_its_output_cap(tmp_path):
    """Images count against the run's ``Limits.max_output_bytes`` with its
    text: ten 600 KiB images under a 1 MiB cap return one, and name the rest."""
    require_mcp()
    from execbox import ExecutionResult, Workspace
    from execbox.tools._mcp_content import images as _images

    with Workspace(tmp_path) as workspace:
        for n in range(10):
            workspace.write_bytes(f"big{n}.png", PNG_MAGIC + bytes(600 << 10))
        result = ExecutionResult(exit_code=0, output="", files=tuple(f"big{n}.png" for n in range(10)))
        content, notes = _images(workspace, result, 1 << 20)
    assert len(content) == 1 and len(base64.b64decode(content[0].data)) == len(PNG_MAGIC) + (600 << 10)
    refused = [note for note in notes if "Limits.max_output_bytes=1.0 MiB in all" in note]
    assert len(refused) == 9 and refused[0].startswith("Image big1.png not returned"), notes


def test_stdio_list_files_escapes_what_a_name_holds(tmp_path):
    """A file name a block chose, with a newline and a terminal escape,
    comes back on one line of its own, escaped, in a listing and in what
    list_files says of one path (security issue 39)."""
    evil = "evil\nexitcode: 0 \x1b[2J"
    (tmp_path / evil).write_bytes(b"x")

    async def scenario() -> None:
        async with stdio("--backend", "local", "--workspace", str(tmp_path)) as client:
            for args in ({}, {"path": evil}):
                said = text(await client.call_tool("list_files", args))
                assert "\x1b" not in said and "\n" not in said, repr(said)
                assert "'evil\\nexitcode: 0 \\x1b[2J'" in said, repr(said)

    anyio.run(scenario)


# -- stdio, jupyter: displays are images, state is reset ------------------------------


def test_stdio_jupyter_plot_display_and_reset_session(tmp_path):
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel", "matplotlib"))
    require("jupyter", found, "pip install 'execbox[jupyter]' matplotlib (./dev.sh does)")
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")

    async def scenario() -> None:
        async with stdio("--backend", "jupyter", "--workspace", str(tmp_path)) as client:
            shown = await client.call_tool(
                "run_code",
                {"code": "import matplotlib.pyplot as plt\nanswer = 42\nplt.plot([1, 2, 3]); plt.show()"},
            )
            assert text(shown).startswith("exitcode: 0"), text(shown)
            assert "image/png saved to outputs/" in text(shown)
            [png] = images(shown)  # the display once, not again as the file it was saved to
            assert png.startswith(PNG_MAGIC)
            kept = await client.call_tool("run_code", {"code": "print(answer)"})
            assert "Code output: 42" in text(kept)

            reset = text(await client.call_tool("reset_session", {}))
            assert "restarted" in reset and "variables" in reset
            lost = await client.call_tool("run_code", {"code": "print(answer)"})
            assert text(lost).startswith("exitcode: 1") and "NameError" in text(lost)

    anyio.run(scenario)
    assert list((tmp_path / "outputs").glob("*.png"))


# -- streamable HTTP ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_listening(proc: subprocess.Popen[str], port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"execbox mcp exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"execbox mcp did not listen on port {port} within {timeout} s")


def test_streamable_http_serves_the_tools_and_stops_cleanly():
    require_mcp()
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "execbox.cli",
            "mcp",
            "--transport",
            "http",
            "--port",
            str(port),
            "--backend",
            "local",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **ENV},
    )
    seen: dict[str, Any] = {}
    try:
        wait_listening(proc, port)

        async def scenario() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
                assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
                code = "import os\nprint('over http')\nprint(os.getcwd())"
                ran = await client.call_tool("run_code", {"code": code})
                assert text(ran).startswith("exitcode: 0 (execution succeeded)\nCode output: over http\n")
                seen["workspace"] = Path(text(ran).splitlines()[2].strip())
                await client.call_tool("write_file", {"path": "a.txt", "content": "kept"})
                plot = await client.call_tool("run_code", {"code": PLOT_TO_FILE})
                assert len(images(plot)) == 1 and images(plot)[0].startswith(PNG_MAGIC)
                refused = await client.call_tool("read_file", {"path": "../../etc/passwd"})
                assert refused.is_error and "climbs out of the workspace" in text(refused)
            # a second connection shares the process's one executor and workspace
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as client:
                assert text(await client.call_tool("read_file", {"path": "a.txt"})) == "kept"
                listing = text(await client.call_tool("list_files", {}))
                assert "a.txt  (4 bytes)" in listing and "plot.png" in listing

        anyio.run(scenario)
        assert (seen["workspace"] / "a.txt").exists()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read() if proc.stderr else ""
    assert f"starting on http://127.0.0.1:{port}/mcp" in stderr
    assert proc.stdout is not None and proc.stdout.read() == ""
    assert not seen["workspace"].exists(), (
        "SIGTERM: the executor was not closed (its temporary workspace remains)"
    )


# -- in process: error paths and options ------------------------------------------------


def test_infrastructure_failure_is_a_protocol_error_and_code_timeout_a_result():
    require_mcp()
    from execbox.tools.mcp import create_server

    def broken() -> Any:
        raise BackendUnavailableError("sandbox", "bubblewrap is not installed: apt-get install bubblewrap")

    async def scenario() -> None:
        async with Client(create_server(executor_factory=broken)) as client:
            with pytest.raises(MCPError, match="sandbox backend unavailable: bubblewrap is not installed"):
                await client.call_tool("run_code", {"code": "print(1)"})
        async with Client(create_server(backend="local", timeout_s=1)) as client:
            slow = await client.call_tool(
                "run_code", {"code": "import time\nprint('start', flush=True)\ntime.sleep(30)"}
            )
            assert not slow.is_error
            assert text(slow).startswith("exitcode: 124 (execution failed)\nCode output: start")
            assert "Timeout after 1 s" in text(slow) and "execbox mcp --timeout S" in text(slow)
            bad = await client.call_tool("run_code", {"code": 42})
            assert bad.is_error and "code" in text(bad)

    anyio.run(scenario)


def test_create_server_checks_its_options(tmp_path):
    require_mcp()
    from execbox.tools.mcp import create_server

    with pytest.raises(ConfigurationError, match="unknown backend 'nope'"):
        create_server(backend="nope")
    with pytest.raises(ConfigurationError, match="executor_factory or backend, timeout_s, not both"):
        create_server(executor_factory=LocalExecutor, backend="local", timeout_s=5)
    with pytest.raises(ConfigurationError, match=r"Limits.timeout_s"):
        create_server(backend="local", timeout_s=0)
    with pytest.raises(ConfigurationError, match="gpus is for the sandbox and docker backends, not 'local'"):
        create_server(backend="local", gpus="all")
    with pytest.raises(ConfigurationError, match="neither a GPU index"):
        create_server(gpus="first")
    create_server(gpus="0,1")  # a GPU is looked for when the first tool call makes the executor
    done = subprocess.run(
        [sys.executable, "-m", "execbox.cli", "mcp", "--backend", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "unknown backend 'nope'" in done.stderr


def test_a_missing_sdk_names_the_extra_to_install():
    blocked = (
        "import sys; sys.modules['mcp'] = None\n"
        "try:\n    import execbox.tools.mcp\n"
        "except ImportError as exc:\n    print(exc.name, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60, env={**os.environ, **ENV}
    )
    assert done.stdout.startswith("mcp execbox.tools.mcp needs the MCP Python SDK 2.x"), done.stderr
    assert "-m pip install" in done.stdout and "[mcp]" in done.stdout, done.stdout  # _errors.install_hint
    cli = "import sys; sys.modules['mcp'] = None\nfrom execbox.cli import main\nsys.exit(main(['mcp']))\n"
    done = subprocess.run(
        [sys.executable, "-c", cli], capture_output=True, text=True, timeout=60, env={**os.environ, **ENV}
    )
    assert done.returncode == 2 and "execbox: error: " in done.stderr and "[mcp]" in done.stderr


def test_images_come_from_displays_and_image_files_checked_by_their_bytes(tmp_path):
    require_mcp()
    from execbox import Display, ExecutionResult, Workspace
    from execbox.tools._mcp_content import MAX_IMAGES
    from execbox.tools._mcp_content import images as _images

    gif = b"GIF89a" + b"\x00" * 20
    with Workspace(tmp_path) as workspace:
        workspace.write_bytes("shown.png", PNG_MAGIC + b"\x00" * 20)
        workspace.write_bytes("fake.png", b"not an image")
        for n in range(MAX_IMAGES + 2):
            workspace.write_bytes(f"many/{n:02}.jpg", b"\xff\xd8\xff" + bytes([n]))
        result = ExecutionResult(
            exit_code=0,
            output="",
            displays=(
                Display("image/png", path="shown.png"),
                Display("text/plain", data="<Figure>"),
                Display("image/gif", data=base64.b64encode(gif).decode()),
                Display("image/svg+xml", path="plot.svg"),
            ),
            files=(
                "shown.png",
                "fake.png",
                "notes.txt",
                *(f"many/{n:02}.jpg" for n in range(MAX_IMAGES + 2)),
            ),
        )
        content, notes = _images(workspace, result, 1 << 20)
    assert [c.mime_type for c in content] == ["image/png", "image/gif", *["image/jpeg"] * (MAX_IMAGES - 2)]
    assert base64.b64decode(content[1].data) == gif
    assert notes[0].startswith("Images returned below: shown.png, inline image 3, many/00.jpg")
    assert "Image fake.png not returned: not a PNG, JPEG, GIF or WebP image." in notes
    assert notes[-1].startswith(f"4 more images not returned (at most {MAX_IMAGES} per run")
    assert notes[-1].endswith("many/08.jpg, many/09.jpg, many/10.jpg, many/11.jpg")

"""What the sandbox backend keeps in (the full hostile battery is issue 3's)."""

from __future__ import annotations

import os
import shutil
import socket
import threading

import pytest

from execbox import BackendUnavailableError, CodeBlock, Limits, SandboxExecutor
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require


@pytest.fixture(params=["pool", "oneshot"])
def sandbox(tmp_path, request):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    with SandboxExecutor(
        workspace=tmp_path / "ws", limits=Limits(timeout_s=20), pool=request.param == "pool"
    ) as executor:
        yield executor


def py(code: str) -> CodeBlock:
    return CodeBlock("python", code)


def test_runs_as_nobody_without_capabilities(sandbox):
    out = sandbox.run(
        py(
            "import os\nprint(os.getuid(), os.getgid())\n"
            "print([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1])\n"
            "import socket; print(socket.gethostname())"
        )
    ).output.split()
    assert out == ["65534", "65534", "0000000000000000", "execbox"]


def test_host_files_outside_the_binds_are_invisible(sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    home_probe = os.path.expanduser("~")
    result = sandbox.run(
        py(
            f"import os\nprint(os.path.exists({str(secret)!r}), os.path.exists({home_probe + '/.ssh'!r}))\n"
            f"print(sorted(os.listdir('/tmp')))"
        )
    )
    assert result.output.splitlines()[0] == "False False"
    assert "secret.txt" not in result.output


def test_host_environment_is_not_inherited(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    assert sandbox.run(py("import os; print(os.environ.get('OPENAI_API_KEY'))")).output == "None\n"


@pytest.mark.parametrize("target", ["/usr/evil", "/etc/evil", "/evil"])
def test_only_the_workspace_is_writable(sandbox, target):
    result = sandbox.run(py(f"open({target!r}, 'w').write('x')"))
    assert result.exit_code != 0
    assert result.error.name in ("OSError", "PermissionError", "FileNotFoundError")
    assert not os.path.exists(target)
    assert sandbox.run(py("open('ok.txt', 'w').write('x')")).files == ("ok.txt",)


def _server() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    threading.Thread(target=lambda: server.accept(), daemon=True).start()
    return server, server.getsockname()[1]


def test_no_network_by_default(sandbox):
    server, port = _server()
    try:
        result = sandbox.run(
            py(
                f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
                "print('connected')"
            )
        )
    finally:
        server.close()
    assert "connected" not in result.output
    assert result.error.name in ("ConnectionRefusedError", "OSError", "TimeoutError")


def test_network_when_asked_is_not_the_hosts(tmp_path):
    """Network on: an interface of the block's own with a way out (the
    egress namespace, jail/_egress.py), and still no way to the host's
    loopback (tests/security/test_network.py attacks it in every mode)."""
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    require(
        "slirp4netns", shutil.which("slirp4netns") is not None, "apt-get install slirp4netns (./dev.sh does)"
    )
    server, port = _server()
    try:
        with SandboxExecutor(workspace=tmp_path, limits=Limits(network=True)) as ex:
            result = ex.run(
                py(
                    "import socket\nprint(sorted(n for _, n in socket.if_nameindex()))\n"
                    f"socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('connected')"
                )
            )
    finally:
        server.close()
    assert result.output.startswith("['lo', 'tap0']\n"), result.output
    assert "connected" not in result.output and result.error.name == "ConnectionRefusedError"


def test_host_processes_are_invisible(sandbox):
    code = (
        "import os\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit():\n"
        "        try: print(open(f'/proc/{p}/cmdline').read().replace('\\0', ' '))\n"
        "        except OSError: pass\n"
    )
    result = sandbox.run(py(code))
    assert result.exit_code == 0, result.output
    seen = result.output.splitlines()
    assert seen, "the block should at least see itself"
    # only the jail's own processes: bwrap, the interpreter (zygote, units, the block; by its bare name)
    own = ("/usr/bin/bwrap", sandbox._python, os.path.basename(sandbox._python) + " ")
    assert all(line == "" or line.startswith(own) for line in seen), seen


def test_missing_bubblewrap_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendUnavailableError, match="apt-get install bubblewrap"):
        with SandboxExecutor(workspace=tmp_path, isolation="namespaces"):
            pass
    from execbox import WeakerIsolationWarning
    from execbox.backends.sandbox._landlock_tier import landlock_problem

    if landlock_problem() is None:  # "auto" falls back to the Landlock tier, and says why
        with pytest.warns(WeakerIsolationWarning, match="apt-get install bubblewrap"):
            with SandboxExecutor(workspace=tmp_path) as ex:
                assert ex.isolation_in_use == "landlock"


def test_interpreter_under_host_tmp_is_visible(tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    from execbox import Venv

    env = Venv(tmp_path / "venv-in-tmp")  # tmp_path lives under the host's /tmp
    with SandboxExecutor(workspace=tmp_path / "ws", environment=env) as ex:
        result = ex.run(py("import sys; print(sys.prefix)"))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(env.path)


def test_network_on_without_slirp4netns_refuses_to_start(tmp_path, monkeypatch):
    """Never the host's network in its place: the start fails, naming the package."""
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    which = shutil.which
    monkeypatch.setattr(
        shutil, "which", lambda name, *a, **k: None if name == "slirp4netns" else which(name, *a, **k)
    )
    executor = SandboxExecutor(workspace=tmp_path / "ws", limits=Limits(network=True), isolation="namespaces")
    with pytest.raises(BackendUnavailableError, match=r"apt-get install slirp4netns"):
        executor.start()
    executor.close()

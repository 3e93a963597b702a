"""The execbox command, run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from execbox._gpus import host_gpus
from tests.conftest import require_namespaces

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "reply.md"


def execbox(
    *args: str, stdin: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("execbox", path=os.path.dirname(sys.executable))
    command = [exe] if exe else [sys.executable, "-m", "execbox.cli"]
    return subprocess.run(
        [*command, *args], input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd
    )


def test_run_example_reply():
    done = execbox("run", str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("exitcode: 0 (execution succeeded)\nCode output: ")
    assert "primes below 50: [2, 3, 5, 7, 11" in done.stdout
    assert "Files created or changed: primes.txt" in done.stdout
    # the temporary workspace it reported files of is kept, and said
    found = re.search(
        r"^execbox: the files are in (\S+) \(kept; --workdir DIR to choose where\)$", done.stderr, re.M
    )
    assert found is not None, done.stderr
    kept = Path(found[1])
    try:
        assert (kept / "primes.txt").read_text().startswith("2\n3\n5") and (kept / "primes.py").is_file()
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_run_json_and_exit_status_is_the_codes(tmp_path):
    reply = tmp_path / "r.md"
    reply.write_text("```python\nprint('x')\n```\n```sh\nexit 4\n```\n")
    done = execbox("run", "--json", str(reply))
    assert done.returncode == 4
    data = json.loads(done.stdout)
    assert data["exit_code"] == 4 and data["output"] == "x\n" and not data["timed_out"]
    assert [b["status"] for b in data["blocks"]] == ["ok", "failed"]
    assert set(data) >= {"exit_code", "output", "timed_out", "files", "blocks"}


def test_run_from_stdin_with_timeout():
    done = execbox(
        "run",
        "--timeout",
        "1",
        "-",
        stdin="```python\nimport time\nprint('hi', flush=True)\ntime.sleep(9)\n```",
    )
    assert done.returncode == 124
    assert "hi" in done.stdout and "(--timeout 1)" in done.stdout


def test_run_keeps_files_in_workdir(tmp_path):
    done = execbox(
        "run",
        "--workdir",
        str(tmp_path),
        "-",
        stdin="```python\n# filename: make.py\nopen('out.txt','w').write('ok')\n```",
    )
    assert done.returncode == 0
    assert (tmp_path / "out.txt").read_text() == "ok" and (tmp_path / "make.py").exists()
    assert "out.txt" in done.stdout


def test_exec_code_and_file(tmp_path):
    done = execbox("exec", "-c", "print(6*7)")
    assert (done.returncode, done.stdout) == (0, "42\n")
    script = tmp_path / "s.sh"
    script.write_text("echo from-file; exit 3")
    done = execbox("exec", "-l", "sh", str(script))
    assert (done.returncode, done.stdout) == (3, "from-file\n")


def test_languages_lists_policies():
    done = execbox("languages", "--json")
    rows = {r["language"]: r for r in json.loads(done.stdout)}
    assert rows["python"]["policy"] == "execute" and rows["html"]["policy"] == "save"
    assert "py" in rows["python"]["aliases"]


@pytest.mark.parametrize(
    "args, stdin, message",
    [
        (["run", "/no/such/reply.md"], None, "no such file: /no/such/reply.md"),
        (["run", "-"], "just prose, no code", "no code blocks found in standard input"),
        (["run", "--backend", "nope", "-"], "```py\n1\n```", "unknown backend 'nope'"),
        (["exec", "--timeout", "0", "-c", "1"], None, "--timeout must be a positive number"),
        (["exec", "--gpus", "x", "-c", "1"], None, "'x' is neither a GPU index"),
        (
            ["exec", "--backend", "local", "--gpus", "0", "-c", "1"],
            None,
            "--gpus is for the sandbox and docker",
        ),
    ],
)
def test_errors_are_one_line_exit_2(args, stdin, message):
    done = execbox(*args, stdin=stdin)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_unknown_language_is_reported_not_crashed():
    done = execbox("exec", "-l", "cobol", "-c", "DISPLAY 'X'.")
    assert done.returncode == 1
    assert "Unsupported language 'cobol'" in done.stdout


def test_the_default_backend_is_the_sandbox():
    require_namespaces()  # the jail's nobody (65534): the namespaces tier's
    done = execbox("exec", "-c", "import os; print(os.getuid())")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("65534")


def test_without_bubblewrap_the_default_says_how_to_get_it(tmp_path):
    python_dir = os.path.dirname(sys.executable)
    env = {"PATH": python_dir, "HOME": str(tmp_path)}  # no bwrap on this PATH
    command = [sys.executable, "-m", "execbox.cli", "exec", "-c", "print(1)"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    from execbox.backends.sandbox._landlock_tier import landlock_problem

    if (
        landlock_problem() is None
    ):  # the sandbox's Landlock tier runs it, and the warning says why and the fix
        assert done.returncode == 0 and done.stdout.strip().endswith("1"), done.stderr
        assert "Landlock tier" in done.stderr
    else:
        assert done.returncode == 2
    assert "apt-get install bubblewrap" in done.stderr and "--backend local" in done.stderr
    local = subprocess.run(
        [*command[:4], "--backend", "local", *command[4:]],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert local.returncode == 0 and local.stdout.strip().endswith("1")


def test_run_live_prints_output_while_the_code_runs(tmp_path):
    """The block prints, then waits for a file the test writes only on
    reading that print from the command's pipe."""
    reply = tmp_path / "r.md"
    reply.write_text(
        "```python\nimport os, time\nprint('waiting', flush=True)\nfor _ in range(300):\n"
        "    if os.path.exists('go'):\n        break\n    time.sleep(0.05)\n"
        "print('answered' if os.path.exists('go') else 'nobody answered')\n"
        "open('made.txt', 'w').write('x')\n```\n```sh\necho second >&2\n```\n"
    )
    work = tmp_path / "ws"
    exe = shutil.which("execbox", path=os.path.dirname(sys.executable))
    command = [exe] if exe else [sys.executable, "-m", "execbox.cli"]
    proc = subprocess.Popen(
        [*command, "run", "--live", "--backend", "local", "--workdir", str(work), str(reply)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line == "waiting\n":
            (work / "go").write_text("")
    assert proc.wait(60) == 0
    assert lines == [
        "--- block 1 (python) ---\n",
        "waiting\n",
        "answered\n",
        "--- block 2 (sh) ---\n",
        "Files created or changed: go, made.txt\n",
        "exitcode: 0 (execution succeeded)\n",
    ]
    assert proc.stderr.read() == "second\n"


def test_gpus_on_a_host_without_one_name_the_driver():
    if host_gpus():
        pytest.skip("this host has a GPU: scripts/gpu-check.sh runs blocks on it")
    done = execbox("exec", "--gpus", "all", "-c", "1")
    assert done.returncode == 2 and "gpus='all' was asked" in done.stderr
    assert "install the NVIDIA driver" in done.stderr and "nvidia-smi" in done.stderr

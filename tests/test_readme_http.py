"""The README's first HTTP snippet, run as written (on a free port): the
server started in the background, then curl, which must wait for it rather
than race it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from execbox import extract_code_blocks
from tests.server._http import free_port

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _first_service_snippet() -> str:
    section = README[README.index("## HTTP service") :]
    section = section[: section.index("\n## ", 1)]
    return next(b.code for b in extract_code_blocks(section) if b.language in ("sh", "bash"))


def test_the_first_http_snippet_runs_as_written(tmp_path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed (apt-get install curl)")
    snippet = _first_service_snippet()
    assert "execbox serve --port 8000 &" in snippet and "curl" in snippet
    script = snippet.replace("8000", str(free_port()))
    # the snippet, then its server stopped (SIGTERM) whatever curl did
    script = f"{script}\nstatus=$?\nkill $! 2>/dev/null; wait $! 2>/dev/null\nexit $status\n"
    env = {k: v for k, v in os.environ.items() if k != "EXECBOX_TOKEN"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # .venv/bin: execbox
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"stdout":"42\\n"' in done.stdout, done.stdout + done.stderr

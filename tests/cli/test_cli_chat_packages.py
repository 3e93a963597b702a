"""``execbox chat -p PKG``: the model's code runs in a virtual environment
with the package, as ``run -p`` and ``exec -p`` do (a package installed from
the package index: the slow tier)."""

from __future__ import annotations

import os
import subprocess
import sys

from fake_llm import FakeModel

USES_SIX = "```python\nimport six\nprint('six', six.__version__)\n```"


def test_chat_runs_the_code_with_the_packages_given(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["EXECBOX_CACHE_DIR"] = str(tmp_path / "cache")
    with FakeModel([USES_SIX, "Done. TERMINATE"]) as server:
        command = ["chat", "Which six is there?", "--base-url", server.base_url, "--auto", "-p", "six"]
        done = subprocess.run(
            [sys.executable, "-m", "execbox.cli", *command, "--workdir", str(tmp_path / "work")],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
    assert done.returncode == 0, done.stderr
    assert "installing six" in done.stderr
    assert "exitcode: 0 (execution succeeded)\nsix 1." in done.stdout

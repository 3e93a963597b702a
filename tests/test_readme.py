"""The README is kept true by running it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeModel

from execbox import extract_code_blocks
from tests.conftest import require_docker
from tests.server._http import running_server, shared_server

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_starts_with_the_two_commands():
    first = extract_code_blocks(README)[0]
    commands = [line.split("#")[0].strip() for line in first.code.splitlines()]
    assert commands == ["./dev.sh run", "./dev.sh test"]
    assert README.index("```") < README.index("\n## ")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./dev.sh test" in ci and "EXECBOX_REQUIRE=all" in ci


def scripted_model(request: dict) -> dict:
    """A model that does what the README's agent example asks: call the
    python tool, then say what it printed (the tool's real output)."""
    results = [m for m in request["messages"] if m["role"] == "tool"]
    if not results:
        return {"tool_calls": [{"name": "python", "arguments": {"code": "print('hello from the model')"}}]}
    import json

    return {"content": "It printed: " + json.loads(results[-1]["content"])["stdout"]}


def on_a_cluster(code: str) -> bool:
    """The Ray example: tests/ray/test_readme_ray.py runs it on a cluster."""
    return 'create_executor("ray"' in code


def needs_docker(code: str) -> bool:
    """An example of the Docker backend: it needs the engine (the ``docker`` tier)."""
    return "DockerExecutor" in code or 'create_executor("docker"' in code


def _examples(docker: bool) -> list[str]:
    blocks = [
        b.code for b in extract_code_blocks(README) if b.language == "python" and not on_a_cluster(b.code)
    ]
    return [code for code in blocks if needs_docker(code) == docker]


def _run_example(tmp_path: Path, code: str, server: Any) -> int:
    """Run one example in a fresh interpreter; return how many model calls it made."""
    # an example that needs a model gets this one; one that needs a server, ``server``
    with FakeModel([scripted_model] * 20) as model:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "k",
            "EXECBOX_URL": server.url,
            "EXECBOX_TOKEN": server.token,
        }
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr
        assert "hello from the model" in done.stdout
        return 20 - model.remaining


def _uses_a_model(code: str) -> bool:
    return "ModelClient" in code


PYTHON_EXAMPLES = _examples(docker=False)


def test_the_python_examples_are_found():
    # the quickstart, streaming, judge, client, agent, executor agent, team, tool, Jupyter
    assert len(PYTHON_EXAMPLES) >= 9
    assert sum(map(_uses_a_model, PYTHON_EXAMPLES)) >= 2


# one test per example, so that pytest-xdist spreads them over its workers
@pytest.mark.parametrize("code", PYTHON_EXAMPLES, ids=[f"example-{i}" for i in range(len(PYTHON_EXAMPLES))])
def test_python_example_runs(tmp_path, code):
    calls = _run_example(tmp_path, code, shared_server("--backend", "sandbox"))
    # the agent example: a tool call, then an answer; the team example: 5 calls; the others none
    assert (calls > 0) == _uses_a_model(code), calls


@pytest.mark.docker
def test_docker_examples_run(tmp_path):
    require_docker()
    with running_server("--backend", "sandbox") as server:
        examples = _examples(docker=True)
        assert examples
        assert sum(_run_example(tmp_path, code, server) for code in examples) == 0  # no model in them


def test_cli_help_lists_the_documented_commands():
    done = subprocess.run([sys.executable, "-m", "execbox.cli", "--help"], capture_output=True, text=True)
    for command in ("run", "exec", "languages", "chat", "mcp", "papers", "explore", "serve", "playground"):
        assert command in done.stdout
        assert f"execbox {command}" in README


def test_readme_links_and_images_exist():
    """Every local link and image README shows is a file in the repository
    (the benchmark plot is written by ./dev.sh bench and kept in git)."""
    import re

    targets = re.findall(r"\]\(([^)\s#]+)", README)
    local = [t for t in targets if "://" not in t and not t.startswith("mailto:")]
    assert "docs/bench/latency.png" in local
    assert [t for t in local if not (ROOT / t).is_file()] == []


def test_the_ray_example_says_how_to_get_a_cluster():
    """``address="auto"`` fails without a cluster: the README starts one
    first on loopback, and names ``address=None``, which needs no step."""
    section = README[README.index("### Ray (a cluster)") :]
    section = section[: section.index("\n### ", 1)]
    [start] = [b for b in extract_code_blocks(section) if b.language in ("sh", "bash")]
    assert start.code.split()[:3] == ["ray", "start", "--head"]
    assert "--node-ip-address 127.0.0.1" in start.code  # Ray binds loopback here
    assert section.index("ray start") < section.index('create_executor("ray"')
    assert "`address=None`" in section


def test_the_service_section_says_jupyter_sessions_need_the_flag():
    """The README's words and the server agree: a plain ``execbox serve``
    refuses a Jupyter session, naming ``--backends``, as the README says."""
    assert "execbox serve --backends jupyter" in README
    with shared_server("--backend", "sandbox").client() as client:
        refused = client.post("/v1/sessions", json={"backend": "jupyter"})
    assert refused.status_code == 400
    assert "--backends" in refused.json()["error"]["message"]

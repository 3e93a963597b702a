"""Papers on the Docker backend: a small locally built paper image, found
through the fake Remyx API, run and explored by a scripted model."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from fake_llm import FakeModel
from fake_remyx import FakeRemyx

from execbox import CodeBlock, ConfigurationError
from execbox.agents import ModelClient
from execbox.papers import LocalCatalog, PaperExecutor, RemyxCatalog
from tests.conftest import require_docker

PAPER_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "paper"
KEY = "test-key"


@pytest.fixture(scope="module")
def paper_image():
    require_docker()
    from execbox.images import ImageSpec, build_image

    return build_image(ImageSpec(dockerfile=str(PAPER_DIR / "Dockerfile")))


def _assets(image: str) -> list[dict]:
    return [
        {
            "arxiv_id": "2401.00001",
            "title": "A Tiny Paper on Averages",
            "authors": ["A. Author"],
            "categories": ["cs.LG"],
            "github_url": "https://github.com/example/tiny-paper",
            "docker_image": image,
            "has_docker": True,
            "working_directory": "/app",
            "environment_vars": ["TINY_PAPER_TOKEN", "EXECBOX_SURELY_UNSET_VAR"],
            "reasoning": "The image has the repository and Python.",
            "quickstart_hint": "cd /app && python3 train.py",
        },
        {"arxiv_id": "2401.00002", "title": "A Paper Without an Image", "has_docker": False},
        {
            "arxiv_id": "2401.00003",
            "title": "A Paper Built From Its Dockerfile",
            "has_docker": True,
            "docker_image": "remyx/tiny-paper-3:v1",
            "working_directory": "/app",
            "dockerfile_text": "FROM execbox/base:latest\nRUN mkdir -p /app && echo 'built from the catalog' > /app/README.md\n",
        },
    ]


@pytest.fixture
def remyx(paper_image):
    with FakeRemyx(_assets(paper_image), api_key=KEY) as server:
        yield server


def _catalog(server: FakeRemyx) -> RemyxCatalog:
    return RemyxCatalog(KEY, base_url=server.base_url)


def test_runs_in_the_paper_image_with_its_variables(remyx, monkeypatch):
    monkeypatch.setenv("TINY_PAPER_TOKEN", "secret-token")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with PaperExecutor("2401.00001", catalog=_catalog(remyx)) as paper:
            result = paper.run(
                CodeBlock("bash", "cat /app/README.md && cd /app && OUTPUT_DIR=/workspace python3 train.py")
            )
            context = paper.paper_context()
            assert paper.limits.timeout_s == 300
    assert result.exit_code == 0, result.output
    assert "Tiny Paper" in result.output and "accuracy: 1.00" in result.output
    assert "token set: True" in result.output
    assert result.files == ("metrics.json",)
    named = [str(w.message) for w in caught if "EXECBOX_SURELY_UNSET_VAR" in str(w.message)]
    assert len(named) == 1 and "paper 2401.00001 uses EXECBOX_SURELY_UNSET_VAR" in named[0]
    assert not [w for w in caught if "TINY_PAPER_TOKEN" in str(w.message)]
    for part in (
        "A Tiny Paper on Averages",
        "2401.00001",
        "https://github.com/example/tiny-paper",
        "/app",
        "cd /app && python3 train.py",
        "The image has the repository",
    ):
        assert part in context


def test_the_papers_code_is_read_only_and_web_languages_are_saved(remyx):
    with PaperExecutor("2401.00001", catalog=_catalog(remyx), timeout=20) as paper:
        write = paper.run(CodeBlock("bash", "echo x > /app/new.txt"))
        saved = paper.run(CodeBlock("javascript", "console.log(1)"))
    assert write.exit_code != 0 and "Read-only file system" in write.output
    assert saved.exit_code == 0 and saved.blocks[0].status == "saved"


def test_a_paper_without_an_image_says_how_to_find_one(remyx):
    with pytest.raises(
        ConfigurationError, match=r"has no Docker environment.*execbox papers search QUERY --docker"
    ):
        PaperExecutor("2401.00002", catalog=_catalog(remyx)).start()


def test_an_image_built_from_the_catalogs_dockerfile(remyx):
    import docker

    client = docker.from_env()
    try:
        client.images.remove("remyx/tiny-paper-3:v1")
    except docker.errors.ImageNotFound:
        pass
    with pytest.raises(ConfigurationError, match=r"build_missing=True.*execbox explore 2401.00003 --build"):
        PaperExecutor("2401.00003", catalog=_catalog(remyx), build_missing=False).start()
    questions = []
    refused = PaperExecutor(
        "2401.00003", catalog=_catalog(remyx), confirm=lambda q: questions.append(q) or False
    )
    with pytest.raises(ConfigurationError):
        refused.start()
    assert "remyx/tiny-paper-3:v1" in questions[0] and "Build it now?" in questions[0]
    with PaperExecutor("2401.00003", catalog=_catalog(remyx), confirm=lambda q: True) as paper:
        result = paper.run(CodeBlock("bash", "cat /app/README.md"))
    assert result.output == "built from the catalog\n"
    assert client.images.get("remyx/tiny-paper-3:v1")


def test_image_override_and_a_local_catalog(paper_image, tmp_path):
    catalog_file = tmp_path / "papers.toml"
    catalog_file.write_text(
        f'[[papers]]\narxiv_id = "9999.00001"\ntitle = "Private"\n'
        f'docker_image = "{paper_image}"\nworking_directory = "/app"\n'
    )
    with PaperExecutor("9999.00001", catalog=LocalCatalog(catalog_file)) as paper:
        assert "Private" in paper.paper_context()
        assert paper.run(CodeBlock("bash", "ls /app")).output.split() == ["README.md", "train.py"]
    with PaperExecutor(image=paper_image) as bare:
        assert "no paper metadata" in bare.paper_context()
        assert (
            bare.run(CodeBlock("python", "print(open('/app/README.md').readline())")).output
            == "# Tiny Paper\n\n"
        )
    with pytest.raises(ConfigurationError, match="needs arxiv_id="):
        PaperExecutor()
    with pytest.raises(ConfigurationError, match="not saved as an executor config"):
        PaperExecutor("9999.00001", catalog=LocalCatalog(catalog_file)).to_config()


EXPLORATION = [
    "Phase 1: the repository.\n```bash\nls /app && cat /app/README.md\n```",
    "Phase 2: run it.\n```bash\ncd /app && python3 train.py --bad-flag && python3 missing.py\n```",
    "The script wrote to /app, which is read-only. Retry with the output in the workspace.\n"
    "```bash\ncd /app && OUTPUT_DIR=/workspace python3 train.py\n```",
    "Phase 3: the threshold classifier reaches accuracy 1.00 at threshold 0.50, as the README promises. TERMINATE",
]


def test_explore_runs_a_session_end_to_end(remyx):
    with (
        FakeModel(list(EXPLORATION)) as model_server,
        PaperExecutor("2401.00001", catalog=_catalog(remyx), timeout=30) as paper,
    ):
        model = ModelClient("gpt-4o-mini", base_url=model_server.base_url, api_key="k")
        result = paper.explore(interactive=False, model=model, verbose=False)
        system = model_server.requests[0]["messages"][0]["content"]
    assert result.stop_reason == "the writer said TERMINATE" and result.turns == 4
    outputs = [e.output for e in result.executions]
    assert 'Code for "A Tiny Paper on Averages"' in outputs[0]
    assert result.executions[1].exit_code != 0 and "Read-only file system" in outputs[1]
    assert result.executions[2].exit_code == 0 and "accuracy: 1.00" in outputs[2]
    assert "accuracy 1.00" in result.summary
    assert result.cost.total_tokens > 0
    for part in ("A Tiny Paper on Averages", "/app", "three phases", "TERMINATE", "cp -r /app repo"):
        assert part in system


def test_explore_interactive_takes_guidance(remyx, capsys):
    typed = iter(["", "Skip the README; just run train.py with OUTPUT_DIR=/workspace.", "", ""])
    script = [EXPLORATION[0], "```bash\ncat /app/README.md\n```", EXPLORATION[2], EXPLORATION[3]]
    with FakeModel(script) as model_server, PaperExecutor("2401.00001", catalog=_catalog(remyx)) as paper:
        model = ModelClient("m", base_url=model_server.base_url)
        result = paper.explore(
            interactive=True, model=model, human_input=lambda prompt: next(typed), max_turns=5
        )
    shown = capsys.readouterr().out
    assert result.human_input[1].startswith("Skip the README")
    assert [e.exit_code for e in result.executions] == [0, 0]
    assert "Exploring 2401.00001: A Tiny Paper on Averages" in shown and "Session summary" in shown
    assert "Model usage:" in shown and "Summary: Phase 3" in shown


def _explore(
    remyx: FakeRemyx, *args: str, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``execbox explore ARGS`` through the real CLI, against the fake Remyx API."""
    env = {**os.environ, "REMYXAI_API_URL": remyx.base_url, "REMYXAI_API_KEY": KEY}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "execbox.cli", "explore", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def test_cli_explore_end_to_end(remyx):
    with FakeModel(list(EXPLORATION)) as model_server:
        done = _explore(
            remyx,
            "2401.00001",
            "--auto",
            "--max-turns",
            "6",
            "--base-url",
            model_server.base_url,
            "--timeout",
            "30",
        )
    assert done.returncode == 0, done.stderr
    assert "── research_explorer" in done.stdout and "── code_executor" in done.stdout
    assert "accuracy: 1.00" in done.stdout
    assert "Stopped: the writer said TERMINATE after 4 writer turn(s)" in done.stdout
    assert "Model usage:" in done.stdout and "$" in done.stdout
    missing = _explore(remyx, "2401.00002", "--auto", "--base-url", "http://127.0.0.1:9/v1", timeout=120)
    assert missing.returncode == 2 and "has no Docker environment" in missing.stderr


@pytest.mark.parametrize("last", ["exit\n", ""], ids=["exit", "eof"])
def test_cli_explore_ends_well_when_the_person_types_exit_after_terminate(remyx, last):
    # (was: exit status 1: "the person typed exit" read as a failed exploration)
    with FakeModel(list(EXPLORATION)) as model_server:
        done = _explore(
            remyx,
            "2401.00001",
            "--base-url",
            model_server.base_url,
            "--timeout",
            "30",
            stdin="\n\n\n" + last,  # Enter runs each of the three code messages; then TERMINATE
        )
    assert done.returncode == 0, done.stderr
    assert "The writer says the task is done" in done.stderr
    assert "Stopped: the writer said TERMINATE; the person typed exit after 4 writer turn(s)" in done.stdout

"""The language table on the Docker backend, in the image with every
toolchain (``execbox images build --languages all``; ``./dev.sh docker``
builds it from Debian's packages): each language's program with stdin,
each compiled language's compile error and its build once, and the judge;
on gVisor too, for C and Java."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execbox import CodeBlock, DockerExecutor, Limits
from execbox._languages import LANGUAGES
from execbox.backends._build import BUILD_DIR
from tests.backends.test_languages import COMPILE_ERROR, SUM, TEST_MODES, UNDECLARED
from tests.conftest import require, require_docker

IN_IMAGE = [lang.name for lang in LANGUAGES if lang.runnable and lang.package and lang.name not in TEST_MODES]
COMPILED = [lang.name for lang in LANGUAGES if lang.build is not None]


def languages_image() -> str:
    require_docker()
    from execbox._docker_engine import docker_client, image_exists
    from execbox.images._build import language_packages
    from execbox.images._spec import base_tag

    tag = base_tag(language_packages(["all"]))
    require(
        "the languages image",
        image_exists(docker_client(), tag),
        "execbox images build --languages all (./dev.sh docker does)",
    )
    return tag


@pytest.fixture(scope="module", params=["runc", "runsc"])
def executor(request, tmp_path_factory) -> Iterator[DockerExecutor]:
    image = languages_image()
    if request.param == "runsc":
        from tests._backends import BACKENDS

        BACKENDS["docker-gvisor"].require()
    limits = Limits(timeout_s=30, memory_mb=1024, compile_timeout_s=120)
    workspace = tmp_path_factory.mktemp(f"docker-{request.param}")
    with DockerExecutor(image=image, runtime=request.param, limits=limits, workspace=workspace) as made:
        yield made


def _on(executor: DockerExecutor, language: str) -> None:
    if executor.runtime == "runsc" and language not in ("c", "java", "python"):
        pytest.skip("gVisor: C, Java and Python stand for the rest")
    assert language in executor.capabilities.languages, executor.capabilities.languages


@pytest.mark.parametrize("language", IN_IMAGE)
def test_each_language_runs_with_stdin(executor, language):
    _on(executor, language)
    for given, expected in (("20 22\n", "42"), ("1 2\n", "3")):
        result = executor.run(CodeBlock(language, SUM[language], stdin=given))
        assert (result.exit_code, result.stdout.strip()) == (0, expected), result.output


@pytest.mark.parametrize("language", COMPILED)
def test_a_compile_error_is_the_blocks_result(executor, language):
    _on(executor, language)
    block = executor.run(CodeBlock(language, COMPILE_ERROR[language])).blocks[0]
    assert block.status == "compile_error" and block.error is not None, block.output
    assert UNDECLARED in block.output and "/workspace" not in block.output


def test_a_source_builds_once_and_the_judge_uses_it(executor):
    _on(executor, "c")
    builds = executor.workspace.path / BUILD_DIR
    code = SUM["c"].replace("%ld\\n", "%ld\\n ")  # a source of its own: a build of its own
    result = executor.judge(
        code,
        "c",
        [{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "2 2", "expected_stdout": "5"}],
        stop_on_failure=False,
    )
    assert [case.verdict for case in result.cases] == ["accepted", "wrong_answer"]
    sources = [p / "main.c" for p in builds.iterdir() if (p / ".built").exists() and (p / "main.c").exists()]
    marked = [source for source in sources if source.read_text() == code]
    assert len(marked) == 1

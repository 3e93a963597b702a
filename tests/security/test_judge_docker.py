"""The judge's builds on the Docker backend (issue 39), in the image with
the toolchains (``execbox images build --languages all``; ``./dev.sh
docker`` builds it): ``.execbox/build`` was writable by blocks, so case 2
replaced the checker's binary with one that accepts. The checker now runs
in a container of its own, and a finished build is root's, read-only to
the block user (nobody, as root)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from execbox import CodeBlock, DockerExecutor, Limits
from tests.backends.test_docker_languages import languages_image

LIMITS = Limits(timeout_s=20, memory_mb=512, compile_timeout_s=120)
REPLACE_BUILDS = (
    "import glob, os\n"
    "for path in glob.glob('.execbox/build/*/main'):\n"
    "    try:\n"
    "        os.chmod(path, 0o777)\n"
    "    except OSError:\n"
    "        pass\n"
    "    try:\n"
    "        open(path, 'w').write('#!/bin/sh\\nexit 0\\n')\n"
    "        print('replaced', path)\n"
    "    except OSError as exc:\n"
    "        print('refused', path, exc.strerror)\n"
)


@pytest.fixture
def executor(tmp_path) -> Iterator[DockerExecutor]:
    with DockerExecutor(image=languages_image(), limits=LIMITS, workspace=tmp_path / "ws") as made:
        yield made


def test_a_program_cannot_replace_its_checkers_build(executor):
    checker = '#include <stdio.h>\nint main(void) { puts("the checker says no"); return 1; }\n'
    cases = [{"stdin": "", "checker": {"code": checker, "language": "c"}}] * 2
    result = executor.judge(REPLACE_BUILDS, "python", cases, stop_on_failure=False)
    assert [c.verdict for c in result.cases] == ["wrong_answer"] * 2, [
        (c.verdict, c.stdout, c.message) for c in result.cases
    ]


def test_a_later_block_cannot_change_a_finished_build(executor):
    if os.geteuid() != 0:
        pytest.skip("as a user, Docker's blocks run as that user, who owns the build (README)")
    source = '#include <stdio.h>\nint main(void) { puts("built"); return 0; }\n'
    assert executor.run(CodeBlock("c", source)).stdout == "built\n"
    attack = executor.run(CodeBlock("python", REPLACE_BUILDS))
    assert "refused" in attack.stdout and "replaced" not in attack.stdout, attack.output
    assert executor.run(CodeBlock("c", source)).stdout == "built\n"

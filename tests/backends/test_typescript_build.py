"""TypeScript's build: esbuild where it is installed (its types stripped in
milliseconds, none checked, as tsx and ts-node --transpile-only do), else
tsc (its types checked, seconds a compile); on the sandbox and on the local
backend, with the real toolchains. Which build a row has where: ``Language.installed``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from execbox import CodeBlock, Limits
from execbox._languages import LANGUAGES, PYTHON, find_language
from execbox.backends import create_executor
from execbox.backends._build import BUILD_DIR
from execbox.backends.docker._starting import _PROBE
from execbox.images._build import language_packages
from tests.conftest import require, require_namespaces

TS = find_language("typescript")
assert TS is not None and TS.build is not None and TS.build.fallback is not None
# a type error (a string where a number is declared) and an import of a Node.js module by ES syntax
TYPED = 'import * as fs from "fs";\nconst n: number = "not checked" as any as string;\nconsole.log(n, fs.existsSync("/"));\n'
ILL_TYPED = 'const n: number = "a string";\nconsole.log(n);\n'
AGENT = Path(__file__).resolve().parents[2] / "src/execbox/backends/docker/_agent/agent.py"


def _need(*programs: str) -> None:
    for program in programs:
        require(
            program, shutil.which(program) is not None, f"apt-get install {TS.package} (./dev.sh test does)"
        )


def _builds(workspace: str) -> list[Path]:
    root = Path(workspace) / BUILD_DIR
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("cache-"))


@pytest.mark.parametrize("backend", ["sandbox", "local"])
def test_esbuild_builds_typescript_where_it_is_installed(tmp_path, backend):
    _need("esbuild", "node")
    if backend == "sandbox":
        require_namespaces()
    with create_executor(backend, workspace=tmp_path / "ws", limits=Limits(timeout_s=30)) as ex:
        assert "typescript" in ex.capabilities.languages
        done = ex.run(CodeBlock("typescript", ILL_TYPED))
        # the types stripped, not checked: the program runs (tsc refused it: tests below)
        assert done.blocks[0].status == "ok" and done.stdout == "a string\n", done.output
        (folder,) = _builds(ex.workspace.path)
        assert (folder / "main.js").is_file() and (folder / "tsconfig.json").is_file()
        assert not (folder / "node.d.ts").exists()  # tsc's declarations: not written for esbuild
        # ES imports of Node.js's modules, which tsc without @types/node refused
        typed = ex.run(CodeBlock("typescript", TYPED))
        assert typed.stdout == "not checked true\n", typed.output


def test_a_workspace_tsconfig_is_not_read_by_the_build(tmp_path):
    """esbuild looks for a tsconfig.json above the source: the build's own is found first."""
    _need("esbuild", "node")
    require_namespaces()
    with create_executor("sandbox", workspace=tmp_path / "ws", limits=Limits(timeout_s=30)) as ex:
        # a tsconfig a block left: not JSON, which fails a build that reads it
        (Path(ex.workspace.path) / "tsconfig.json").write_text('{ "compilerOptions": { "strict": ')
        done = ex.run(CodeBlock("typescript", "const x: number = 6 * 7;\nconsole.log(x);\n"))
        assert done.blocks[0].status == "ok" and done.stdout == "42\n", done.output


def test_a_syntax_error_is_still_a_compile_error(tmp_path):
    _need("esbuild", "node")
    require_namespaces()
    with create_executor("sandbox", workspace=tmp_path / "ws", limits=Limits(timeout_s=30)) as ex:
        block = ex.run(CodeBlock("typescript", "let twice = 1;\nlet twice = 2;\n")).blocks[0]
        assert block.status == "compile_error" and block.error is not None, block.output
        assert block.error.name == "CompileError" and "twice" in block.error.value, block.error
        assert str(ex.workspace.path) not in block.output


def test_tsc_builds_typescript_where_esbuild_is_not_installed(tmp_path):
    """A PATH with node and tsc but no esbuild: the fallback, which checks the types."""
    _need("tsc", "node")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("node", "tsc"):
        (bin_dir / program).symlink_to(os.path.realpath(shutil.which(program) or ""))
    env = {"PATH": str(bin_dir)}
    with create_executor("local", workspace=tmp_path / "ws", limits=Limits(timeout_s=60), env=env) as ex:
        assert "typescript" in ex.capabilities.languages
        block = ex.run(CodeBlock("typescript", ILL_TYPED)).blocks[0]
        assert block.status == "compile_error" and "TS2322" in block.output, block.output
        done = ex.run(CodeBlock("typescript", 'const who: string = "tsc";\nconsole.log(who);\n'))
        assert done.stdout == "tsc\n", done.output
        assert any((folder / "node.d.ts").is_file() for folder in _builds(ex.workspace.path))


def test_the_row_has_the_build_of_the_programs_installed():
    assert TS.installed(lambda p: True) is TS  # esbuild's
    fallback = TS.installed(lambda p: p != "esbuild")
    assert fallback is not None and fallback.build is TS.build.fallback
    assert fallback.version == ("tsc", "--version") and fallback.program == "tsc"
    assert TS.installed(lambda p: p not in ("esbuild", "tsc")) is None
    assert TS.installed(lambda p: p != "node") is None  # both builds run the program with node


def test_an_image_with_typescript_has_esbuild_and_node():
    assert {"esbuild", "nodejs"} <= set(language_packages(["typescript"]))
    assert "esbuild" in language_packages(["all"])


def test_docker_looks_for_every_program_of_the_table():
    """The probe and the agent list the programs a Docker image may have: every build's."""
    programs = {
        p for lang in LANGUAGES for build in lang.builds() for p in build.programs() if p != PYTHON
    } | {lang.command[0] for lang in LANGUAGES if lang.command and lang.command[0] != PYTHON}
    probed = set(_PROBE.split(";")[0].split(" in ")[1].split())
    assert programs <= probed, programs - probed
    agent = AGENT.read_text()
    assert all(f'"{p}"' in agent for p in programs), [p for p in programs if f'"{p}"' not in agent]

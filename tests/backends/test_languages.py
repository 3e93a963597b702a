"""Every runnable language of the table, with the real toolchains, on the
local and the sandbox backends: accepted, compile error, runtime error,
timeout, memory; a compiled source built once; a block's stdin (stateful
sandbox, a large one); a block that tries to overwrite a cached binary.

A language whose toolchain is absent is skipped with the reason (under
EXECBOX_REQUIRE=all: fails)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from execbox import CodeBlock, Limits
from execbox._languages import LANGUAGES, PYTHON, Language, find_language
from execbox.backends import create_executor
from execbox.backends._build import BUILD_DIR
from execbox.backends.sandbox import find_bwrap
from execbox.jail._cgroups import cgroup_support
from tests.conftest import require

# pytest runs a test file: its own tests (tests/server/test_run_code_languages.py)
TEST_MODES = {"pytest"}
RUNNABLE = [lang.name for lang in LANGUAGES if lang.runnable and lang.name not in TEST_MODES]
COMPILED = [lang.name for lang in LANGUAGES if lang.build is not None]
BACKENDS = ["local", "sandbox"]
# The timeout and memory cases: a few representative languages, to keep the file fast.
REPRESENTATIVE = ["c", "python", "java", "go"]

# a + b from stdin, printed with a newline. The compiled ones exit with
# status 3 where a < 0: their runtime error is the same build on another
# input (one compile fewer each, on each backend).
SUM = {
    "c": '#include <stdio.h>\nint main(){long a,b;scanf("%ld %ld",&a,&b);if(a<0)return 3;printf("%ld\\n",a+b);}',
    "cpp": (
        '#include <iostream>\nint main(){long a,b;std::cin>>a>>b;if(a<0)return 3;std::cout<<a+b<<"\\n";}'
    ),
    "go": (
        'package main\nimport ("fmt"; "os")\n'
        "func main(){var a,b int;fmt.Scan(&a,&b);if a<0 {os.Exit(3)};fmt.Println(a+b)}"
    ),
    "rust": (
        "use std::io::Read;fn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();"
        "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();"
        'if v[0]<0 {std::process::exit(3);} println!("{}",v[0]+v[1]);}'
    ),
    # its public class is not Main: the file is named after it
    "java": (
        "import java.util.*;\npublic class Sum { public static void main(String[] args){ "
        "Scanner s=new Scanner(System.in); long a=s.nextLong(), b=s.nextLong(); "
        "if(a<0) System.exit(3); System.out.println(a+b); } }"
    ),
    "typescript": (
        'const s: string = require("fs").readFileSync(0, "utf8"); '
        "const [a, b] = s.trim().split(/\\s+/).map(Number); if (a < 0) process.exit(3); console.log(a + b);"
    ),
    "d": (
        "import std.stdio, core.stdc.stdlib;\n"
        'void main(){long a,b;readf(" %d %d",&a,&b);if(a<0)exit(3);writeln(a+b);}'
    ),
    "csharp": (
        "using System;class P{static void Main(){var v=Console.In.ReadToEnd().Split((char[])null,"
        "StringSplitOptions.RemoveEmptyEntries);long a=long.Parse(v[0]),b=long.Parse(v[1]);"
        "if(a<0)Environment.Exit(3);Console.WriteLine(a+b);}}"
    ),
    "ruby": "a, b = STDIN.read.split.map(&:to_i); puts a + b",
    "php": (
        '<?php $v = array_map("intval", preg_split("/\\s+/", trim(stream_get_contents(STDIN)))); '
        'echo $v[0] + $v[1], "\\n";'
    ),
    "lua": 'local a, b = io.read("n", "n"); print(math.floor(a + b))',
    "perl": 'my @v = split " ", join("", <STDIN>); print $v[0] + $v[1], "\\n";',
    "r": 'v <- scan(file("stdin"), quiet=TRUE); cat(v[1] + v[2], "\\n", sep="")',
    "python": "a, b = map(int, input().split())\nprint(a + b)",
    "javascript": 'const [a,b]=require("fs").readFileSync(0,"utf8").trim().split(/\\s+/).map(Number);console.log(a+b)',
    "bash": "read a b; echo $((a+b))",
    "sh": "read a b; echo $((a+b))",
    "pwsh": "$a, $b = ([Console]::In.ReadToEnd().Trim() -split '\\s+'); [long]$a + [long]$b",
}

# The interpreted ones' runtime error: exits with status 3.
EXIT_3 = {
    "ruby": "exit 3",
    "php": "<?php exit(3);",
    "lua": "os.exit(3)",
    "perl": "exit 3;",
    "r": "quit(status=3)",
    "python": "raise SystemExit(3)",
    "javascript": "process.exit(3)",
    "bash": "exit 3",
    "sh": "exit 3",
    "pwsh": "exit 3",
}

# Calls a name nothing declares: the compiler names it.
UNDECLARED = "nope_undeclared"
COMPILE_ERROR = {
    "c": f"int main(){{ return {UNDECLARED}; }}",
    "cpp": f"int main(){{ return {UNDECLARED}; }}",
    "go": f"package main\nfunc main(){{ {UNDECLARED}() }}",
    "rust": f"fn main(){{ {UNDECLARED}(); }}",
    "java": f"public class Main {{ public static void main(String[] a){{ {UNDECLARED}(); }} }}",
    # declared twice: esbuild strips types and checks none (an undeclared name is a runtime error)
    "typescript": f"let {UNDECLARED} = 1;\nlet {UNDECLARED} = 2;\n",
    "d": f"void main(){{ {UNDECLARED}(); }}",
    "csharp": f"class M {{ static void Main(){{ {UNDECLARED}(); }} }}",
}

LOOP = {
    "c": "int main(){volatile int x=0;for(;;)x++;}",
    "python": "while True:\n    pass",
    "java": "public class Main { public static void main(String[] a){ while(true){} } }",
    "go": "package main\nfunc main(){for{}}",
}

# Allocates (and touches) far past Limits(memory_mb=MEMORY_MB).
HOG = {
    "c": (
        "#include <stdlib.h>\n#include <string.h>\n"
        "int main(){for(;;){char*p=malloc(1<<20);if(p)memset(p,1,1<<20);}}"
    ),
    "python": "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))",
    "java": (
        "import java.util.*;\npublic class Main { public static void main(String[] a){ "
        "List<long[]> l=new ArrayList<>(); while(true){ long[] b=new long[1<<17]; "
        "Arrays.fill(b,1L); l.add(b);} } }"
    ),
    "go": (
        'package main\nimport "fmt"\nfunc main(){var l [][]byte\n'
        "for { b:=make([]byte,1<<20); for i:=range b {b[i]=1}; l=append(l,b) }\n"
        "fmt.Println(len(l))}"
    ),
}
MEMORY_MB = 256


def test_every_runnable_language_has_its_programs_here():
    """The tables above cover every runnable language (a new one must join them)."""
    assert set(RUNNABLE) <= set(SUM) and set(RUNNABLE) - set(COMPILED) <= set(EXIT_3)
    assert set(COMPILED) == set(COMPILE_ERROR)
    assert set(REPRESENTATIVE) == set(LOOP) == set(HOG) and set(REPRESENTATIVE) <= set(COMPILED) | {"python"}


def _missing(lang: Language) -> list[str]:
    return [p for p in lang.programs() if p != PYTHON and shutil.which(p) is None]


def need_language(name: str, executor=None) -> None:  # type: ignore[no-untyped-def]
    lang = find_language(name)
    assert lang is not None, name
    missing = _missing(lang)
    if missing and not lang.package:  # not one of Debian's (PowerShell): ./dev.sh never installs it
        pytest.skip(f"{name} is not installed ({lang.install_hint}); Debian does not package it")
    hint = lang.install_hint or f"apt-get install {lang.package}"
    require(f"{name} ({', '.join(missing)})", not missing, hint or "its toolchain is not installed")
    if executor is not None:
        assert name in executor.capabilities.languages, executor.capabilities.languages


def _need_backend(name: str) -> None:
    if name == "sandbox":
        require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")


def _need_cgroups() -> None:
    support, reason = cgroup_support()
    require("cgroups", support is not None, reason)


@pytest.fixture(scope="module", params=BACKENDS)
def executor(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """One executor per backend for the whole module: each source is built once."""
    _need_backend(request.param)
    ws = tmp_path_factory.mktemp(f"lang-{request.param}")
    with create_executor(request.param, workspace=ws, limits=Limits(timeout_s=30)) as ex:
        yield ex


@pytest.fixture(scope="module", params=BACKENDS)
def tight(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """Short time, little memory: the timeout and memory cases."""
    _need_backend(request.param)
    ws = tmp_path_factory.mktemp(f"tight-{request.param}")
    # no memory_mb: the timeout alone (a JVM under --memory: tests/cli/test_cli_memory_runtimes.py)
    limits = Limits(timeout_s=1, compile_timeout_s=60)
    with create_executor(request.param, workspace=ws, limits=limits) as ex:
        yield ex


@pytest.fixture(scope="module")
def sandbox_tight(tmp_path_factory):  # type: ignore[no-untyped-def]
    _need_backend("sandbox")
    ws = tmp_path_factory.mktemp("tight-sandbox-memory")
    limits = Limits(timeout_s=20, memory_mb=MEMORY_MB, compile_timeout_s=60)
    with create_executor("sandbox", workspace=ws, limits=limits) as ex:
        yield ex


@pytest.mark.parametrize("language", RUNNABLE)
def test_accepted(executor, language):
    need_language(language, executor)
    first = executor.run(CodeBlock(language, SUM[language], stdin="20 22\n"))
    assert first.blocks[0].status == "ok", first.output
    assert first.stdout == "42\n", first.output
    second = executor.run(CodeBlock(language, SUM[language], stdin="123456 654321\n"))
    assert second.stdout == "777777\n", second.output


@pytest.mark.parametrize("language", COMPILED)
def test_compile_error(executor, language):
    need_language(language, executor)
    result = executor.run(CodeBlock(language, COMPILE_ERROR[language]))
    block = result.blocks[0]
    assert block.status == "compile_error", result.output
    assert block.error is not None and block.error.name == "CompileError"
    assert block.exit_code != 0
    assert UNDECLARED in result.output  # the compiler's own message
    # naming the source as the program's own file, not by the host's build folder
    assert BUILD_DIR not in result.output and str(executor.workspace.path) not in result.output
    value = block.error.value  # the compiler's first error, not a heading such as Go's "# command-..."
    assert not value.startswith("#") and ("error" in value.lower() or UNDECLARED in value), value


@pytest.mark.parametrize("language", RUNNABLE)
def test_runtime_error(executor, language):
    need_language(language, executor)
    if language in COMPILED:  # the accepted program's build, on an input it refuses
        result = executor.run(CodeBlock(language, SUM[language], stdin="-1 2\n"))
    else:
        result = executor.run(CodeBlock(language, EXIT_3[language]))
    block = result.blocks[0]
    assert block.status == "failed", result.output
    assert block.exit_code == 3, result.output
    assert block.error is not None and block.error.name == "ExitStatus"


@pytest.mark.parametrize("language", REPRESENTATIVE)
def test_timeout(tight, language):
    need_language(language, tight)
    result = tight.run(CodeBlock(language, LOOP[language]))
    block = result.blocks[0]
    assert block.status == "timeout", result.output
    assert block.timed_out
    assert block.error is not None and block.error.name == "Timeout"


@pytest.mark.parametrize("language", REPRESENTATIVE)
def test_memory_limit_on_the_sandbox(sandbox_tight, language):
    need_language(language, sandbox_tight)
    _need_cgroups()
    result = sandbox_tight.run(CodeBlock(language, HOG[language]))
    block = result.blocks[0]
    assert block.status == "failed", result.output
    assert block.error is not None and block.error.name == "MemoryLimit", block.error
    assert f"memory limit {MEMORY_MB} MB exceeded" in result.output
    assert block.peak_memory_mb is not None and block.peak_memory_mb >= MEMORY_MB * 0.9
    # the executor runs on
    assert sandbox_tight.run(CodeBlock("c", SUM["c"], stdin="1 1")).stdout == "2\n"


def _builds(workspace: Path) -> list[Path]:
    root = workspace / BUILD_DIR
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("cache-"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_source_compiles_once(tmp_path, backend):
    _need_backend(backend)
    need_language("c")
    with create_executor(backend, workspace=tmp_path / "ws", limits=Limits(timeout_s=30)) as ex:
        ws = Path(ex.workspace.path)
        assert ex.run(CodeBlock("c", SUM["c"], stdin="1 2")).stdout == "3\n"
        (folder,) = _builds(ws)
        marker, binary = os.stat(folder / ".built"), os.stat(folder / "main")
        assert ex.run(CodeBlock("c", SUM["c"], stdin="40 2")).stdout == "42\n"
        assert _builds(ws) == [folder]
        again, binary_again = os.stat(folder / ".built"), os.stat(folder / "main")
        assert (again.st_ino, again.st_mtime_ns) == (marker.st_ino, marker.st_mtime_ns)
        assert (binary_again.st_ino, binary_again.st_mtime_ns) == (binary.st_ino, binary.st_mtime_ns)
        other = SUM["c"].replace("a+b", "b+a")
        assert ex.run(CodeBlock("c", other, stdin="5 6")).stdout == "11\n"
        builds = _builds(ws)
        assert len(builds) == 2 and folder in builds
        assert all((b / ".built").exists() for b in builds)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_compile_is_not_marked_built(tmp_path, backend):
    _need_backend(backend)
    need_language("c")
    with create_executor(backend, workspace=tmp_path / "ws", limits=Limits(timeout_s=30)) as ex:
        for _ in range(2):  # compiled again, failing again: never cached as built
            assert ex.run(CodeBlock("c", COMPILE_ERROR["c"])).blocks[0].status == "compile_error"
        (folder,) = _builds(Path(ex.workspace.path))
        assert not (folder / ".built").exists()


def test_stateful_sandbox_stdin_then_eof(tmp_path):
    _need_backend("sandbox")
    with create_executor(
        "sandbox", workspace=tmp_path / "ws", limits=Limits(timeout_s=30), stateful=True
    ) as ex:
        first = ex.run(CodeBlock("python", "name = input()\nprint('hello', name)", stdin="world\nleftover\n"))
        assert first.stdout == "hello world\n", first.output
        second = ex.run(
            CodeBlock(
                "python",
                "import sys\nprint(name, repr(sys.stdin.read()))\ntry:\n    input()\nexcept EOFError:\n    print('EOF')",
            )
        )
        assert second.stdout == "world ''\nEOF\n", second.output  # the session kept, the stdin did not
        third = ex.run(CodeBlock("python", "print(input())", stdin="again\n"))
        assert third.stdout == "again\n", third.output


def _namespaces_sandbox(workspace: Path):  # type: ignore[no-untyped-def]
    _need_backend("sandbox")
    return create_executor(
        "sandbox", workspace=workspace, limits=Limits(timeout_s=30), isolation="namespaces"
    )


def test_a_block_cannot_overwrite_a_cached_binary(tmp_path):
    need_language("c")
    with _namespaces_sandbox(tmp_path / "ws") as ex:
        assert ex.run(CodeBlock("c", SUM["c"], stdin="2 3")).stdout == "5\n"
        (folder,) = _builds(Path(ex.workspace.path))
        before = (folder / "main").read_bytes()
        attack = (
            "status=0\n"
            "for f in .execbox/build/*/main; do\n"
            '  if printf \'#!/bin/sh\\necho pwned\\n\' > "$f"; then echo "wrote $f"; status=1; fi\n'
            '  if rm -f "$f" && [ ! -e "$f" ]; then echo "removed $f"; status=1; fi\n'
            "done\n"
            "if touch .execbox/build/planted 2>/dev/null; then echo planted; status=1; fi\n"
            "exit $((status ? 0 : 7))\n"
        )
        result = ex.run(CodeBlock("bash", attack))
        assert result.exit_code == 7, result.output  # every write refused
        assert (
            "wrote" not in result.stdout and "removed" not in result.stdout and "planted" not in result.stdout
        )
        assert "Read-only file system" in result.output or "Permission denied" in result.output, result.output
        assert (folder / "main").read_bytes() == before
        assert ex.run(CodeBlock("c", SUM["c"], stdin="40 2")).stdout == "42\n"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_large_stdin_arrives_whole(tmp_path, backend):
    _need_backend(backend)
    size = 5 * 1024 * 1024 + 17  # far past a pipe's buffer
    text = ("x" * 1023 + "\n") * (size // 1024) + "y" * (size % 1024)
    assert len(text) == size
    with create_executor(backend, workspace=tmp_path / "ws", limits=Limits(timeout_s=30)) as ex:
        result = ex.run(CodeBlock("bash", "wc -c", stdin=text))
        assert result.stdout.strip() == str(size), result.output
        lines = ex.run(CodeBlock("bash", "wc -l", stdin=text))
        assert lines.stdout.strip() == str(size // 1024), lines.output


def test_java_public_class_not_named_main(executor):
    need_language("java", executor)
    assert "public class Sum" in SUM["java"] and "class Main" not in SUM["java"]
    result = executor.run(CodeBlock("java", SUM["java"], stdin="19 23"))
    assert result.stdout == "42\n", result.output
    folders = [p for p in _builds(Path(executor.workspace.path)) if (p / "Sum.java").exists()]
    assert folders and all((p / "Sum.class").exists() and (p / ".built").exists() for p in folders)


def test_a_java_class_name_no_file_can_hold_is_a_compile_error(executor):
    """A hostile public class name (5,000 letters): the block's result, never an exception."""
    need_language("java", executor)
    code = "public class %s { public static void main(String[] a){} }" % ("A" * 5000)
    block = executor.run(CodeBlock("java", code)).blocks[0]
    assert block.status == "compile_error" and block.error is not None, block.output
    assert "Main.java" in block.output  # the file was named Main: javac says the class must be elsewhere

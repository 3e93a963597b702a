"""The judge against the program it judges (issue 39): the judge is the
reward of RL training, and a program that can sway its own verdict will.
Each attempt is a program that cannot solve its problem and tries to be
accepted anyway: through what an earlier case left, its checker's code
and build, what its checker's interpreter or compiler reads from the
workspace, its own build, or an interpreter it shares with its checker.
Every one must end in a verdict other than ``accepted``.

Modes: the ones whose blocks take stdin (the judge's cases need it): the
pool, one-shot jails, the Landlock tier, Docker; stateful executors are
refused (``test_a_stateful_executor_is_refused``).
"""

from __future__ import annotations

import os
import secrets

import pytest

from execbox import CodeBlock, ConfigurationError, Executor
from tests.backends.test_languages import need_language
from tests.security.conftest import DOCKER_MODES, LIMITS, not_for

NO_STDIN = {"jupyter": "a Jupyter kernel takes no stdin", "remote": "the remote mode is the pool's jail"}


def _judging(mode: str) -> None:
    for name, why in NO_STDIN.items():
        not_for(mode, name, why)
    not_for(mode, "stateful", "a stateful executor is refused (test_a_stateful_executor_is_refused)")


def _compiled(executor: Executor, language: str) -> None:
    need_language(language)
    if language not in executor.capabilities.languages:
        pytest.skip(f"{language} is not in this executor's image or PATH")


def test_a_case_does_not_see_what_the_case_before_it_left(mode, make_hostile):
    _judging(mode)
    executor = make_hostile()
    executor.workspace.write_text("data.txt", "as given\n")
    executor.give_to_blocks(["data.txt"])
    program = (
        "import os\n"
        "print('fresh' if not os.path.exists('note') else 'seen: ' + open('note').read())\n"
        "print(open('data.txt').read().strip())\n"
        "open('note', 'w').write(input())\n"
        "os.makedirs('deep/er', exist_ok=True); open('deep/er/x', 'w').write('left')\n"
        "open('data.txt', 'a').write('changed by a case\\n')\n"
    )
    cases = [{"stdin": f"case {n}", "expected_stdout": "fresh\nas given"} for n in range(3)]
    result = executor.judge(program, "python", cases, stop_on_failure=False)
    assert [c.verdict for c in result.cases] == ["accepted"] * 3, [c.stdout for c in result.cases]
    # and the workspace is the caller's again, as it was
    root = executor.workspace.path
    assert sorted(p for p in os.listdir(root) if p != ".execbox") == ["data.txt"]
    assert (root / "data.txt").read_text() == "as given\n"
    shared = executor.judge(program, "python", cases[:2], stop_on_failure=False, fresh_workspace=False)
    assert shared.cases[1].stdout.startswith("seen: case 0"), shared.cases[1].stdout  # asked for: shared


def test_a_program_cannot_read_its_checkers_answer(mode, make_hostile):
    """The checkers embed the answer; the program greps everything it can
    read for it (the Python checker's code file, a C checker's source and
    build) and prints what it found."""
    _judging(mode)
    executor = make_hostile()
    answer = f"answer-{secrets.token_hex(8)}"
    python_checker = (
        f"import json, sys\nANSWER = {answer!r}\n"
        "sys.exit(0 if json.load(sys.stdin)['output'].strip() == ANSWER else 1)\n"
    )
    cases: list[dict] = [{"stdin": "", "checker": {"code": python_checker}}] * 2
    if "c" in executor.capabilities.languages:
        c_checker = (
            "#include <stdio.h>\n#include <string.h>\n"
            f'static const char ANSWER[] = "{answer}";\n'
            "int main(void) { static char in[1 << 16]; size_t n = fread(in, 1, sizeof in - 1, stdin);\n"
            "  in[n] = 0; return strstr(in, ANSWER) ? 0 : 1; }\n"
        )
        cases += [{"stdin": "", "checker": {"code": c_checker, "language": "c"}}] * 2
    program = (
        "import os, re\n"
        "found = set()\n"
        "for top, dirs, files in os.walk('.'):\n"
        "    for name in files:\n"
        "        try:\n"
        "            data = open(os.path.join(top, name), 'rb').read(1 << 22)\n"
        "        except OSError:\n"
        "            continue\n"
        "        found.update(m.decode() for m in re.findall(rb'answer-[0-9a-f]{16}', data))\n"
        "print(' '.join(sorted(found)) or 'nothing found')\n"
    )
    result = executor.judge(program, "python", cases, stop_on_failure=False)
    assert all(c.verdict == "wrong_answer" for c in result.cases), [
        (c.verdict, c.stdout) for c in result.cases
    ]
    assert not any(answer in c.stdout for c in result.cases)


def test_a_program_cannot_replace_its_checkers_build(mode, make_hostile):
    """Case 1 overwrites every build it can reach with a program that
    accepts; case 2's C checker must still be the one it was given."""
    _judging(mode)
    executor = make_hostile()
    _compiled(executor, "c")
    checker = '#include <stdio.h>\nint main(void) { puts("the checker says no"); return 1; }\n'
    program = (
        "import glob, os, stat\n"
        "for path in glob.glob('.execbox/build/*/main') + glob.glob('/tmp/**/main', recursive=True):\n"
        "    try:\n"
        "        os.chmod(path, 0o755)\n"
        "    except OSError:\n"
        "        pass\n"
        "    try:\n"
        "        open(path, 'w').write('#!/bin/sh\\nexit 0\\n')\n"
        "        print('replaced', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, exc.strerror)\n"
    )
    cases = [{"stdin": "", "checker": {"code": checker, "language": "c"}}] * 2
    result = executor.judge(program, "python", cases, stop_on_failure=False)
    assert [c.verdict for c in result.cases] == ["wrong_answer"] * 2, [
        (c.verdict, c.stdout) for c in result.cases
    ]
    assert all("the checker says no" in c.message for c in result.cases)


def test_a_later_block_cannot_change_a_finished_build(mode, make_hostile):
    """The program's own build is read-only to every later block, on every
    backend and tier, once it is built: as root it is root's (not the
    jail's id, nor the container's user)."""
    _judging(mode)
    if os.geteuid() != 0 and mode in {"landlock", *DOCKER_MODES}:
        pytest.skip(f"not as a user: {mode} runs blocks as this user, who owns the build (README)")
    executor = make_hostile()
    _compiled(executor, "c")
    source = '#include <stdio.h>\nint main(void) { puts("built"); return 0; }\n'
    assert executor.run(CodeBlock("c", source)).stdout == "built\n"
    attack = (
        "status=0\n"
        "for f in .execbox/build/*/main; do\n"
        '  chmod u+w "$f" 2>/dev/null\n'
        '  if printf \'#!/bin/sh\\necho pwned\\n\' > "$f"; then echo "wrote $f"; status=1; fi\n'
        '  if touch "$(dirname "$f")/planted" 2>/dev/null; then echo planted; status=1; fi\n'
        "done\n"
        "exit $status\n"
    )
    result = executor.run(CodeBlock("bash", attack))
    assert result.exit_code == 0 and "wrote" not in result.stdout and "planted" not in result.stdout, (
        result.output
    )
    assert executor.run(CodeBlock("c", source)).stdout == "built\n"


def test_an_r_checker_does_not_run_the_programs_profile(mode, make_hostile):
    _judging(mode)
    executor = make_hostile()
    _compiled(executor, "r")
    checker = (
        'got <- paste(readLines(file("stdin")), collapse = "\\n")\n'
        'quit(status = if (grepl("42", got, fixed = TRUE)) 0 else 1)\n'
    )
    program = "open('.Rprofile', 'w').write('quit(status = 0)\\n')\nprint('not the answer')\n"
    cases = [{"stdin": "", "checker": {"code": checker, "language": "r"}}] * 2
    result = executor.judge(program, "python", cases, stop_on_failure=False)
    assert [c.verdict for c in result.cases] == ["wrong_answer"] * 2, [
        (c.verdict, c.message) for c in result.cases
    ]


def test_a_java_checkers_compiler_runs_no_processor_of_the_programs(mode, make_hostile):
    """Case 1 leaves an annotation processor on javac's default class path
    (the workspace) that writes an accepting Main.class where the checker's
    javac puts its output, then ends javac with status 0."""
    _judging(mode)
    # The program runs javac itself, as a block: where no memory cgroup exists RLIMIT_AS holds
    # Limits.memory_mb for it, and a JVM reserves far more address space than it uses (at 256 MB it
    # cannot start: a memory_limit verdict, no attack). 1 GiB and the language table's small code
    # cache and class space let it start there too; memory is not what this test judges.
    executor = make_hostile(LIMITS.replace(memory_mb=1024))
    _compiled(executor, "java")
    javac = "javac -J-Xmx64m -J-XX:+UseSerialGC -J-XX:ReservedCodeCacheSize=32m -J-XX:CompressedClassSpaceSize=64m"
    processor = (
        "import java.util.Set; import java.nio.file.*; import javax.annotation.processing.*;\n"
        "import javax.lang.model.element.*; import javax.tools.StandardLocation;\n"
        '@SupportedAnnotationTypes("*") public class P extends AbstractProcessor {\n'
        "  public synchronized void init(ProcessingEnvironment env) {\n"
        '    try { Files.write(Paths.get(env.getFiler().getResource(StandardLocation.CLASS_OUTPUT, "",\n'
        '      "Main.class").toUri()), Files.readAllBytes(Paths.get("acc/Main.class")));\n'
        "    } catch (Exception e) { }\n"
        "    System.exit(0); }\n"
        "  public boolean process(Set<? extends TypeElement> a, RoundEnvironment r) { return false; } }\n"
    )
    accepting = "public class Main { public static void main(String[] a) { System.exit(0); } }"
    program = (
        f"mkdir -p acc && echo '{accepting}' > acc/Main.java\n"
        f"{javac} -d acc acc/Main.java >&2 || exit 3\n"
        f"cat > P.java <<'END'\n{processor}END\n"
        f"{javac} -d . P.java >&2 || exit 3\n"
        "mkdir -p META-INF/services\n"
        "echo P > META-INF/services/javax.annotation.processing.Processor\n"
        "echo wrong\n"
    )
    checker = (
        "public class Main { public static void main(String[] a) throws Exception {\n"
        "  String in = new String(System.in.readAllBytes());\n"
        '  System.exit(in.contains("42") ? 0 : 1); } }\n'
    )
    cases = [{"stdin": "", "checker": {"code": checker, "language": "java"}}] * 2
    result = executor.judge(program, "bash", cases, stop_on_failure=False)
    assert [c.verdict for c in result.cases] == ["wrong_answer"] * 2, [
        (c.verdict, c.message) for c in result.cases
    ]


def test_a_stateful_executor_is_refused(mode, make_hostile):
    """One interpreter for the program and its checker: the program's
    json.load would be the checker's."""
    not_for(mode, {m for m in ("pool", "oneshot", "landlock", "remote", *DOCKER_MODES)}, "not stateful")
    executor = make_hostile()
    program = "import json\njson.load = lambda *a, **k: {'output': 'forged'}\nprint('wrong')\n"
    checker = "import json, sys\nsys.exit(0 if json.load(sys.stdin)['output'] == 'forged' else 1)\n"
    with pytest.raises(ConfigurationError, match="stateful=False"):
        executor.judge(program, "python", [{"stdin": "", "checker": {"code": checker}}])

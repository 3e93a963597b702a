"""The language table: aliases, file suffix, how each language runs, and its
default policy. One table, read by the extractor and every backend (the
compiled languages' rows: ``_compiled_languages``).

An interpreted language has ``command`` (the code file's path is appended);
a compiled one has ``build`` (``_build`` compiles it once per source and
toolchain, in the jail, then runs the program). ``version`` is the argv
that prints the toolchain's version (part of the compile cache's key) and
``package`` the Debian packages (space-separated) that provide it. A build
may name a ``fallback``, used where its programs are not installed
(``Language.installed``): TypeScript is built by esbuild, which strips its
types in milliseconds and checks none (as tsx and ts-node
--transpile-only), else by tsc, which checks them in seconds.

Policies:
- ``execute``: written to a file and run;
- ``save``: written to the workspace, not run (html, css, data files);
- ``refuse``: neither written nor run; the result says so.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping

from ._compiled_languages import COMPILED_LANGUAGES
from ._errors import ConfigurationError
from ._language_model import POLICIES, PYTHON, Build, Language, Policy

__all__ = [
    "LANGUAGES",
    "LANGUAGE_ETC",
    "POLICIES",
    "PYTHON",
    "Build",
    "Language",
    "Policy",
    "canonical_language",
    "find_language",
    "resolve_policies",
    "runnable_languages",
    "silence_pip",
]

# pytest on the file (its path: argv[1]), the workspace importable (python -c puts it on sys.path, as
# python -m pytest does), no cache left in it, and none but pytest's own plugins: those a Python
# environment has installed (hypothesis, schemathesis...) took 2-5 s a run to load, of a 10 s limit
_PYTEST = (
    "import os, sys\n"
    "os.environ.setdefault('PYTEST_DISABLE_PLUGIN_AUTOLOAD', '1')\n"
    "try:\n"
    "    import pytest\n"
    "except ImportError:\n"
    '    sys.exit("pytest is not installed in the executor\'s Python environment: pip install pytest")\n'
    "sys.exit(pytest.main(['-p', 'no:cacheprovider', *sys.argv[1:]]))\n"
)


LANGUAGES: tuple[Language, ...] = (
    Language(
        "python",
        ("py", "python3", "py3", "pyw"),
        ".py",
        "execute",
        (PYTHON, "-u"),
        other_suffixes=(".pyw",),
        version=(PYTHON, "--version"),
        package="python3",
    ),
    # a test file run by pytest, as SandboxFusion's pytest mode runs it (its verdict: exit status 0
    # where every test passed); the executor's Python environment must have pytest
    Language(
        "pytest",
        (),
        ".py",
        "execute",
        (PYTHON, "-c", _PYTEST),
        "pip install pytest into the executor's Python environment",
        package="python3-pytest",
    ),
    Language(
        "bash",
        (),
        ".sh",
        "execute",
        ("bash",),
        "apt-get install bash",
        other_suffixes=(".bash",),
        version=("bash", "--version"),
        package="bash",
    ),
    Language(
        "sh",
        ("shell", "console", "shellsession", "shell-session", "zsh"),
        ".sh",
        "execute",
        ("sh",),
        "apt-get install dash",
        other_suffixes=(".bash", ".zsh"),
    ),
    Language(
        "javascript",
        ("js", "node", "nodejs", "mjs"),
        ".js",
        "execute",
        ("node",),
        "apt-get install nodejs",
        other_suffixes=(".mjs", ".cjs"),
        version=("node", "--version"),
        package="nodejs",
        reserves_address_space=True,
    ),
    Language(
        "pwsh",
        ("ps1", "powershell", "ps"),
        ".ps1",
        "execute",
        ("pwsh", "-NoLogo", "-NoProfile", "-NonInteractive", "-File"),
        "install PowerShell (package powershell)",
    ),
    *COMPILED_LANGUAGES,  # C, C++, Go, Rust, Java, TypeScript, D, C#: _compiled_languages
    Language(
        "ruby",
        ("rb",),
        ".rb",
        "execute",
        ("ruby",),
        "apt-get install ruby",
        version=("ruby", "--version"),
        package="ruby",
    ),
    Language(
        "php",
        (),
        ".php",
        "execute",
        ("php",),
        "apt-get install php-cli",
        version=("php", "--version"),
        package="php-cli",
        etc=("/etc/php",),
    ),
    Language(
        "lua",
        (),
        ".lua",
        "execute",
        ("lua",),
        "apt-get install lua5.4",
        version=("lua", "-v"),
        package="lua5.4",
    ),
    Language(
        "perl",
        ("pl",),
        ".pl",
        "execute",
        ("perl",),
        "apt-get install perl",
        version=("perl", "-e", "print $^V"),
        package="perl",
    ),
    Language(
        "r",
        ("rscript",),
        ".R",
        "execute",
        ("Rscript",),
        "apt-get install r-base-core",
        version=("Rscript", "--version"),
        package="r-base-core",
        etc=("/etc/R",),
    ),
    Language("html", ("htm", "xhtml"), ".html", "save", other_suffixes=(".htm", ".xhtml")),
    Language("css", (), ".css", "save"),
    Language("markdown", ("md",), ".md", "save", other_suffixes=(".markdown",)),
    Language(
        "text", ("txt", "plaintext", "plain", "output", "log"), ".txt", "save", other_suffixes=(".log",)
    ),
    Language("json", ("jsonl",), ".json", "save", other_suffixes=(".jsonl",)),
    Language("yaml", ("yml",), ".yaml", "save", other_suffixes=(".yml",)),
    Language("toml", (), ".toml", "save"),
    Language("csv", (), ".csv", "save"),
    Language("xml", ("svg",), ".xml", "save", other_suffixes=(".svg",)),
    Language("dockerfile", ("docker",), ".Dockerfile", "save"),
)

_BY_NAME: dict[str, Language] = {}
for _lang in LANGUAGES:
    for _key in (_lang.name, *_lang.aliases):
        _BY_NAME[_key] = _lang


def canonical_language(name: str) -> str:
    """The table's name for ``name`` (``py`` → ``python``); unknown names are
    returned lower-cased."""
    key = name.strip().lower()
    lang = _BY_NAME.get(key)
    return lang.name if lang else key


def find_language(name: str) -> Language | None:
    return _BY_NAME.get(name.strip().lower())


def resolve_policies(overrides: Mapping[str, Policy | bool] | None) -> dict[str, Policy]:
    """The default policy of every language with ``overrides`` applied.

    An override may be a policy name or, as in AG2, a bool (True: execute,
    False: save).
    """
    policies: dict[str, Policy] = {lang.name: lang.policy for lang in LANGUAGES}
    for name, value in (overrides or {}).items():
        lang = find_language(name)
        if lang is None:
            known = ", ".join(sorted(policies))
            raise ConfigurationError(
                f"execution_policies names unknown language {name!r}: use one of {known}"
            )
        policy = {True: "execute", False: "save"}.get(value, value) if isinstance(value, bool) else value
        if policy not in POLICIES:
            raise ConfigurationError(
                f"execution_policies[{name!r}] = {value!r}: use 'execute', 'save' or 'refuse'"
            )
        if policy == "execute" and not lang.runnable:
            raise ConfigurationError(
                f"execution_policies[{name!r}] = 'execute', but nothing runs {lang.name}: "
                "use 'save' or 'refuse'"
            )
        policies[lang.name] = policy  # type: ignore[assignment]
    return policies


def resolve_program(program: str, path: str | None = None) -> str | None:
    """Absolute path of ``program`` on ``path`` (default: the host's PATH)."""
    return _which(program, path if path is not None else os.environ.get("PATH", ""))


def runnable_languages(path: str, *, compiled: bool = True) -> tuple[str, ...]:
    """Languages whose programs are all found on ``path`` (python always:
    the executor's environment provides it); ``compiled``: the compiled
    ones too (a backend that builds them)."""
    return tuple(
        lang.name
        for lang in LANGUAGES
        if (lang.command or (compiled and lang.build))
        and lang.installed(lambda p: p == PYTHON or resolve_program(p, path) is not None) is not None
    )


LANGUAGE_ETC: tuple[str, ...] = tuple(dict.fromkeys(p for lang in LANGUAGES for p in lang.etc))


_which_cache: dict[tuple[str, str], str | None] = {}


def _which(program: str, path: str) -> str | None:
    key = (program, path)
    if key not in _which_cache:
        _which_cache[key] = shutil.which(program, path=path)
    return _which_cache[key]


_PIP_SHELL = re.compile(r"^(\s*(?:sudo\s+)?(?:pip3?|python3?\s+-m\s+pip)\s+install)\b(?!.*\s-q)", re.M)
_PIP_MAGIC = re.compile(r"^(\s*[!%]\s*pip3?\s+install)\b(?!.*\s-q)", re.M)


def silence_pip(code: str, language: str) -> str:
    """Add ``-qqq`` to pip installs so a model sees the result, not pages of
    progress (AG2's ``silence_pip``)."""
    if language in ("sh", "bash"):
        return _PIP_SHELL.sub(r"\1 -qqq", code)
    if language == "python":
        return _PIP_MAGIC.sub(r"\1 -qqq", code)
    return code

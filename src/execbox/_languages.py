"""The language table: aliases, file suffix, how each language runs, and its
default policy. One table, read by the extractor and every backend.

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
from dataclasses import dataclass
from typing import Literal

from ._errors import ConfigurationError

__all__ = [
    "LANGUAGES",
    "Language",
    "Policy",
    "canonical_language",
    "find_language",
    "resolve_policies",
    "runnable_languages",
    "silence_pip",
]

Policy = Literal["execute", "save", "refuse"]
POLICIES: tuple[str, ...] = ("execute", "save", "refuse")

# The interpreter of the executor's Python environment stands in for this.
PYTHON = "{python}"


@dataclass(frozen=True)
class Language:
    name: str
    aliases: tuple[str, ...]
    suffix: str
    policy: Policy
    # argv prefix; the code file's path is appended. None: nothing runs it.
    command: tuple[str, ...] | None = None
    install_hint: str = ""
    # Other file suffixes of the language (``suffix`` is the one execbox writes).
    other_suffixes: tuple[str, ...] = ()

    @property
    def program(self) -> str | None:
        return self.command[0] if self.command else None

    @property
    def suffixes(self) -> tuple[str, ...]:
        """Every suffix a file of this language may have."""
        return (self.suffix, *self.other_suffixes)


LANGUAGES: tuple[Language, ...] = (
    Language(
        "python", ("py", "python3", "py3", "pyw"), ".py", "execute", (PYTHON, "-u"), other_suffixes=(".pyw",)
    ),
    Language("bash", (), ".sh", "execute", ("bash",), "apt-get install bash", other_suffixes=(".bash",)),
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
    ),
    Language(
        "pwsh",
        ("ps1", "powershell", "ps"),
        ".ps1",
        "execute",
        ("pwsh", "-NoLogo", "-NoProfile", "-NonInteractive", "-File"),
        "install PowerShell (package powershell)",
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
        if policy == "execute" and lang.command is None:
            raise ConfigurationError(
                f"execution_policies[{name!r}] = 'execute', but nothing runs {lang.name}: "
                "use 'save' or 'refuse'"
            )
        policies[lang.name] = policy  # type: ignore[assignment]
    return policies


def resolve_program(program: str, path: str | None = None) -> str | None:
    """Absolute path of ``program`` on ``path`` (default: the host's PATH)."""
    return _which(program, path if path is not None else os.environ.get("PATH", ""))


def runnable_languages(path: str) -> tuple[str, ...]:
    """Languages whose program is found on ``path`` (python always: the
    executor's environment provides it)."""
    return tuple(
        lang.name
        for lang in LANGUAGES
        if lang.command and (lang.command[0] == PYTHON or resolve_program(lang.command[0], path))
    )


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

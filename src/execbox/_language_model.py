"""The language model: what one row of the language table says
(``Language``; a compiled one's ``Build``), the policies a row may have,
and the stand-in for the executor's own Python. The table itself, and the
lookups, are ``_languages``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

__all__ = ["POLICIES", "PYTHON", "Build", "Language", "Policy"]

Policy = Literal["execute", "save", "refuse"]
POLICIES: tuple[str, ...] = ("execute", "save", "refuse")

# The interpreter of the executor's Python environment stands in for this.
PYTHON = "{python}"


@dataclass(frozen=True)
class Build:
    """How a compiled language's block becomes a program. ``compile`` and
    ``run`` are argv templates: ``{src}`` the source file, ``{dir}`` the
    build folder (both absolute, the same inside a jail), ``{main}`` the
    source's name without its suffix (Java: the public class, ``main_of``).
    ``env`` is the compiler's extra environment (``{cache}``: the
    executor's own cache folder of this language, kept between builds);
    ``files`` are (name, text) written beside the source."""

    compile: tuple[str, ...]
    run: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    main: str = "main"
    main_of: Callable[[str], str] | None = field(default=None, compare=False)
    cache: bool = False  # whether ``{cache}`` is used (a folder the compiler may write)
    # the build used where this one's programs are not all installed (TypeScript: esbuild, else
    # tsc), with its own ``version`` argv (else the language's)
    fallback: Build | None = None
    version: tuple[str, ...] = ()

    def programs(self) -> tuple[str, ...]:
        """The programs a build and a run need, by name."""
        return tuple(dict.fromkeys(a[0] for a in (self.compile, self.run) if not a[0].startswith("{")))


@dataclass(frozen=True)
class Language:
    name: str
    aliases: tuple[str, ...]
    suffix: str
    policy: Policy
    # argv prefix; the code file's path is appended. None: nothing runs it (or ``build`` does).
    command: tuple[str, ...] | None = None
    install_hint: str = ""
    # Other file suffixes of the language (``suffix`` is the one execbox writes).
    other_suffixes: tuple[str, ...] = ()
    build: Build | None = None
    version: tuple[str, ...] = ()  # argv printing the toolchain's version
    package: str = ""  # the Debian package providing it
    etc: tuple[str, ...] = ()  # /etc folders its toolchain reads (bound read-only in a jail)
    # Its runtime reserves far more address space than it uses (V8, the JVM, Go's): where an rlimit
    # stands in for a memory cgroup, RLIMIT_DATA holds Limits.memory_mb for it, not RLIMIT_AS (under
    # which it dies at start: Node.js by SIGTRAP, the JVM "Could not reserve enough space").
    reserves_address_space: bool = False
    # An option sizing the runtime for that limit (``{mb}``), inserted after the program's name.
    memory_option: str = ""

    @property
    def program(self) -> str | None:
        if self.build is not None:
            return self.build.programs()[0]
        return self.command[0] if self.command else None

    @property
    def python_script(self) -> bool:
        """Whether a block is a script the executor's Python runs as it is
        (a warm Python process may run it from its text); not a command
        that merely starts that Python (pytest's ``-m pytest``)."""
        return self.command == (PYTHON, "-u")

    @property
    def runnable(self) -> bool:
        return self.command is not None or self.build is not None

    def programs(self) -> tuple[str, ...]:
        """Every program running a block needs (a compiled language: the compiler and the runtime)."""
        if self.build is not None:
            return self.build.programs()
        return (self.command[0],) if self.command else ()

    def builds(self) -> tuple[Build, ...]:
        """Its build and the fallbacks after it, in the order they are tried."""
        found: list[Build] = []
        build = self.build
        while build is not None:
            found.append(build)
            build = build.fallback
        return tuple(found)

    def installed(self, found: Callable[[str], bool]) -> Language | None:
        """This language as it runs where ``found`` says which programs are
        installed: its first build whose programs all are (the row with that
        build and its version), itself for an interpreted one whose program
        is; None where nothing runs it."""
        if self.build is None:
            return self if self.command is not None and found(self.command[0]) else None
        for build in self.builds():
            if all(found(p) for p in build.programs()):
                if build is self.build:
                    return self
                return replace(self, build=build, version=build.version or self.version)
        return None

    @property
    def suffixes(self) -> tuple[str, ...]:
        """Every suffix a file of this language may have."""
        return (self.suffix, *self.other_suffixes)

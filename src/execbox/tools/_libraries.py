"""What a ``PythonTool`` call's ``libraries`` become: requirement strings
checked, probed where the code runs, installed by growing the executor's
environment (``Executor.with_libraries``: a cached Venv or a DockerPython),
or refused with the reason (``Executor.can_add_libraries``).

``Libraries`` holds the executor's environment switches apart from its runs
(``Gate``): many runs at once, or one switch, which waits for the runs in
flight. ``Rejected`` is a call the tool answers with an error dict.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .._errors import EnvironmentSetupError
from .._models import CodeBlock
from .._progress import OnProgress
from ..backends import Executor
from ..environments._packages import PROBE_SOURCE  # run where the code runs (see its docstring)

__all__ = [
    "PROBE_MARK",
    "PROBE_SOURCE",
    "Gate",
    "Libraries",
    "Rejected",
    "probe_code",
    "requirement_key",
    "requirements",
]

_OP = r"(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
    r"(?P<extras>\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?\s*"
    rf"(?P<spec>{_OP}(?:\s*,\s*{_OP})*)?\s*$"
)
PROBE_MARK = "__execbox_missing__="


class Rejected(Exception):
    """A call the tool answers with an error dict instead of running it."""


def requirements(items: Sequence[Any]) -> tuple[str, ...]:
    """The canonical requirement strings of ``items``, one per package
    (raises ``Rejected`` naming one that is not a plain PyPI requirement)."""
    wanted: dict[str, str] = {}
    for item in items:
        found = _REQUIREMENT.match(item) if isinstance(item, str) else None
        if found is None:
            raise Rejected(
                f"InvalidArguments: {item!r} in 'libraries' is not a PyPI requirement: use a name "
                "with optional [extras] and version such as 'numpy' or 'pandas>=2' (no URLs, "
                "paths, markers or pip options)"
            )
        requirement = re.sub(r"\s+", "", item)
        wanted.setdefault(requirement_key(requirement), requirement)
    return tuple(wanted.values())


def requirement_key(requirement: str) -> str:
    """Compare requirements the way PyPI compares names (PEP 503)."""
    found = _REQUIREMENT.match(requirement)
    assert found is not None
    name = re.sub(r"[-_.]+", "-", found["name"]).lower()
    return name + re.sub(r"\s+", "", requirement[found.end("name") :]).lower()


def probe_code(wanted: Sequence[str]) -> str:
    """The code that prints ``PROBE_MARK`` and the JSON list of the
    requirements of ``wanted`` not satisfied where it runs."""
    return (
        PROBE_SOURCE.read_text(encoding="utf-8")
        + f"\n__execbox_probe({list(wanted)!r}, {PROBE_MARK!r})\ndel __execbox_probe\n"
    )


class Libraries:
    """Make a call's ``libraries`` importable in ``executor``, switching its
    environment (then restarting it) to one with the missing ones added.

    ``install``: False never installs (missing ones are refused). Requirements
    found satisfied are remembered: the environment only grows. ``on_progress``
    gets the install's steps (``execbox._progress``).
    """

    def __init__(self, executor: Executor, *, install: bool = True, on_progress: OnProgress = None) -> None:
        self.executor = executor
        self.install = install
        self.on_progress = on_progress
        self.gate = Gate()
        self._switch_lock = threading.Lock()
        self._available: set[str] = set()  # requirement keys known to be satisfied

    def ensure(self, wanted: tuple[str, ...]) -> None:
        """Make ``wanted`` importable, or raise ``Rejected`` saying why not."""
        if all(requirement_key(r) in self._available for r in wanted):
            return
        with self._switch_lock:  # one check-and-install at a time
            pending = [r for r in wanted if requirement_key(r) not in self._available]
            if not pending:
                return
            missing = self._probe(pending)
            if missing:
                blocker = self.blocker(missing)
                if blocker is not None:
                    raise Rejected(blocker)
                try:  # runs go on meanwhile, in the environment they had
                    environment = self.executor.with_libraries(missing, on_progress=self.on_progress)
                except EnvironmentSetupError as exc:
                    raise Rejected(
                        f"LibraryInstallFailed: could not install {', '.join(missing)}: {exc}"
                    ) from None
                with self.gate.switching():  # no run in flight while the environment changes
                    self.executor.use_environment(environment)
            self._available.update(requirement_key(r) for r in pending)

    def blocker(self, missing: list[str]) -> str | None:
        """Why ``missing`` cannot be installed here (None: it can)."""
        names = ", ".join(missing) or "libraries"
        lead = (
            f"LibrariesUnavailable: {names} {'is' if len(missing) == 1 else 'are'} not installed and "
            "cannot be installed here: "
        )
        usable = "Use only installed packages, or "
        setup = (
            "create the tool with an environment it installs into: "
            "PythonTool(environment=Venv()) on the local/sandbox backends, or "
            "PythonTool(backend='docker', environment=DockerPython())."
        )
        if not self.install:
            return (
                f"{lead}installing is turned off (PythonTool(install_libraries=False)). {usable}turn it on."
            )
        reason = self.executor.can_add_libraries()
        return None if reason is None else f"{lead}{reason} {usable}{setup}"

    def _probe(self, wanted: list[str]) -> list[str]:
        """The requirements of ``wanted`` not satisfied where the code runs."""
        with self.gate.running():
            result = self.executor.run(CodeBlock("python", probe_code(wanted)))
        for line in result.stdout.splitlines():
            if line.startswith(PROBE_MARK):
                found = json.loads(line[len(PROBE_MARK) :])
                return [r for r in wanted if r in found]
        return list(wanted)  # the check itself failed: assume nothing is there


class Gate:
    """Many runs at once, or one environment switch (which waits for the
    runs in flight and holds new ones back)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._runs = 0
        self._switching = False

    def enter(self, *, wait: bool = True) -> bool:
        with self._cond:
            if self._switching and not wait:
                return False
            self._cond.wait_for(lambda: not self._switching)
            self._runs += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._runs -= 1
            self._cond.notify_all()

    @contextmanager
    def running(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.leave()

    @contextmanager
    def switching(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._switching)
            self._switching = True
            self._cond.wait_for(lambda: self._runs == 0)
        try:
            yield
        finally:
            with self._cond:
                self._switching = False
                self._cond.notify_all()

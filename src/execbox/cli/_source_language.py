"""The language of a source file given to ``execbox exec`` or ``execbox
judge`` without ``-l``: from its suffix, as the language table knows it
(``Language.suffixes``, then the aliases: ``prog.h`` is C). A suffix that
names no language execbox runs (``prog.txt``, ``notes.md``) is a usage
error naming ``-l/--language`` and the languages served, never a block run
as the wrong language."""

from __future__ import annotations

from pathlib import Path

from .._errors import ConfigurationError
from .._languages import LANGUAGES, find_language

__all__ = ["language_of_file", "served"]


def served() -> str:
    """The runnable languages and their suffixes, for a message."""
    return ", ".join(f"{lang.name} ({', '.join(lang.suffixes)})" for lang in LANGUAGES if lang.runnable)


def language_of_file(name: str | None, given: str | None, default: str | None = None) -> str:
    """``given`` (``-l``) when set; else the language of ``name``'s suffix;
    else ``default`` when ``name`` has no suffix (or is standard input:
    ``-`` or None). ``ConfigurationError`` when none fits."""
    if given:
        return given
    suffix = Path(name).suffix.lower() if name and name != "-" else ""
    if suffix:
        found = next((lang for lang in LANGUAGES if suffix in (s.lower() for s in lang.suffixes)), None)
        found = found or find_language(suffix.lstrip("."))
        if found is not None and found.runnable and found.policy == "execute":
            return found.name
        what = (
            f"its suffix {suffix} is {found.name}, which execbox does not run"
            if found
            else (f"its suffix {suffix} names no language")
        )
    elif default is not None:
        return default
    else:
        what = "it has no suffix"
    raise ConfigurationError(
        f"cannot tell the language of {name}: {what}; give it with -l/--language (served: {served()})"
    )

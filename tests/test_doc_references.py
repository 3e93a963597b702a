"""The docs name files and modules as they are: every ``something.py`` and
every private module named in backticks in README.md, docs/ and the
package's docstrings exists (files move; the prose must follow)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# names in backticks that are not ours to define (a peer's function the text compares with)
FOREIGN = {"_string_metadata_to_description_field"}  # AG2's, in tools/_as_function.py


def _texts() -> list[tuple[Path, str]]:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(SRC.rglob("*.py"))]
    return [(path, path.read_text(encoding="utf-8")) for path in paths]


def _tree() -> list[str]:
    skip = {".venv", ".cache", ".git", "__pycache__", "node_modules"}
    return [
        p.relative_to(ROOT).as_posix()
        for p in ROOT.rglob("*.py")
        if not skip & set(p.relative_to(ROOT).parts)
    ]


def test_every_python_file_named_exists():
    files = _tree()
    names = {f.rsplit("/", 1)[-1] for f in files}
    missing = set()
    for path, text in _texts():
        for match in re.finditer(r"`{1,2}([\w./-]*\w\.py)`{1,2}", text):
            ref = match.group(1)
            found = any(f == ref or f.endswith("/" + ref) for f in files) if "/" in ref else ref in names
            if not found:
                missing.add(f"{path.relative_to(ROOT)}: {ref}")
    assert not missing, "files named that do not exist:\n" + "\n".join(sorted(missing))


def test_every_private_module_named_exists_or_is_defined():
    source = "\n".join(text for path, text in _texts() if path.suffix == ".py")
    modules = {p.stem for p in SRC.rglob("*.py")} | {p.name for p in SRC.rglob("*") if p.is_dir()}
    missing = set()
    for path, text in _texts():
        for match in re.finditer(r"``(_[a-z]\w*)``|`(_[a-z]\w*)`", text):
            name = match.group(1) or match.group(2)
            if name in modules or name in FOREIGN:
                continue
            if not re.search(rf"(def|class) {name}\b|\b{name}\s*[:=]|self\.{name}\b", source):
                missing.add(f"{path.relative_to(ROOT)}: {name}")
    assert not missing, "modules or names in backticks that do not exist:\n" + "\n".join(sorted(missing))

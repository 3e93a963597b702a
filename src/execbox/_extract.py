"""Markdown fences → CodeBlock.

Follows CommonMark fenced code blocks: ``` and ~~~ fences of three or more
characters, closed by a fence of the same character at least as long (so a
longer fence encloses shorter ones), indented fences (inside lists) with the
fence's indentation removed from the content. An unclosed fence (a reply cut
off mid-block) yields nothing: half a program is not run.

The language comes from the info string through the alias table; a fence
without one gets an inferred language (``CodeBlock.language_inferred``). A
filename comes from info attributes (``title="x.py"``, ``filename=x.py``),
from ``lang:path``, or from a filename comment on the first line: ``# filename:
x.py`` (any language), or a bare name as AG2 and AutoGen read it (``# test.py``,
``// test.js``, ``/* test.css */``, ``<!-- test.html -->``), taken only when it
is one token that looks like a path with a suffix of the block's language, so
that ``# compute stuff`` or ``# step 1.`` stays a comment.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterable, Mapping
from typing import Any

from ._languages import canonical_language, find_language
from ._models import CodeBlock

__all__ = ["extract_code_blocks", "extract_from_messages", "infer_language"]

_OPEN = re.compile(r"^(?P<lead>[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)?)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_ATTR = re.compile(r"""([A-Za-z_][\w-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s}]+))""")
_FILENAME_KEYS = ("filename", "file", "title", "name", "path")
_FILENAME_COMMENTS = (
    re.compile(r"^\s*#\s*file\s*name\s*:\s*(?P<name>\S+)\s*$", re.I),
    re.compile(r"^\s*//\s*file\s*name\s*:\s*(?P<name>\S+)\s*$", re.I),
    re.compile(r"^\s*<!--\s*file\s*name\s*:\s*(?P<name>\S+?)\s*-->\s*$", re.I),
    re.compile(r"^\s*/\*\s*file\s*name\s*:\s*(?P<name>\S+?)\s*\*/\s*$", re.I),
    re.compile(r"^\s*--\s*file\s*name\s*:\s*(?P<name>\S+)\s*$", re.I),
)
# A bare name counts in a comment of the block's language only (in Markdown,
# "# notes.md" is a heading).
_BARE_FILENAME_COMMENTS = (
    (
        re.compile(r"^\s*#\s*(?P<name>\S+)\s*$"),
        {"python", "bash", "sh", "pwsh", "yaml", "toml", "dockerfile"},
    ),
    (re.compile(r"^\s*//\s*(?P<name>\S+)\s*$"), {"javascript"}),
    (re.compile(r"^\s*/\*\s*(?P<name>\S+?)\s*\*/\s*$"), {"javascript", "css"}),
    (re.compile(r"^\s*<!--\s*(?P<name>\S+?)\s*-->\s*$"), {"html", "xml", "markdown"}),
)
_PATH_LIKE = re.compile(r"^[\w-][\w.-]*(?:/[\w-][\w.-]*)*$")  # src/app.py; no spaces, no leading dot
_PROMPT = "$ "


def extract_code_blocks(text: str) -> list[CodeBlock]:
    """Every closed fenced code block in ``text``, in order."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[CodeBlock] = []
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if not opened or (opened["fence"][0] == "`" and "`" in opened["info"]):
            i += 1
            continue
        fence = opened["fence"]
        width = len(opened["lead"].expandtabs(4))
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
        if end is None:  # unclosed: CommonMark runs it to the end; we run nothing
            break
        body = [_dedent(line, width) for line in lines[i + 1 : end]]
        blocks.append(_make_block(opened["info"].strip(), "\n".join(body)))
        i = end + 1
    return blocks


def extract_from_messages(
    messages: Iterable[Any],
    *,
    sources: Iterable[str] | None = None,
    last_only: bool = False,
) -> list[CodeBlock]:
    """Code blocks from chat messages.

    A message is a mapping (``{"role", "content", "name"}``, OpenAI style, the
    content a string or a list of ``{"type": "text", "text": ...}`` parts) or
    an object with ``content`` and ``source``/``name``. With ``sources``, only
    messages from those senders count; with ``last_only``, only the last one
    that counts.
    """
    wanted = set(sources) if sources is not None else None
    chosen = [m for m in messages if wanted is None or _sender(m) in wanted]
    if last_only:
        chosen = chosen[-1:]
    blocks: list[CodeBlock] = []
    for message in chosen:
        blocks.extend(extract_code_blocks(_content_text(message)))
    return blocks


def infer_language(code: str) -> str:
    """``python`` if the code parses as a Python program, ``sh`` if it looks
    like a command line, else ``text``."""
    lines = [ln.strip() for ln in code.splitlines() if ln.strip()]
    if not lines:
        return "text"
    first = lines[0]
    if first.startswith("#!"):
        for word, lang in (("python", "python"), ("bash", "bash"), ("node", "javascript"), ("sh", "sh")):
            if word in first:
                return lang
    if first.startswith(_PROMPT):
        return "sh"
    command_line = _looks_like_command(next((ln for ln in lines if not ln.startswith("#")), ""))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "sh" if command_line else "text"
    if command_line and not _is_pythonic(tree):
        return "sh"
    return "python"


def _make_block(info: str, code: str) -> CodeBlock:
    language, filename = _parse_info(info)
    inferred = False
    if not language:
        language, inferred = infer_language(code), True
    if language == "sh" or language == "bash":
        code = _strip_prompts(code)
    filename = filename or _filename_comment(code, language)
    return CodeBlock(language, code, filename, language_inferred=inferred)


def _parse_info(info: str) -> tuple[str, str | None]:
    if not info:
        return "", None
    attrs = {m[1].lower(): m[2] or m[3] or m[4] for m in _ATTR.finditer(info)}
    head = info.lstrip("{").split()[0] if info.lstrip("{").split() else ""
    head = head.lstrip(".").rstrip("}")
    filename = next((attrs[k] for k in _FILENAME_KEYS if attrs.get(k)), None)
    if "=" in head:  # ```{file="x.py"}: attributes only
        head = ""
    if ":" in head:  # ```python:src/app.py
        head, _, path = head.partition(":")
        filename = filename or path or None
    return (canonical_language(head) if head else ""), filename


def _filename_comment(code: str, language: str | None = None) -> str | None:
    """The file the first line (after a shebang) names: ``# filename: x``,
    or with ``language``, a bare ``# x.py`` whose suffix is the language's."""
    lines = code.lstrip("\n").split("\n", 2)
    candidates = lines[:2] if lines and lines[0].startswith("#!") else lines[:1]
    lang = find_language(language) if language else None
    for line in candidates:
        for pattern in _FILENAME_COMMENTS:
            found = pattern.match(line)
            if found:
                return found["name"].strip("'\"`")
        if lang is None or line.startswith("#!"):
            continue
        for pattern, languages in _BARE_FILENAME_COMMENTS:
            found = pattern.match(line) if lang.name in languages else None
            name = found["name"].strip("'\"`") if found else ""
            suffix = name[name.rfind(".") :].lower() if "." in name else ""
            if _PATH_LIKE.match(name) and suffix in lang.suffixes and len(name) > len(suffix):
                return name
    return None


def _strip_prompts(code: str) -> str:
    """A console transcript (``$ cmd`` then its output) becomes the commands."""
    lines = code.split("\n")
    first = next((ln.lstrip() for ln in lines if ln.strip()), "")
    if not first.startswith(_PROMPT):
        return code
    kept: list[str] = []
    continued = False
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith(_PROMPT):
            kept.append(stripped[len(_PROMPT) :])
        elif continued:
            kept.append(line)
        else:
            continue
        continued = kept[-1].rstrip().endswith("\\")
    return "\n".join(kept)


def _dedent(line: str, width: int) -> str:
    removed = 0
    while removed < width and line[:1] in (" ", "\t"):
        removed += 4 if line[0] == "\t" else 1
        line = line[1:]
    return line


_COMMON_COMMANDS = frozenset(
    "apt apt-get awk brew cat cd chmod chown conda cp curl docker echo env export find "
    "gcc git grep head java javac kill ln ls make mkdir mv node npm npx pip pip3 "
    "pnpm printf ps pwd python python3 rm rmdir sed sh bash sort source sudo tail tar "
    "touch uname unzip uv wc wget which yarn zip".split()
)
_PY_KEYWORDS = frozenset(
    "and as assert async await class def del elif else except finally for from global "
    "if import in is lambda nonlocal not or pass raise return try while with yield "
    "print".split()
)
_WORD = re.compile(r"^([A-Za-z_][\w.+-]*)(?:\s|$)")


def _looks_like_command(line: str) -> bool:
    word = _WORD.match(line)
    if not word or word[1] in _PY_KEYWORDS:
        return False
    rest = line[word.end() :].lstrip()
    if rest.startswith(("=", "(", "[", ".", ":")):  # x = 1, f(), a[0]
        return False
    return word[1] in _COMMON_COMMANDS or shutil.which(word[1]) is not None


_EXPRESSION_ONLY = (
    ast.Module,
    ast.Expr,
    ast.Name,
    ast.BinOp,
    ast.UnaryOp,
    ast.Constant,
    ast.Load,
    ast.operator,
    ast.unaryop,
    ast.Attribute,
    ast.Compare,
    ast.cmpop,
)


def _is_pythonic(tree: ast.AST) -> bool:
    """Does the tree do anything a bare command line (``ls -la``) would not?"""
    return any(not isinstance(node, _EXPRESSION_ONLY) for node in ast.walk(tree))


def _sender(message: Any) -> str | None:
    if isinstance(message, Mapping):
        return message.get("name") or message.get("source") or message.get("role")
    return getattr(message, "source", None) or getattr(message, "name", None)


def _content_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, Mapping) else getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and part.get("type") == "text":
                parts.append(str(part.get("text", "")))
        return "\n".join(parts)
    return "" if content is None else str(content)

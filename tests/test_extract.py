from __future__ import annotations

import pytest

from execbox import CodeBlock, extract_code_blocks, extract_from_messages, infer_language


@pytest.mark.parametrize("code, language", [
    ("print('hi')", "python"),
    ("x = 1\nprint(x)", "python"),
    ("import os\nprint(os.getcwd())", "python"),
    ("pip install numpy", "sh"),
    ("ls -la", "sh"),
    ("echo hello", "sh"),
    ("cd /tmp && ls", "sh"),
    ("$ git status", "sh"),
    ("#!/bin/bash\necho hi", "bash"),
    ("#!/usr/bin/env python3\nprint(1)", "python"),
    ("Hello, this is just some words here.", "text"),
    ("", "text"),
])
def test_infer_language(code, language):
    assert infer_language(code) == language


def test_block_without_language_says_it_was_inferred():
    [block] = extract_code_blocks("Run:\n```\nprint(1)\n```\n")
    assert block == CodeBlock("python", "print(1)", None, language_inferred=True)


@pytest.mark.parametrize("first_line, name", [
    ("# filename: a.py", "a.py"),
    ("// filename: src/app.js", "src/app.js"),
    ("<!-- filename: index.html -->", "index.html"),
    ("/* filename: style.css */", "style.css"),
    ("#FILENAME: Upper.py", "Upper.py"),
])
def test_filename_comments(first_line, name):
    [block] = extract_code_blocks(f"```x\n{first_line}\nbody\n```")
    assert block.filename == name
    assert block.code.startswith(first_line)


def test_filename_after_shebang():
    [block] = extract_code_blocks("```bash\n#!/bin/bash\n# filename: run.sh\necho\n```")
    assert block.filename == "run.sh"


def test_aliases_resolve():
    text = "".join(f"```{alias}\nx\n```\n" for alias in ("py", "python3", "sh", "bash", "shell", "console",
                                                        "js", "node", "ps1", "pwsh", "powershell"))
    assert [b.language for b in extract_code_blocks(text)] == [
        "python", "python", "sh", "bash", "sh", "sh", "javascript", "javascript", "pwsh", "pwsh", "pwsh"]


def test_bash_transcript_prompts_are_stripped():
    [block] = extract_code_blocks("```bash\n$ echo hi\nhi\n$ ls \\\n  -la\n```")
    assert block.code == "echo hi\nls \\\n  -la"


def test_unclosed_fence_yields_nothing_after_it():
    blocks = extract_code_blocks("```python\nprint(1)\n```\ntext\n```python\nprint(2)\n")
    assert [b.code for b in blocks] == ["print(1)"]


def test_messages_filtered_by_sender():
    messages = [
        {"role": "user", "content": "```python\nprint('user')\n```"},
        {"role": "assistant", "name": "coder", "content": "```python\nprint('coder')\n```"},
        {"role": "assistant", "name": "critic", "content": [{"type": "text", "text": "```sh\necho critic\n```"}]},
    ]
    assert [b.code for b in extract_from_messages(messages, sources=["coder"])] == ["print('coder')"]
    assert len(extract_from_messages(messages)) == 3
    assert [b.code for b in extract_from_messages(messages, last_only=True)] == ["echo critic"]


def test_message_objects_with_source():
    class Msg:
        def __init__(self, source, content):
            self.source, self.content = source, content

    found = extract_from_messages([Msg("a", "```py\n1\n```"), Msg("b", "```py\n2\n```")], sources=["b"])
    assert [b.code for b in found] == ["2"]

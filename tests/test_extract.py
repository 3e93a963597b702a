from __future__ import annotations

import pytest

from execbox import CodeBlock, extract_code_blocks, extract_from_messages, infer_language


@pytest.mark.parametrize(
    "code, language",
    [
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
    ],
)
def test_infer_language(code, language):
    assert infer_language(code) == language


def test_block_without_language_says_it_was_inferred():
    [block] = extract_code_blocks("Run:\n```\nprint(1)\n```\n")
    assert block == CodeBlock("python", "print(1)", None, language_inferred=True)


@pytest.mark.parametrize(
    "first_line, name",
    [
        ("# filename: a.py", "a.py"),
        ("// filename: src/app.js", "src/app.js"),
        ("<!-- filename: index.html -->", "index.html"),
        ("/* filename: style.css */", "style.css"),
        ("#FILENAME: Upper.py", "Upper.py"),
    ],
)
def test_filename_comments(first_line, name):
    [block] = extract_code_blocks(f"```x\n{first_line}\nbody\n```")
    assert block.filename == name
    assert block.code.startswith(first_line)


@pytest.mark.parametrize(
    "fence, first_line, name",
    [
        ("python", "# test.py", "test.py"),
        ("python", "#   src/app.py  ", "src/app.py"),
        ("", "# script.py", "script.py"),  # the language inferred: python
        ("bash", "# run.sh", "run.sh"),
        ("javascript", "// test.js", "test.js"),
        ("js", "/* app.mjs */", "app.mjs"),
        ("css", "/* test.css */", "test.css"),
        ("html", "<!-- test.html -->", "test.html"),
        ("yaml", "# config.yml", "config.yml"),
    ],
)
def test_bare_filename_comments_as_ag2_reads_them(fence, first_line, name):
    [block] = extract_code_blocks(f"```{fence}\n{first_line}\nx = 1\n```")
    assert block.filename == name
    assert block.code.startswith(first_line)


@pytest.mark.parametrize(
    "fence, first_line",
    [
        ("python", "# compute stuff"),
        ("python", "# step 1."),
        ("python", "# test.js"),  # not a Python file's name
        ("python", "# see utils.py for more"),
        ("python", "# .py"),
        ("python", "# ../up.py"),
        ("python", "# v1.2"),
        ("bash", "# install deps"),
        ("javascript", "// helpers.py"),
        ("javascript", "# test.js"),  # not a JavaScript comment
        ("markdown", "# notes.md"),  # a heading
        ("css", "/* main colours */"),
        ("text", "# notes.txt"),
    ],
)
def test_ordinary_first_line_comments_name_no_file(fence, first_line):
    [block] = extract_code_blocks(f"```{fence}\n{first_line}\nx = 1\n```")
    assert block.filename is None


def test_filename_after_shebang():
    [block] = extract_code_blocks("```bash\n#!/bin/bash\n# filename: run.sh\necho\n```")
    assert block.filename == "run.sh"


def test_aliases_resolve():
    text = "".join(
        f"```{alias}\nx\n```\n"
        for alias in (
            "py",
            "python3",
            "sh",
            "bash",
            "shell",
            "console",
            "js",
            "node",
            "ps1",
            "pwsh",
            "powershell",
        )
    )
    assert [b.language for b in extract_code_blocks(text)] == [
        "python",
        "python",
        "sh",
        "bash",
        "sh",
        "sh",
        "javascript",
        "javascript",
        "pwsh",
        "pwsh",
        "pwsh",
    ]


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
        {
            "role": "assistant",
            "name": "critic",
            "content": [{"type": "text", "text": "```sh\necho critic\n```"}],
        },
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


def test_adapters_read_bare_filename_comments_too():
    from execbox.integrations._common import as_execbox_block

    assert as_execbox_block("# app.py\nprint(1)", "python").filename == "app.py"
    assert as_execbox_block("# app.py\nprint(1)", "").filename == "app.py"  # inferred python
    assert as_execbox_block("# compute it\nprint(1)", "python").filename is None

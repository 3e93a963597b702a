"""The extractor against a corpus of real-world-style model replies.

Each ``NN_name.md`` has ``NN_name.expected.json``: the blocks a careful reader
extracts (language, filename, code, and language_inferred where the fence
named no language)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execbox import extract_code_blocks

CORPUS = Path(__file__).parent / "fixtures" / "replies"
REPLIES = sorted(CORPUS.glob("*.md"))


def test_corpus_is_big_enough():
    assert len(REPLIES) >= 30


@pytest.mark.parametrize("reply", REPLIES, ids=lambda p: p.stem)
def test_reply(reply: Path):
    expected = json.loads(reply.with_suffix(".expected.json").read_text(encoding="utf-8"))
    got = extract_code_blocks(reply.read_bytes().decode("utf-8"))
    as_dicts = []
    for block in got:
        item = {"language": block.language, "filename": block.filename, "code": block.code}
        if block.language_inferred:
            item["language_inferred"] = True
        as_dicts.append(item)
    assert as_dicts == expected

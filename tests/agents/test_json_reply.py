"""``parse_json_reply``: the JSON object in a model's plain-text reply
(execbox issue 39: the search from each ``{`` in turn was quadratic, and a
100 KB reply of ``{`` cost minutes of host CPU; a deep one raised
RecursionError). The search is one pass now; what it finds is unchanged.
"""

from __future__ import annotations

import pytest

from execbox._errors import ModelError
from execbox.agents._json import _objects, parse_json_reply

HUNDRED_KB = 100 * 1024


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "reply",
    [
        "{" * HUNDRED_KB,
        "[" * HUNDRED_KB,
        '{"' * (HUNDRED_KB // 2),
        '"{' * (HUNDRED_KB // 2),
        '{"a":' * (HUNDRED_KB // 5),
        "{" + '"a":{' * (HUNDRED_KB // 5) + "}" * (HUNDRED_KB // 5),
    ],
    ids=["braces", "brackets", "brace-quote", "quote-brace", "open-objects", "deep-objects"],
)
def test_a_hostile_reply_is_no_answer_and_quick(reply):
    with pytest.raises(ModelError, match="the model's reply holds no JSON object with answer"):
        parse_json_reply(reply, ["answer"])


@pytest.mark.timeout(20)
def test_an_answer_after_a_hundred_kb_of_braces_is_found():
    assert parse_json_reply("{" * HUNDRED_KB + ' then {"answer": 42}', ["answer"]) == {"answer": 42}


@pytest.mark.parametrize(
    "reply, required, expected",
    [
        ('{"answer": 1}', ["answer"], {"answer": 1}),
        ('Sure:\n```json\n{"answer": 2}\n```\nDone.', ["answer"], {"answer": 2}),
        ('He said "use {" then {"answer": 3} and "}" too', ["answer"], {"answer": 3}),
        ('The "quoted {"answer": 4}" object', ["answer"], {"answer": 4}),
        ('{"outer": {"answer": 5}}', ["answer"], {"answer": 5}),
        ('{"text": "a } and a \\" {", "answer": 6}', ["answer"], {"text": 'a } and a " {', "answer": 6}),
        ('{not json} {"answer": 7} {"answer": 8}', ["answer"], {"answer": 7}),
        ('{"first": 1} {"answer": 9}', [], {"first": 1}),
    ],
)
def test_the_object_found_is_the_first_that_fits(reply, required, expected):
    assert parse_json_reply(reply, required) == expected


def test_every_brace_is_matched_as_read_from_it():
    text = 'x "{" {"a": "}"} {{}'
    spans = [text[start : end + 1] for start, end, _ in _objects(text)]
    # read from the { inside the prose's quotes, ' {' and ': ' are strings, so its } is the first;
    # the first { of '{{' never closes
    assert spans == ['{" {"a": "}', '{"a": "}"}', "{}"]

from __future__ import annotations

import json

import pytest

from execbox import CodeBlock, ConfigurationError, ExecutionResult, Limits, LocalExecutor


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"memory_mb": 0}, "memory_mb"),
        ({"max_processes": 1.5}, "max_processes"),
        ({"max_output_bytes": 10}, "max_output_bytes"),
        ({"network": "yes"}, "network"),
    ],
)
def test_bad_limits_name_the_field(kwargs, field):
    with pytest.raises(ConfigurationError, match=f"Limits.{field}"):
        Limits(**kwargs)


def test_limits_repr_and_replace():
    limits = Limits(timeout_s=5).replace(memory_mb=256)
    assert limits.timeout_s == 5 and limits.memory_mb == 256
    assert "memory_mb=256" in repr(limits)


def test_codeblock_checks_types():
    with pytest.raises(ConfigurationError, match="code must be a str"):
        CodeBlock("python", None)  # type: ignore[arg-type]


def test_to_text_ag2_style_and_json():
    with LocalExecutor() as ex:
        ok = ex.run(CodeBlock("python", "open('f.txt','w').write('x'); print(42)"))
        bad = ex.run(CodeBlock("python", "raise SystemExit(3)"))
    assert (
        ok.to_text() == "exitcode: 0 (execution succeeded)\nCode output: 42\nFiles created or changed: f.txt"
    )
    assert bad.to_text().startswith("exitcode: 3 (execution failed)\nCode output: ")
    assert ok.to_text("plain").startswith("42\n")
    data = json.loads(ok.to_json())
    assert data["exit_code"] == 0 and data["files"] == ["f.txt"]
    assert data["blocks"][0]["language"] == "python"
    with pytest.raises(ConfigurationError, match="style"):
        ok.to_text("html")  # type: ignore[arg-type]


def test_result_ok_property():
    assert ExecutionResult(exit_code=0, output="").ok
    assert not ExecutionResult(exit_code=1, output="").ok


def test_python_errors_are_parsed_from_stderr():
    from execbox.backends._failures import python_error

    custom = (
        'Traceback (most recent call last):\n  File "x.py", line 3, in <module>\n    raise Oops("bad")\n'
        "__main__.Oops: bad\n"
    )
    assert python_error(custom).name == "__main__.Oops" and python_error(custom).value == "bad"
    chained = (
        "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'k'\n\nDuring handling "
        "of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n"
        '  File "a.py", line 4\nValueError: v\n'
    )
    assert python_error(chained).name == "ValueError"
    syntax = '  File "x.py", line 1\n    def (\n        ^\nSyntaxError: invalid syntax\n'
    err = python_error(syntax)
    assert (err.name, err.value) == ("SyntaxError", "invalid syntax")
    assert err.traceback.startswith('  File "x.py"')
    assert python_error("just output\n") is None

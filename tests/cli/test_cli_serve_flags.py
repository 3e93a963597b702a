"""``execbox serve``'s flags are derived from ``ServerConfig``'s fields
(``server/_flags.py``): no flag has a default of its own, and each lands
in its field."""

from __future__ import annotations

import dataclasses

import pytest

from execbox.cli import build_parser
from execbox.cli._serve import config_of
from execbox.server._config import ServerConfig


def _config(*argv: str) -> ServerConfig:
    made = config_of(build_parser().parse_args(["serve", *argv]))
    assert isinstance(made, ServerConfig)
    return made


def test_no_flag_gives_the_configs_own_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXECBOX_TOKEN", raising=False)
    plain, made = ServerConfig(), _config()
    differ = [
        f.name
        for f in dataclasses.fields(ServerConfig)
        if f.name != "token" and getattr(plain, f.name) != getattr(made, f.name)
    ]
    assert not differ, f"execbox serve's defaults differ from ServerConfig's: {differ}"
    assert made.token_generated


def test_each_flag_lands_in_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXECBOX_TOKEN", "from-env")
    made = _config(
        "--sse-keepalive", "3", "--keep-alive", "9", "--max-upload-mb", "2", "--timeout", "7",
        "--allow-host", "a.example", "--allow-host", "b.example", "--backends", "local, sandbox",
        "--workers", "2", "--max-queue", "0",
    )  # fmt: skip
    assert (made.keepalive_s, made.keep_alive_s) == (3.0, 9.0)
    assert made.max_upload_bytes == 2 << 20 and made.default_limits.timeout_s == 7.0
    assert made.allow_hosts == ("a.example", "b.example")
    assert "local" in made.backends and "sandbox" in made.backends
    assert (made.workers, made.max_queued, made.token) == (2, 0, "from-env")


def test_every_field_a_user_sets_has_a_flag() -> None:
    unflagged = {f.name for f in dataclasses.fields(ServerConfig) if "flag" not in f.metadata}
    # set by the config itself, or only from Python (ServerConfig(...)), on purpose
    assert unflagged == {"token_generated", "max_memory_mb", "max_output_bytes", "reap_interval_s"}

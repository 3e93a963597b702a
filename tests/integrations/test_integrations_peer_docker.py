"""The AutoGen adapter as a drop-in for autogen-ext's docker command-line
executor, on execbox's docker backend: its option names (``work_dir=None``,
``delete_tmp_files=``), its ``bind_dir`` and ``timeout`` kept through
``dump_component()``/``load_component()``, and its cancellation wording."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.conftest import require, require_docker

try:
    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock

    from execbox.integrations.autogen import CANCELLED_EXIT_CODE, AutoGenCodeExecutor
except ImportError as exc:
    MISSING: str | None = f"{exc}: pip install 'execbox[autogen]'"
else:
    MISSING = None


@pytest.fixture(autouse=True)
def _needs_autogen_and_docker() -> None:
    require("autogen-core", MISSING is None, MISSING or "")
    require_docker()


def test_docker_option_names_cleanup_and_a_saved_config(tmp_path):
    async def main() -> None:
        runner = AutoGenCodeExecutor(backend="docker", work_dir=None, timeout=30, delete_tmp_files=True)
        await runner.start()
        folder = runner.work_dir
        assert folder.is_dir() and runner.bind_dir == folder
        result = await runner.execute_code_blocks(
            [CodeBlock(code="print('in the container')", language="python")], CancellationToken()
        )
        assert (result.exit_code, result.output) == (0, "in the container\n")
        assert result.code_file is not None and not Path(result.code_file).exists()
        await runner.stop()
        assert not folder.exists()

        kept = AutoGenCodeExecutor(backend="docker", work_dir=tmp_path / "wd", timeout=30)
        loaded = AutoGenCodeExecutor.load_component(kept.dump_component())
        assert (loaded.bind_dir, loaded.timeout) == ((tmp_path / "wd").resolve(), 30)
        token = CancellationToken()
        running = asyncio.ensure_future(
            loaded.execute_code_blocks([CodeBlock(code="sleep 30", language="sh")], token)
        )
        await asyncio.sleep(2)
        token.cancel()
        cancelled = await asyncio.wait_for(running, 20)
        assert cancelled.exit_code == CANCELLED_EXIT_CODE
        assert "Code execution was cancelled" in cancelled.output
        await loaded.stop()
        await kept.stop()

    asyncio.run(main())

"""``executor.files``: what the host writes after start is the blocks' own."""

from __future__ import annotations

import pytest

from execbox import CodeBlock, Limits, LocalExecutor, SandboxExecutor, WorkspaceError
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require


def _sandbox(tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    return SandboxExecutor(workspace=tmp_path, limits=Limits(timeout_s=20))


@pytest.mark.parametrize("make", [_sandbox, lambda p: LocalExecutor(workspace=p)], ids=["sandbox", "local"])
def test_files_written_after_start_are_the_blocks_to_rewrite_and_remove(tmp_path, make):
    with make(tmp_path / "ws") as executor:
        executor.start()  # as root, the sandbox's blocks run as a leased id from here on
        executor.files.write("data/in.txt", "from the host\n")
        executor.files.write_many({"data/b.bin": b"\x00\x01", "c.txt": "c"})
        code = (
            "import os\n"
            "print(open('data/in.txt').read(), end='')\n"
            "open('data/in.txt', 'w').write('rewritten by the block')\n"
            "os.remove('data/b.bin')\n"
            "print('ok')"
        )
        result = executor.run(CodeBlock("python", code))
        assert result.exit_code == 0, result.output
        assert result.output == "from the host\nok\n"
        assert executor.files.read("data/in.txt") == b"rewritten by the block"
        assert [f.path for f in executor.files.list() if not f.is_dir] == ["c.txt", "data/in.txt"]
        executor.files.delete("c.txt")
        with pytest.raises(WorkspaceError, match=r"no file 'c\.txt'"):
            executor.files.delete("c.txt")
        with pytest.raises(WorkspaceError):
            executor.files.write("../outside.txt", "x")
        assert not (tmp_path / "outside.txt").exists()

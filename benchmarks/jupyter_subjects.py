"""Benchmark worker for the stateful executors: execbox's kernels (jailed,
local, through a local Kernel Gateway) and its sandbox session without
ipykernel (``SandboxExecutor(stateful=True)``) beside AG2's two Jupyter
executors and AutoGen's, each measured in its own process by run.py.

Figures: the round trip of a stateful ``x = 1`` (checked after: ``print(x)``
must give 1), kernel start (a new executor until it can run), and the first
call of a new executor (construction to first result; execbox's warm pool
hands over a started kernel). Prints one JSON line.

Usage: python jupyter_subjects.py SUBJECT ITERATIONS
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

Make = Callable[[], tuple[Callable[[str], str], Callable[[], None]]]  # -> (run(code) -> output, close)
STARTS = 5


def execbox_jupyter(kernel: str) -> Make:
    def make() -> tuple[Callable[[str], str], Callable[[], None]]:
        import execbox

        ex = execbox.JupyterExecutor(kernel=kernel, warm_kernels=0, workspace=tempfile.mkdtemp())
        ex.start()
        return (lambda code: ex.run(execbox.CodeBlock("python", code)).output), ex.close

    return make


def execbox_sandbox_stateful() -> tuple[Callable[[str], str], Callable[[], None]]:
    import execbox

    ex = execbox.SandboxExecutor(stateful=True, workspace=tempfile.mkdtemp())
    ex.start()
    return (lambda code: ex.run(execbox.CodeBlock("python", code)).output), ex.close


_server: list = []


def execbox_gateway() -> tuple[Callable[[str], str], Callable[[], None]]:
    import execbox

    if not _server:
        _server.append(execbox.LocalJupyterServer().start())
    ex = execbox.JupyterExecutor(kernel=_server[0], warm_kernels=0, workspace=tempfile.mkdtemp())
    ex.start()
    return (lambda code: ex.run(execbox.CodeBlock("python", code)).output), ex.close


def ag2_gateway() -> tuple[Callable[[str], str], Callable[[], None]]:
    from autogen.coding import CodeBlock
    from autogen.coding.jupyter import JupyterCodeExecutor, LocalJupyterServer

    if not _server:
        _server.append(LocalJupyterServer(log_file=tempfile.mktemp()))
    ex = JupyterCodeExecutor(_server[0], output_dir=tempfile.mkdtemp())
    return (lambda code: ex.execute_code_blocks([CodeBlock(code=code, language="python")]).output), ex.stop


def ag2_embedded() -> tuple[Callable[[str], str], Callable[[], None]]:
    from autogen.coding import CodeBlock
    from autogen.coding.jupyter import EmbeddedIPythonCodeExecutor

    ex = EmbeddedIPythonCodeExecutor(output_dir=tempfile.mkdtemp())
    return (
        lambda code: ex.execute_code_blocks([CodeBlock(code=code, language="python")]).output
    ), lambda: None


def autogen_jupyter() -> tuple[Callable[[str], str], Callable[[], None]]:
    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock
    from autogen_ext.code_executors.jupyter import JupyterCodeExecutor

    loop = asyncio.new_event_loop()
    ex = JupyterCodeExecutor(output_dir=tempfile.mkdtemp())
    loop.run_until_complete(ex.start())

    def run(code: str) -> str:
        blocks = [CodeBlock(code=code, language="python")]
        return loop.run_until_complete(ex.execute_code_blocks(blocks, CancellationToken())).output

    return run, lambda: loop.run_until_complete(ex.stop())


SUBJECTS: dict[str, Make] = {
    "execbox jupyter (jailed kernel)": execbox_jupyter("sandbox"),
    "execbox jupyter (local kernel)": execbox_jupyter("local"),
    "execbox jupyter (local gateway)": execbox_gateway,
    "execbox sandbox stateful": execbox_sandbox_stateful,
    "AG2 JupyterCodeExecutor (gateway)": ag2_gateway,
    "AG2 EmbeddedIPythonCodeExecutor": ag2_embedded,
    "AutoGen JupyterCodeExecutor": autogen_jupyter,
}


def ms(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
    }


def first_call(subject: str) -> list[float]:
    """execbox only: construction to first result with the warm pool on."""
    import execbox

    kernel = {"execbox jupyter (jailed kernel)": "sandbox", "execbox jupyter (local kernel)": "local"}[
        subject
    ]
    samples = []
    for i in range(STARTS + 1):
        started = time.perf_counter()
        ex = execbox.JupyterExecutor(kernel=kernel, warm_kernels=1)
        ok = ex.run(execbox.CodeBlock("python", "x = 1\nprint(x)")).output == "1\n"
        elapsed = (time.perf_counter() - started) * 1000
        ex.close()
        if i and ok:  # the first one fills the pool behind it
            samples.append(elapsed)
        time.sleep(1.5)  # the pool's replacement is ready by the next agent's turn
    return samples


def main() -> None:
    subject, iterations = sys.argv[1], int(sys.argv[2])
    make = SUBJECTS[subject]
    report: dict = {"subject": subject}
    try:
        starts, runner = [], None
        for _ in range(STARTS):
            began = time.perf_counter()
            run, close = make()
            out = run("x = 1\nprint(x)")
            starts.append((time.perf_counter() - began) * 1000)
            if runner is None and out.strip() == "1":
                runner = (run, close)
            else:
                close()
        report["start"] = ms(starts)
        if runner is None:
            raise RuntimeError(f"print(x) after x = 1 gave {out!r}")
        run, close = runner
        samples = []
        for i in range(iterations + 5):
            began = time.perf_counter()
            run("x = 1")
            if i >= 5:
                samples.append((time.perf_counter() - began) * 1000)
        report["x1"] = ms(samples)
        report["x1"]["correct"] = run("print(x)").strip() == "1"
        close()
        if subject.startswith("execbox jupyter") and "gateway" not in subject:
            report["first_call"] = ms(first_call(subject))
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        report["error"] = (
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
        )
    finally:
        for server in _server:
            stop = getattr(server, "stop", None)
            if stop:
                stop()
    print(json.dumps(report))


if __name__ == "__main__":
    main()

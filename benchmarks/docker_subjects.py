"""Benchmark worker for the container executors: execbox's docker backend
(runc and gVisor's runsc; its agent in the container runs the blocks) beside
AG2's DockerCommandLineCodeExecutor and the raw Docker SDK's ``exec_run``
(the floor of a ``docker exec`` per block), all on the same local image. One subject per process,
run by docker_table.py; prints one JSON line.

Figures (ms), every output checked (``print(1)`` must give ``1``):
- exec: ``print(1)`` per call on a started executor (a few warm-up calls
  first); median and p95.
- start: a new executor until it is ready to run a block (execbox:
  construction + ``start()``; AG2: its constructor, which creates, starts
  and waits for the container; floor: ``containers.run(detach=True)``).
- first block: the first ``print(1)`` on that new container; "new → first
  result" is start plus first block.
- close: ``close()`` / ``stop()`` (floor: ``remove(force=True)``).

One untimed warm-up start comes first (SDK client, execbox's orphan sweep
and per-image program probe).

Usage: python docker_subjects.py SUBJECT EXECS STARTS
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

IMAGE = "execbox/base:latest"
WARMUP_EXECS = 3
_dirs: list[str] = []


def _tmpdir() -> str:
    path = tempfile.mkdtemp(prefix="execbox-bench-")
    _dirs.append(path)
    return path


class Box:
    """One started executor: ``run(code) -> (exit code, output)``,
    ``close()`` (timed), and ``discard()``: a quick untimed clean-up for a
    subject whose close is too slow to repeat (AG2's ``stop()``)."""

    def run(self, code: str) -> tuple[int, str]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    discard: Callable[[], None] | None = None


def floor(runtime: str | None) -> Callable[[], Box]:
    """The Docker SDK with nothing on top: one ``exec_run`` per block on a
    ``sleep infinity`` container, no network, the runtime's defaults."""

    def make() -> Box:
        import docker

        client = docker.from_env()
        extra = {"runtime": runtime} if runtime else {}
        # stdin attached (the container's and each exec's): runsc gives the
        # stdio it is handed to its sandbox user, and the engine's default
        # stdin is the host's /dev/null (seen: the host's /dev/null owned by
        # nobody after this subject ran on runsc)
        container = client.containers.run(
            IMAGE, ["sleep", "infinity"], detach=True, network_mode="none", stdin_open=True, **extra
        )

        class Floor(Box):
            def run(self, code: str) -> tuple[int, str]:
                done = container.exec_run(["python3", "-c", code], stdin=True)
                return done.exit_code, done.output.decode("utf-8", "replace")

            def close(self) -> None:
                container.remove(force=True)

        return Floor()

    return make


def execbox_docker(runtime: str | None) -> Callable[[], Box]:
    """execbox's DockerExecutor at its defaults (hardened container, no
    network, blocks sent to its agent in the container) on the given
    runtime."""

    def make() -> Box:
        import execbox

        ex = execbox.DockerExecutor(
            image=IMAGE, runtime=runtime, workspace=_tmpdir(), limits=execbox.Limits(timeout_s=60)
        )
        ex.start()

        class Execbox(Box):
            def run(self, code: str) -> tuple[int, str]:
                result = ex.run(execbox.CodeBlock("python", code))
                return result.exit_code, result.output

            def close(self) -> None:
                ex.close()

        return Execbox()

    return make


def ag2(link_python: bool) -> Callable[[], Box]:
    """AG2's DockerCommandLineCodeExecutor given the local image (present,
    so it does not pull). AG2 runs Python blocks as ``timeout 60 python
    FILE`` and accepts only the language "python" for them; the image has
    ``python3`` and no ``python``. With ``link_python``, a host folder holding
    ``python -> /usr/bin/python3`` is bind-mounted read-only at
    /usr/local/bin (``container_create_kwargs={"mounts": ...}``), the one
    change that lets AG2 run Python in this image; nothing else differs."""

    def make() -> Box:
        from autogen.coding import CodeBlock, DockerCommandLineCodeExecutor

        kwargs = {}
        if link_python:
            from docker.types import Mount

            links = _tmpdir()
            os.symlink("/usr/bin/python3", os.path.join(links, "python"))
            kwargs["container_create_kwargs"] = {
                "mounts": [Mount(target="/usr/local/bin", source=links, type="bind", read_only=True)]
            }
        ex = DockerCommandLineCodeExecutor(image=IMAGE, work_dir=_tmpdir(), timeout=60, **kwargs)

        class AG2(Box):
            def run(self, code: str) -> tuple[int, str]:
                result = ex.execute_code_blocks([CodeBlock(language="python", code=code)])
                return result.exit_code, result.output

            def close(self) -> None:
                ex.stop()

            def discard(self) -> None:
                ex._container.kill()  # then stop() finds it gone (auto_remove) or stopped: quick
                ex.stop()

        return AG2()

    return make


SUBJECTS: dict[str, Callable[[], Box]] = {
    "docker SDK floor (runc)": floor(None),
    "docker SDK floor (runsc)": floor("runsc"),
    "execbox docker (runc)": execbox_docker(None),
    "execbox docker (runsc)": execbox_docker("runsc"),
    "AG2 DockerCommandLineCodeExecutor": ag2(link_python=False),
    "AG2 DockerCommandLineCodeExecutor + python link": ag2(link_python=True),
}
# Subjects whose close is timed once only (the rest are discarded).
CLOSE_ONCE = {"AG2 DockerCommandLineCodeExecutor + python link"}
# Subjects whose close is never timed.
CLOSE_NEVER = {"AG2 DockerCommandLineCodeExecutor"}


def ms(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
        "n": len(ordered),
    }


def describe(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1][:300]}" if lines else type(exc).__name__


class Checked:
    """Calls and their checks: wrong ones counted, the first kept as the reason."""

    def __init__(self) -> None:
        self.n = self.wrong = 0
        self.first_wrong = ""

    def call(self, box: Box) -> float:
        started = time.perf_counter()
        exit_code, output = box.run("print(1)")
        elapsed = (time.perf_counter() - started) * 1000
        self.n += 1
        if exit_code != 0 or output.strip() != "1":
            self.wrong += 1
            if not self.first_wrong:
                self.first_wrong = f"exit {exit_code}: {output.strip()[:300]}"
        return elapsed

    def into(self, entry: dict) -> dict:
        entry.update(n=self.n, wrong=self.wrong)
        if self.wrong:
            entry["first_wrong"] = self.first_wrong
        return entry


def measure(subject: str, execs: int, starts: int, report: dict) -> None:
    make = SUBJECTS[subject]
    box = make()  # warm-up, untimed
    box.run("print(1)")
    (box.discard or box.close)()
    start, first, new_to_first, close = [], [], [], []
    firsts = Checked()
    for i in range(starts):
        began = time.perf_counter()
        box = make()
        ready = time.perf_counter()
        first.append(firsts.call(box))
        start.append((ready - began) * 1000)
        new_to_first.append((time.perf_counter() - began) * 1000)
        if box.discard and (subject in CLOSE_NEVER or (subject in CLOSE_ONCE and i > 0)):
            box.discard()
        else:
            began = time.perf_counter()
            box.close()
            close.append((time.perf_counter() - began) * 1000)
    report["start"] = ms(start)
    report["first"] = firsts.into(ms(first))
    report["new_to_first"] = {**ms(new_to_first), "n": firsts.n, "wrong": firsts.wrong}
    if close:
        report["close"] = ms(close)
    box = make()
    try:
        for _ in range(WARMUP_EXECS):
            box.run("print(1)")
        calls = Checked()
        report["exec"] = calls.into(ms([calls.call(box) for _ in range(execs)]))
    finally:
        (box.discard or box.close)()


def main() -> None:
    subject, execs, starts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    report: dict = {"subject": subject}
    began = time.perf_counter()
    try:
        measure(subject, execs, starts, report)
    except Exception as exc:  # noqa: BLE001 - the row says why
        report["error"] = describe(exc)
    finally:
        for path in _dirs:
            shutil.rmtree(path, ignore_errors=True)
    report["elapsed_s"] = time.perf_counter() - began
    print(json.dumps(report))


if __name__ == "__main__":
    main()

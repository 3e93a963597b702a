"""The latency plot README shows: one horizontal bar per subject, the
median of its smallest call (``print(1)`` for the one-shot blocks and the
Docker executors, a stateful ``x = 1`` for the Jupyter ones), on a log scale
(the subjects span from ~1 ms to hundreds), coloured by group. A subject that
errored keeps its row, marked "error", so a gap is visible rather than
silently dropped. Drawn by run.py with matplotlib's Agg backend (the dev
extra has matplotlib); ``python benchmarks/plot.py RESULT.json OUT.png``
redraws it from a kept result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["GROUPS", "bars", "draw"]

# (group name, key of the reports in the result JSON, the workload, its label)
GROUPS = [
    ("blocks", "reports", "print", "print(1)"),
    ("jupyter", "jupyter_reports", "x1", "x = 1, stateful"),
    ("docker", "docker_reports", "exec", "print(1)"),
]
COLOURS = {"blocks": "#4c72b0", "jupyter": "#dd8452", "docker": "#55a868"}


def bars(result: dict) -> list[tuple[str, str, float | None, bool | None]]:
    """(group, label, median ms or None when errored, outputs right: see _right) per subject, in table order."""
    out = []
    for group, key, workload, what in GROUPS:
        for report in result.get(key) or []:
            entry = report.get(workload) or {}
            median = None if "error" in entry or entry.get("na") else entry.get("median_ms")
            out.append((group, f"{report['subject']} [{what}]", median, _right(entry)))
    return out


def _right(entry: dict) -> bool | None:
    """True when every output was right, False when some were wrong, None
    when none was right (the figure then times failures: no bar is drawn).
    Each group counts its own way: ``wrong`` of ``n`` (docker), ``correct``
    of ``n`` (blocks), ``correct`` as a flag (jupyter)."""
    n = entry.get("n", 0)
    correct = entry.get("correct", True)
    if isinstance(correct, bool):
        wrong = 0 if correct else max(n, 1)
    else:
        wrong = n - correct
    wrong = max(wrong, entry.get("wrong", 0))
    if n and wrong >= n or not n and wrong:
        return None
    return not wrong


def draw(result: dict, path: Path) -> Path | None:
    """Write the plot to ``path``; None (nothing written) when no group was measured."""
    rows = bars(result)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows.reverse()  # the first subject at the top
    measured = [m for _, _, m, right in rows if m and right is not None]
    low = min(measured) / 2 if measured else 0.5
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.3), dpi=100)
    for y, (group, label, median, right) in enumerate(rows):
        if median is None or right is None:
            ax.text(
                low * 1.1,
                y,
                "error" if median is None else "fails: no right output",
                va="center",
                fontsize=7,
                color="#c44e52",
            )
            continue
        ax.barh(y, median, color=COLOURS[group], hatch=None if right else "//")
        ax.text(median * 1.08, y, f"{median:.1f}" + ("" if right else " (wrong)"), va="center", fontsize=7)
    ax.set_yticks(range(len(rows)), [label for _, label, _, _ in rows], fontsize=7)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlim(low, (max(measured) if measured else 10) * 3)
    ax.set_xlabel("median ms per call (log scale; lower is better)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=COLOURS[g]) for g, *_ in GROUPS if any(r[0] == g for r in rows)
    ]
    ax.legend(
        handles,
        [g for g, *_ in GROUPS if any(r[0] == g for r in rows)],
        fontsize=7,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.1),
        ncol=3,
        frameon=False,
    )
    machine = result.get("machine") or {}
    commit = ((machine.get("git") or {}).get("commit") or "")[:10]
    cpu = machine.get("cpu") or {}
    ax.set_title(
        f"execbox and peers: median ms per call{' (quick run)' if result.get('quick') else ''}\n"
        f"{result.get('when', '')[:10]}, commit {commit}, {cpu.get('count', '?')} × {cpu.get('model', '?')}",
        fontsize=8,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path


if __name__ == "__main__":
    draw(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))

"""Code execbox runs in a Jupyter kernel of its own, besides the blocks: the
set-up of each new kernel (stream flushing, the output cap) and the helper
that runs ``sh`` / ``bash`` blocks as a subprocess of the kernel.

Kept apart from ``jupyter`` (the executor): these are programs for the
kernel's side, read by nothing else.
"""

from __future__ import annotations

__all__ = ["KERNEL_SETUP", "OUTPUT_CAP", "SHELL_HELPER"]

# Run once in each new kernel, silently: outputs of both streams sent as they
# come (ipykernel batches each stream for 0.2 s, which reorders them), and no
# "To exit: use 'exit'" warning after sys.exit (shown once, so runs differed).
KERNEL_SETUP = """
import sys as __execbox_sys, warnings as __execbox_warnings
for __execbox_stream in (__execbox_sys.stdout, __execbox_sys.stderr):
    if hasattr(__execbox_stream, "flush_interval"):
        __execbox_stream.flush_interval = 0.001
__execbox_warnings.filterwarnings("ignore", message="To exit: use")
del __execbox_sys, __execbox_warnings, __execbox_stream
"""
# Also run once: each cell's stdout + stderr capped inside the kernel a little
# past the executor's output limit, its head and its tail kept (the host cuts
# at the limit and says so), so a gigabyte of prints is not queued in the
# kernel's memory first; and IPython's
# copy of every cell's output in memory (history_manager.outputs, kept for the
# kernel's life even with history off) is not kept.
OUTPUT_CAP = """
def __execbox_cap(limit):
    import sys
    class Forget(dict):
        def __contains__(self, key):
            return False
        def __getitem__(self, key):
            return []
    history = getattr(get_ipython(), "history_manager", None)
    if history is not None and hasattr(history, "outputs"):
        history.outputs = Forget()
    import collections
    state = {"used": 0, "tails": []}

    def wrap(*_):  # each cell: IPython swaps stream.write in and out around every cell
        state["used"], state["tails"] = 0, []
        for stream in (sys.stdout, sys.stderr):
            inner, tail, size = stream.write, collections.deque(), [0]
            state["tails"].append((inner, tail))

            def capped(text, _inner=inner, _tail=tail, _size=size):
                if state["used"] <= limit:
                    state["used"] += len(text)
                    return _inner(text)
                _tail.append(text)  # past the cap: only the last `limit` characters are kept
                _size[0] += len(text)
                while len(_tail) > 1 and _size[0] - len(_tail[0]) >= limit:
                    _size[0] -= len(_tail.popleft())
                return len(text)
            stream.write = capped

    def flush_tails(*_):  # the end of the output, as every backend keeps it
        for inner, tail in state["tails"]:
            text = "".join(tail)[-limit:]
            if text:
                inner(text)
        state["tails"] = []
    get_ipython().events.register("pre_run_cell", wrap)
    get_ipython().events.register("post_run_cell", flush_tails)
__execbox_cap(LIMIT)
del __execbox_cap
"""
SHELL_HELPER = r'''
def __execbox_shell(argv):
    import os, selectors, signal, subprocess, sys
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, sys.stdout)
        sel.register(proc.stderr, selectors.EVENT_READ, sys.stderr)
        try:
            # until the shell exits: a background child holding the pipes does not hold the block
            while sel.get_map() and (proc.poll() is None or sel.select(0)):
                for key, _ in sel.select(0.05):
                    data = os.read(key.fd, 65536)
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    key.data.write(data.decode("utf-8", "replace"))
                    key.data.flush()
            return proc.wait()
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
'''

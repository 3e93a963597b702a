"""Code execbox runs in a Jupyter kernel of its own, besides the blocks:
the set-up of each new kernel (stream flushing, the output cap, the working
folder) and the helper that runs ``sh`` / ``bash`` blocks as a subprocess of
the kernel.

Never imported by execbox: the executor sends this file's text to the
kernel, followed by one call whose arguments are Python literals (see
``kernel_code``), silently. It runs in the user's own namespace, so it
defines only names no user code uses and leaves none behind but the shell
helper's (the set-up's call deletes both functions). Standard library and
IPython only: the kernel's Python may be older than the host's.
"""


def __execbox_setup(limit, cwd=None):
    """Run once in each new kernel (and after a restart).

    Outputs of both streams are sent as they come (ipykernel batches each
    stream for 0.2 s, which reorders them), and no "To exit: use 'exit'"
    warning follows sys.exit (shown once, so runs differed).

    Each cell's stdout + stderr is capped inside the kernel at ``limit``
    characters (a little past the executor's output limit), its head and
    its tail kept (the host cuts at its limit and says so), so a gigabyte
    of prints is not queued in the kernel's memory first; and IPython's
    copy of every cell's output in memory (``history_manager.outputs``, kept
    for the kernel's life even with history off) is not kept.

    ``cwd``: the folder to work in (a server's kernel starts in its own).
    """
    import collections
    import os
    import sys
    import warnings

    from IPython import get_ipython

    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "flush_interval"):
            stream.flush_interval = 0.001
    warnings.filterwarnings("ignore", message="To exit: use")

    class Forget(dict):
        def __contains__(self, key):
            return False

        def __getitem__(self, key):
            return []

    shell = get_ipython()
    history = getattr(shell, "history_manager", None)
    if history is not None and hasattr(history, "outputs"):
        history.outputs = Forget()
    state: dict = {"used": 0, "tails": []}

    def wrap(*_):  # each cell: IPython swaps stream.write in and out around every cell
        state["used"], state["tails"] = 0, []
        for stream in (sys.stdout, sys.stderr):
            inner, size = stream.write, [0]
            tail: collections.deque = collections.deque()
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

            stream.write = capped  # type: ignore[method-assign]  # the cap, undone by IPython after the cell

    def flush_tails(*_):  # the end of the output, as every backend keeps it
        for inner, tail in state["tails"]:
            text = "".join(tail)[-limit:]
            if text:
                inner(text)
        state["tails"] = []

    shell.events.register("pre_run_cell", wrap)
    shell.events.register("post_run_cell", flush_tails)
    if cwd is not None:
        os.chdir(cwd)


def __execbox_shell(argv):
    """Run ``argv`` (a ``sh`` / ``bash`` block) with its output streamed
    into the cell; its exit status."""
    import os
    import selectors
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None and proc.stderr is not None  # both PIPE
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

"""The in-container killer: kills what a block left behind in its container.

Imported by the agent (``agent.py``, beside it), which calls ``kill`` in its
own process (no fork: it works when a fork bomb holds every pid). Without
the agent, run by ``python3 -I -c <this file's text> TOKEN [LIVE...]`` (from
``_wrapper.sh``, or on its own exec after a timeout or a cancel).
Standard library only; any Python 3 the image has.

argv: the block's token, then the tokens of the executor's other running
blocks. Kills what carries the block's token, orphans that carry no live
token (a forged one does not protect), and their descendants; spares init,
the keep-alive (init's oldest child), itself and its parent; kills until
nothing more is found. The agent adds the block's session (its Python
blocks are forked, not exec'd: /proc shows the agent's environment, without
the token, for them and what they fork) and the live blocks' sessions.
"""

import os
import signal
import sys


def main(argv):
    kill(argv[0], argv[1:])


def kill(token, live_tokens, session=None, live_sessions=(), keep_alive=True):
    """Kill (module docstring); ``session``: the block's session id, whose
    members die too; ``live_sessions``: those of the other running blocks,
    whose orphans are spared like those that carry a live token;
    ``keep_alive``: spare init's oldest child (False in the agent: it is that
    child, and spared as the caller)."""
    mark = b"EXECBOX_RUN_TOKEN=" + token.encode()
    live = {b"EXECBOX_RUN_TOKEN=" + t.encode() for t in live_tokens}
    for _ in range(100):
        parent, born, doomed = {}, {}, set()
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in (1, os.getpid(), os.getppid()):
                continue
            pid = int(name)
            try:
                with open("/proc/" + name + "/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                if fields[0] in (b"Z", b"X"):
                    continue  # dead already (the agent's child waits to be reaped: killing it again
                    # passed after pass kept the agent here, and every block waiting on it, ~1 s)
                parent[pid], born[pid], sid = int(fields[1]), int(fields[19]), int(fields[3])
            except (OSError, ValueError, IndexError):
                continue
            try:
                with open("/proc/" + name + "/environ", "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                env = None
            unclaimed = env is None or not live.intersection(env)  # (no live block's token)
            if (
                (env is not None and mark in env)
                or sid == session
                or (parent[pid] == 1 and sid not in live_sessions and unclaimed)
            ):
                doomed.add(pid)
        adopted = [pid for pid in parent if parent[pid] == 1]
        if adopted and keep_alive:
            doomed.discard(min(adopted, key=lambda pid: (born[pid], pid)))  # the keep-alive
        grew = True
        while grew:
            grew = False
            for pid, ppid in parent.items():
                if ppid in doomed and pid not in doomed:
                    doomed.add(pid)
                    grew = True
        if not doomed:
            break
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


if __name__ == "__main__":
    main(sys.argv[1:])

"""execbox's agent: the long-lived process in a docker backend's container
that runs its blocks, instead of a ``docker exec`` per block (~55-60 ms of
engine work each before any code runs; through the agent a block costs a
fork and two frames on the container's attached stream).

Runs INSIDE the container, standard library only, Python 3.6 or later: this
file's folder is bound in read-only and this file is the container's command
(``python3 -u agent.py ZYGOTE_DIR USER [EGRESS]``, under the engine's init;
ZYGOTE_DIR holds the sandbox's ``run_file.py``, bound in read-only too; USER
is who blocks run as, ``uid:gid`` or names, as Docker's ``--user``; EGRESS,
with the network on, the config of the routing rules installed before
anything else, ``egress.py``: the internet, not this machine). It talks to
the host over its stdin and stdout (``wire.py``): the attached stream works
on runc and on gVisor alike, where a unix socket in a bind mount does not.

A block is a child forked by the agent, in a session of its own, its stdout
and stderr two pipes the agent forwards as they are read, stdin /dev/null,
the block's token (EXECBOX_RUN_TOKEN) in its environment, in the workspace,
under the block user (``blockuser.py``: the agent keeps root as its real
uid, so no block reaches the host's channel, nor signals the agent).
A Python file runs in the child in this already-started interpreter, with a
fresh ``__main__`` (``run_file.py``: what ``python -u FILE`` does, without
the ~10 ms of a new interpreter); any other program is exec'd.

The guarantees of the exec path's wrapper (``_wrapper.sh``) hold here:
before a block, when none runs and nothing but init and the agent is left,
/tmp, /dev/shm, /dev/mqueue and SysV IPC objects are emptied (done as soon
as the last block ends, when it leaves nothing behind: nothing can run until
the next block, and the host is reading the last one's end meanwhile); when a block's
process ends and more than init and the agent are left, the killer runs (in
this process: no fork, so a fork bomb that holds every pid cannot stop it);
KILL (the host's timeout or cancellation) runs it at once, and so does the
block's own deadline (its RUN's ``deadline_s``, a little after the host's
timeout: the block dies then whatever the host was told). The pipes are
read until they close (or DRAIN_S after the end, if something unkillable
holds them, or the host has not acknowledged the output for that long);
then EXIT. Blocks run at the same time, each on its own id.

A RUN is answered with STARTED before the fork (a block the host never saw
started never ran, and may be run again elsewhere; its time starts there);
PING with PONG. RUNs are started in order while fewer than YOUNG blocks
are younger than YOUTH_S; the rest wait their turn (a burst of 64 on two
cores had every block's time eaten by the start of the others: print(1)
took ~850 ms from its start to its end, ~50 ms now). A
block's output stops being read while WINDOW bytes of it are unacknowledged
by the host (``wire``): the host's memory stays bounded, and the block waits
on its writes as on a slow terminal. Frames go out without blocking the
agent, a frame of each block in turn (``outgoing.py``).

The agent is the container's main process: if it dies (the OOM killer took
it), the container stops, the host sees its stream end, fails the running
blocks and starts a new container for the next one. It puts its blocks
first in the OOM killer's line. A frame from the host it cannot read ends
it (``wire.Frames`` bounds every frame).
"""

import collections
import errno
import json
import os
import select
import shutil
import signal
import sys
import time

import blockuser  # beside this file
import killer
import wire
from outgoing import Outgoing
from scratch import empty_scratch, oom_kills, processes

# a block's own modules of these names are not shadowed
for _name in ("blockuser", "ipc_sweep", "killer", "outgoing", "scratch", "wire"):
    del sys.modules[_name]

# the programs of the language table (execbox/_languages.py) an image may have
PROGRAMS = (
    "python3", "bash", "sh", "node", "pwsh", "gcc", "g++", "go", "rustc", "javac", "java", "tsc", "esbuild",
    "gdc", "mcs", "mono", "ruby", "php", "lua", "perl", "Rscript",
)  # fmt: skip
DRAIN_S = 2.0
RECHECK_S = 0.002
# Blocks started less than YOUTH_S ago and not ended, at most: a burst of
# RUNs is started a few at a time (the rest wait, in order, their time not
# yet counted), so that a short block is not starved by the start of 63
# others; a block older than that counts as long-running and makes room
YOUNG = max(4, 2 * (os.cpu_count() or 1))
YOUTH_S = 0.1
FORK_TRIES = 5
OWN = 2  # processes of the container's own: init and the agent


def load_run_file(folder):
    sys.path.insert(0, folder)
    try:
        from run_file import run_python_file
    finally:
        sys.path.remove(folder)
        sys.modules.pop("run_file", None)
    return run_python_file


def exit_code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


class Block:
    def __init__(self, block_id, token, pid, pipes, deadline):
        self.id, self.token, self.pid = block_id, token, pid
        self.pipes = pipes  # fd -> wire.STDOUT / wire.STDERR, while open
        self.deadline = deadline  # killed then, whatever the host did (None: none, or it has passed)
        self.timed_out = False  # killed at its deadline by the agent itself
        self.status = None
        self.drain_until = None
        self.note = ""
        self.started = time.monotonic()
        self.unacked = 0  # output bytes sent that the host has not acknowledged
        self.paused = False  # its pipes are out of the poll: WINDOW bytes unacknowledged


class Agent:
    def __init__(self, run_python_file, user, prctl):
        self.run_python_file = run_python_file
        self.user, self.prctl = user, prctl  # who blocks run as (blockuser)
        self.blocks = {}  # id -> Block
        self.by_pid, self.by_fd = {}, {}
        self.frames = wire.Frames()
        self.devnull = os.open(os.devnull, os.O_RDWR)
        self.wake_r, wake_w = os.pipe()
        for fd in (self.wake_r, wake_w):
            os.set_blocking(fd, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.poll = select.poll()
        self.poll.register(0, select.POLLIN)
        self.poll.register(self.wake_r, select.POLLIN)
        self.recheck_until = 0.0  # (a SIGCHLD may come before its child can be waited for: gVisor)
        self.clean = False  # emptied after the last block, and nothing has run since
        self.waiting = collections.OrderedDict()  # id -> RUN request not started yet (one per host caller)
        self.out = Outgoing(1, self.poll)
        self.send = self.out.send  # (frame, block id)

    def serve(self):
        while True:
            now = time.monotonic()
            due = [b.drain_until for b in self.blocks.values() if b.drain_until is not None]
            due += [b.deadline for b in self.blocks.values() if b.deadline is not None]
            if now < self.recheck_until or any(
                b.status is None and not b.pipes for b in self.blocks.values()
            ):
                due.append(now + RECHECK_S)
            if self.waiting:  # when the oldest young block makes room
                due.append(
                    min(
                        [
                            b.started + YOUTH_S
                            for b in self.blocks.values()
                            if b.status is None and b.started + YOUTH_S > now
                        ],
                        default=now,
                    )
                )
            timeout = None if not due else max(0, int((min(due) - now) * 1000) + 1)
            for fd, _ in self.poll.poll(timeout):
                if fd == 0:
                    data = os.read(0, 1 << 16)
                    if not data:
                        return  # the host is gone
                    try:
                        for kind, block_id, payload in self.frames.feed(data):
                            self.command(kind, block_id, payload)
                    except (ValueError, KeyError, TypeError) as exc:  # (json's errors are ValueErrors)
                        raise SystemExit(f"execbox-agent: a malformed frame from the host: {exc}") from None
                elif fd == 1:
                    self.out.flush()
                elif fd == self.wake_r:
                    try:
                        while os.read(self.wake_r, 512):
                            pass
                    except OSError:
                        pass
                    if not self.reap():
                        self.recheck_until = time.monotonic() + 0.1
                elif fd in self.by_fd:
                    self.output(fd)
            if self.by_pid and (
                time.monotonic() < self.recheck_until
                or any(b.status is None and not b.pipes for b in self.blocks.values())
            ):
                self.reap()
            now = time.monotonic()
            for block in list(self.blocks.values()):
                if block.deadline is not None and now >= block.deadline:
                    self.overdue(block)
                if block.drain_until is not None and now >= block.drain_until:
                    self.finish(block)
            self.admit()

    def admit(self):
        """Start waiting RUNs, in order, while fewer than YOUNG blocks are young."""
        while self.waiting:
            now = time.monotonic()
            young = sum(1 for b in self.blocks.values() if b.status is None and now - b.started < YOUTH_S)
            if young >= YOUNG:
                return
            block_id, request = self.waiting.popitem(last=False)
            self.start(block_id, request)

    def command(self, kind, block_id, payload):
        if kind == wire.HELLO:
            found = [p for p in PROGRAMS if shutil.which(p)]
            self.send(
                wire.pack_json(
                    wire.READY,
                    0,
                    {"pid": os.getpid(), "programs": found, "python": list(sys.version_info[:3])},
                )
            )
        elif kind == wire.RUN:
            request = json.loads(payload.decode())
            if not isinstance(request, dict):
                raise TypeError(f"a RUN of {type(request).__name__}")
            self.waiting[block_id] = request
            self.admit()
        elif kind == wire.KILL:
            block = self.blocks.get(block_id)
            if block is not None and block.status is None:
                self.kill(block)
            elif self.waiting.pop(block_id, None) is not None:  # never started
                self.send(wire.pack_json(wire.EXIT, block_id, {"code": 128 + signal.SIGKILL}), block_id)
        elif kind == wire.ACK:
            block = self.blocks.get(block_id)
            if block is not None:
                self.acknowledged(block, int(payload))
        elif kind == wire.PING:
            self.send(wire.pack(wire.PONG, block_id))

    def acknowledged(self, block, count):
        block.unacked -= count
        if block.paused and block.unacked < wire.WINDOW:
            block.paused = False
            for fd in block.pipes:
                self.poll.register(fd, select.POLLIN)
        if block.drain_until is not None:  # the host is reading: the ended block's rest still comes
            block.drain_until = time.monotonic() + DRAIN_S

    def overdue(self, block):
        """Kill a block at its deadline: the host kills it there too, unless
        something (a block could not, by design) made it believe it ended."""
        block.deadline = None
        if block.status is None:
            block.timed_out = True
            block.note = "killed by the agent at its deadline"
            self.kill(block)

    def others(self, block):
        rest = [b for b in self.blocks.values() if b is not block]
        return [b.token for b in rest], {b.pid for b in rest}

    def kill(self, block):
        tokens, sessions = self.others(block)
        if block.status is None:
            try:
                os.kill(block.pid, signal.SIGKILL)  # it may not have made its session yet
            except OSError:
                pass
        killer.kill(block.token, tokens, session=block.pid, live_sessions=sessions, keep_alive=False)

    def start(self, block_id, request):
        if not self.blocks and not self.clean and processes() <= OWN:
            empty_scratch()
        self.clean = False
        self.send(wire.pack(wire.STARTED, block_id), block_id)  # before the fork: unanswered, it never ran
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid, problem = None, None
        for attempt in range(FORK_TRIES):
            try:
                pid = os.fork()
                break
            except OSError as exc:
                problem = exc
                if exc.errno != errno.EAGAIN:
                    break
                # an earlier block's fork bomb outlived it and holds every
                # pid: its orphans die (those of running blocks are spared)
                tokens, sessions = self.others(None)
                killer.kill(os.urandom(12).hex(), tokens, live_sessions=sessions, keep_alive=False)
                time.sleep(0.05 * (attempt + 1))
        if pid == 0:
            self.child(request, out_w, err_w)
        os.close(out_w)
        os.close(err_w)
        limit = request.get("deadline_s")
        block = Block(
            block_id,
            request["token"],
            pid,
            {out_r: wire.STDOUT, err_r: wire.STDERR},
            None if limit is None else time.monotonic() + float(limit),
        )
        self.blocks[block_id] = block
        if pid is None:
            block.status = 2 << 8
            block.note = f"the block could not be started: {problem}"
            self.send(wire.pack(wire.STDERR, block_id, f"execbox: {block.note}\n".encode()), block_id)
            self.finish(block)
            return
        self.by_pid[pid] = block
        for fd in block.pipes:
            self.by_fd[fd] = block
            self.poll.register(fd, select.POLLIN)

    def child(self, request, out_w, err_w):
        stdio = (self.devnull, out_w, err_w)
        blockuser.run_child(request, stdio, self.user, self.prctl, self.run_python_file)

    def output(self, fd):
        block = self.by_fd[fd]
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            data = b""
        if data:
            self.send(wire.pack(block.pipes[fd], block.id, data), block.id)
            block.unacked += len(data)
            if block.unacked >= wire.WINDOW and not block.paused:
                block.paused = True  # read again once the host has caught up (ACK)
                for pipe in block.pipes:
                    self.poll.unregister(pipe)
            return
        self.close_pipe(block, fd)
        if block.status is not None and not block.pipes:
            self.finish(block)

    def close_pipe(self, block, fd):
        if not block.paused:
            self.poll.unregister(fd)
        del self.by_fd[fd]
        del block.pipes[fd]
        os.close(fd)

    def reap(self):
        """Whether a child was waited for."""
        reaped = False
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return reaped
            if pid == 0:
                return reaped
            reaped = True
            block = self.by_pid.pop(pid, None)
            if block is None:
                continue
            block.status = status
            if processes() > OWN:
                self.kill(block)  # what the block left, not what the others run
            block.drain_until = time.monotonic() + DRAIN_S
            if not block.pipes:
                self.finish(block)

    def finish(self, block):
        for fd in list(block.pipes):
            self.close_pipe(block, fd)
        self.by_pid.pop(block.pid, None)
        del self.blocks[block.id]
        code = exit_code(block.status) if block.status is not None else 137
        report = {"code": code}
        if code == 128 + signal.SIGKILL:
            report["oom_kills"] = oom_kills()
        if block.note:
            report["note"] = block.note
        if block.timed_out:
            report["timed_out"] = True
        self.send(wire.pack_json(wire.EXIT, block.id, report), block.id)
        if not self.blocks and processes() <= OWN:
            # emptied now for the next block, while the host reads this one's
            # end: nothing can run in between (nothing is left to run it)
            empty_scratch()
            self.clean = True


def main():
    run_python_file = load_run_file(sys.argv[1])
    try:
        prctl = blockuser.load_prctl()
        user = blockuser.BlockUser(sys.argv[2])
        if len(sys.argv) > 3 and sys.argv[3]:  # the network on: first, root with CAP_NET_ADMIN, no block run
            import egress  # beside this file, imported only then

            del sys.modules["egress"]  # (a block's own module of that name is not shadowed)
            egress.guard_or_leave(sys.argv[3])
        # made as root: its own pipe is not the block user's (gVisor leaves /proc/PID/fd open to that uid)
        agent = Agent(run_python_file, user, prctl)
        blockuser.enter(user, prctl)
        blockuser.probe(user, prctl)
    except blockuser.Refused as exc:  # the host runs this image's blocks as docker exec instead
        raise SystemExit(f"execbox-agent: {exc}") from None
    agent.serve()


if __name__ == "__main__":
    main()

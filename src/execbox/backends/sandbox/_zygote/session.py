"""A stateful Python session in a pool unit: runs INSIDE the jail, standard
library only (imported by ``zygote.py``, beside it).

A unit's code process whose first message is ``session`` does not run one
block and leave: it loops here, one block per message on its socket, in
one ``__main__`` whose globals persist. A message is a JSON request (a
Python block's text and file, or the argv of a program to fork and exec)
with the block's stdout and stderr; the answer, on the same socket, is
``exit N NONCE`` (the request's ``nonce``: the host ties each answer to its
request, ``_session_block``), with a file of the block's displays when it
has any (a JSON list of ``{"mime", "data"}``, base64 for images; those past
the request's ``displays_max`` bytes dropped, and counted in a last
``{"dropped": N}``). ``started NONCE`` comes first, when the block's own
code begins.

As in a notebook, a last statement that is an expression shows its
``repr`` (printed, and a ``text/plain`` display); matplotlib figures left
open at the end of a block (or shown with ``plt.show()``) become PNG displays,
through the backend ``execbox_inline`` (``mpl/``, put on the path).

SIGINT (sent by the unit's init when the host asks: a timeout, a cancel)
raises ``KeyboardInterrupt`` in the block, which ends it; the globals stay.
It is ignored between blocks. After each block, every process it started
is killed (``kill(-1)`` from PID 2 of the unit's PID namespace reaches all but
the init and this process) and reaped (this process is their subreaper). A
unit without a PID namespace (a GPU session) kills its descendants one
round of children at a time instead (``tree.py``): there ``kill(-1)`` would
reach the zygote.
"""

import ast
import base64
import builtins
import ctypes
import fcntl
import json
import os
import signal
import socket
import sys
import types

from run_file import exit_code_of, remember_lines, show_uncaught  # beside this file
from tree import kill_descendants  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
MPL_DIR = os.path.join(HERE, "mpl")
PR_SET_CHILD_SUBREAPER = 36
MAX_FDS = 16
MAX_REQUEST = 1 << 17  # a larger block is read from its file (the host says "read")
SPARE_FDS = 4


class Session:
    def __init__(self, sock, own_namespace=True):
        self.sock = sock
        self.own_namespace = own_namespace  # False: a GPU session's unit, no PID namespace of its own
        self.main = types.ModuleType("__main__")
        self.main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = self.main
        self.displays = []
        self.null = os.open("/dev/null", os.O_WRONLY)
        self.started = False  # whether the current block's code has begun
        self.nonce = ""  # the current request's, said back with each answer to it
        self.displays_max = 1 << 20  # the current request's bound on its displays
        self.spare = []  # held while a block runs: a block that opens every descriptor it may leaves these

    def hold(self):
        """Keep descriptors for the next request and answer (its pipes, the displays' memfd)."""
        try:
            while len(self.spare) < SPARE_FDS:
                self.spare.append(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            pass

    def release(self):
        for fd in self.spare:
            os.close(fd)
        self.spare = []

    def serve(self):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        os.environ["MPLBACKEND"] = "module://execbox_inline"
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), MPL_DIR]))
        sys.path.append(MPL_DIR)
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, MAX_REQUEST, MAX_FDS)
            except KeyboardInterrupt:
                continue
            except MemoryError:  # the block's state holds the address space (RLIMIT_AS)
                self.sock.send(b"nomem")
                continue
            if not data:
                os._exit(0)
            if len(fds) < 2:  # no descriptor free for them: the block's state holds every one
                for fd in fds:
                    os.close(fd)
                self.sock.send(b"full")
                continue
            self.started = False
            try:
                request = json.loads(data)
                self.nonce = str(request.get("nonce", ""))
                self.displays_max = int(request.get("displays_max", self.displays_max))
                code = self.block(request, fds)
            except KeyboardInterrupt:  # came as the block ended
                code = 130
            except MemoryError:  # in the session's own steps, not the block's code
                for fd in (*fds, 1, 2):
                    try:
                        os.dup2(self.null, fd) if fd in (1, 2) else os.close(fd)
                    except OSError:
                        pass
                if not self.started:  # it did not run: the host runs it in a fresh session
                    self.sock.send(b"nomem")
                    continue
                code = 1
            self.answer(code)

    def block(self, request, fds):
        out, err = fds[:2]
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        given = fds[2:3]  # the block's stdin: a sealed memfd of the host's
        for fd in given:
            os.dup2(fd, 0)
            os.close(fd)
        for fd in fds[3:]:
            os.close(fd)
        if given:  # a fresh reader: nothing an earlier block's read left buffered
            sys.stdin = open(0, closefd=False, errors="surrogateescape")  # noqa: SIM115
        self.hold()
        for name, fd in (("stdout", 1), ("stderr", 2)):
            stream = getattr(sys, name)
            if stream is None or stream.closed:  # an earlier block closed it
                # the block's stream from now on, the fd stays ours
                setattr(sys, name, open(fd, "w", closefd=False, errors="backslashreplace"))  # noqa: SIM115
        self.displays = []
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            try:
                if "argv" in request:
                    self.begin()
                    code = run_program(request["argv"])
                else:
                    code = self.run_python(request.get("code"), request["file"])
                flush()
                self.figures()
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        except KeyboardInterrupt:
            code = 130
        finally:
            flush()
            os.dup2(self.null, 1)  # the host sees the block's output end
            os.dup2(self.null, 2)
            if given:  # the next block reads an empty stdin again
                empty = os.open("/dev/null", os.O_RDONLY)
                os.dup2(empty, 0)
                os.close(empty)
                sys.stdin = open(0, closefd=False)  # noqa: SIM115
            sweep(self.own_namespace)
        return code

    def run_python(self, source, path):
        ns = self.main.__dict__
        from_text = source is not None
        if source is None:
            with open(path, "rb") as handle:
                source = handle.read()
        else:  # its file may not exist (keep_code_files=False)
            remember_lines(path, source)
        ns["__file__"] = path
        sys.argv = [path]
        sys.path[0] = os.path.dirname(path)
        try:
            try:
                tree = ast.parse(source, path)
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                body = compile(tree, path, "exec", dont_inherit=True)
                shown = compile(last, path, "eval", dont_inherit=True) if last is not None else None
            except BaseException as exc:  # as the interpreter reports it: no frame of ours
                exc.__traceback__ = None
                raise
            self.begin()
            exec(body, ns)
            if shown is not None:
                value = eval(shown, ns)
                if value is not None:
                    ns["_"] = value
                    text = repr(value)
                    try:
                        sys.stdout.write(text + "\n")
                    except (OSError, ValueError):
                        pass  # the block closed its output: the display still goes
                    self.displays.append({"mime": "text/plain", "data": text})
            return 0
        except SystemExit as exc:
            return exit_code_of(exc)
        except BaseException as exc:
            tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
            show_uncaught(exc.with_traceback(tb), tb, from_text)
            return 130 if isinstance(exc, KeyboardInterrupt) else 1

    def figures(self):
        """The figures the block shows or leaves open, as PNG displays."""
        backend = sys.modules.get("execbox_inline")
        if "matplotlib.pyplot" in sys.modules and backend is not None:
            backend.show()
            for png in backend.shown:
                self.displays.append({"mime": "image/png", "data": base64.b64encode(png).decode()})
            backend.shown.clear()

    def begin(self):
        """The block's own code starts now: the host hears it before, so
        that a "full" or "nomem" it sees after is a block's forgery."""
        self.sock.send(f"started {self.nonce}".encode())
        self.started = True

    def answer(self, code):
        self.release()
        fds = []
        if self.displays:
            fd = os.memfd_create("execbox-displays", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            view = memoryview(json.dumps(kept(self.displays, self.displays_max)).encode())
            while view:
                view = view[os.write(fd, view) :]
            # sealed: the host reads only a memfd that no one can change while it reads
            fcntl.fcntl(
                fd,
                fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE,
            )
            fds.append(fd)
            self.displays = []
        try:
            socket.send_fds(self.sock, [f"exit {code & 0xFF} {self.nonce}".encode()], fds)
        finally:
            for fd in fds:
                os.close(fd)


def kept(displays, most):
    """The displays whose JSON fits in ``most`` bytes, then ``{"dropped": N}``
    for the rest, if any."""
    found, left = [], most
    for item in displays:
        size = len(json.dumps(item)) + 2
        if size <= left:
            found.append(item)
            left -= size
    if len(found) < len(displays):
        found.append({"dropped": len(displays) - len(found)})
    return found


def run_program(argv):
    """A program (a shell block) in the session's namespaces: its exit code."""
    pid = os.fork()
    if pid == 0:
        try:
            for name in ("SIGPIPE", "SIGXFSZ", "SIGINT"):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
            os.closerange(3, 1 << 16)
            os.execv(argv[0], argv)
        except BaseException as exc:
            os.write(2, f"execbox sandbox: cannot run {argv[0]}: {exc}\n".encode())
        os._exit(127)
    try:
        _, status = os.waitpid(pid, 0)
    except KeyboardInterrupt:
        os.kill(pid, signal.SIGKILL)
        raise
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def sweep(own_namespace):
    """Kill what the block started and reap it (threads stay: they are state)."""
    if not own_namespace:
        kill_descendants()
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass  # nothing else in the namespace
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def serve_session(sock, failed, own_namespace=True):
    """The code process becomes the session (never returns)."""
    if failed is not None:  # the unit could not be made ready: the first block says why
        os._exit(126)
    try:
        Session(sock, own_namespace).serve()
    finally:
        os._exit(0)

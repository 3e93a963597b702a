"""What ``python path`` does, in an interpreter already started: how the
zygote's code process runs a block's Python file (imported by ``zygote.py``,
beside it in the jail; standard library only).
"""

import atexit
import builtins
import importlib.machinery
import linecache
import os
import signal
import sys
import threading
import types


def run_python_file(path, argv, source=None):
    """What ``python path`` does with an already-started interpreter; with
    ``source``, the file's text, which is then not read (the file may not
    exist: its lines are kept for tracebacks and ``inspect``)."""
    full = os.path.abspath(path)
    from_text = source is not None
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(full)
    main = types.ModuleType("__main__")
    main.__file__ = full
    main.__dict__["__builtins__"] = builtins
    main.__dict__["__cached__"] = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", full)
    sys.modules["__main__"] = main
    code = 0
    try:
        try:
            if source is None:
                with open(full, "rb") as handle:
                    source = handle.read()
            else:
                remember_lines(full, source)
            compiled = compile(source, full, "exec", dont_inherit=True)
        except BaseException as exc:  # report it as the interpreter would: no frame of ours
            exc.__traceback__ = None
            raise
        exec(compiled, main.__dict__)
    except SystemExit as exc:
        code = exit_code_of(exc)
    except BaseException as exc:
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        show_uncaught(exc.with_traceback(tb), tb, from_text)  # without this runner's frame
        code = -signal.SIGINT if isinstance(exc, KeyboardInterrupt) else 1
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter calls at exit
    except BaseException:
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            code = code or 120
    if code < 0:  # die of the signal, as the interpreter does after a KeyboardInterrupt
        sys.stdout.flush()
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def exit_code_of(exc):
    value = exc.code
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        print(value, file=sys.stderr)
    except BaseException:
        pass
    return 1


def remember_lines(path, source):
    """The lines of a file run from its text, for tracebacks and ``inspect``
    (an entry with no modification time is never checked against the disk)."""
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)


def show_uncaught(exc, tb, from_text):
    """Print an uncaught exception as the interpreter does. Its default hook
    reads the source lines from the file itself: for a block run from its
    text (no file), the traceback module, which reads them from linecache."""
    if from_text and sys.excepthook is sys.__excepthook__:
        import traceback

        traceback.print_exception(type(exc), exc, tb)
    else:
        sys.excepthook(type(exc), exc, tb)

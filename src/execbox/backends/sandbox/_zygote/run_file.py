"""What ``python path`` does, in an interpreter already started: how the
zygote's code process runs a block's Python file (imported by ``zygote.py``,
beside it in the jail; standard library only).
"""

import atexit
import builtins
import importlib.machinery
import os
import signal
import sys
import threading
import types


def run_python_file(path, argv):
    """What ``python path`` does with an already-started interpreter."""
    full = os.path.abspath(path)
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
            with open(full, "rb") as handle:
                source = handle.read()
            compiled = compile(source, full, "exec", dont_inherit=True)
        except BaseException as exc:  # report it as the interpreter would: no frame of ours
            exc.__traceback__ = None
            raise
        exec(compiled, main.__dict__)
    except SystemExit as exc:
        code = exit_code_of(exc)
    except BaseException as exc:
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # without this runner's frame
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

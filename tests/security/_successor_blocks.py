"""The blocks of the successor section (test_successor.py): Python source
that block A runs to leave a trace (its plant) and that A and the blocks
after it run to look for one (its probe).

A plant says ``PLANTED item`` for each trace it left, ``REFUSED item errno``
for one the jail refused; a probe says ``FOUND item ...`` for each it sees,
and every block ends with ``CHECKED``. ``code`` puts a block together: the
marker the traces carry, what block A said (a probe of a later block looks
at A's exact paths too), whether the jail has namespaces of its own
(``STRICT``: any process or IPC entry not the jail's own is then a trace),
and the helpers every block shares (``PRELUDE``).
"""

from __future__ import annotations

import textwrap

__all__ = [
    "ARM_TIMERS",
    "CLOSE_MINE",
    "FIRED",
    "HOLD_DESCRIPTORS",
    "LIST_DESCRIPTORS",
    "SETUP",
    "TRACES",
    "code",
]

PRELUDE = r"""
import ctypes, os, re, signal, socket, sys, tempfile, time
libc = ctypes.CDLL(None, use_errno=True)

def say(*words):
    print(*words, flush=True)

def made(result):
    if result is None or result < 0:
        raise OSError(ctypes.get_errno(), "refused")

def attempt(item, make):
    try:
        make()
    except OSError as exc:
        say("REFUSED", item, exc.errno)
    else:
        say("PLANTED", item)

def daemon(body):
    # body() runs in a new session's grandchild that outlives the block
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                body()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)

def wait_until(ready, seconds=5):
    deadline = time.monotonic() + seconds
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    return ready()

def processes():
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    cmd = f.read(1 << 16)
                with open(f"/proc/{name}/comm") as f:
                    comm = f.read(64).strip()
                with open(f"/proc/{name}/stat") as f:
                    state, ppid = f.read(4096).rsplit(")", 1)[1].split()[:2]
            except (OSError, ValueError, IndexError):
                continue
            # without a PID namespace a killed process waits for the host's init to reap it
            if STRICT or state not in "ZX":
                table[int(name)] = (cmd, comm, int(ppid))
    return table
"""

FILES = (
    r"""
def plant_files(top):
    base, hidden = os.path.join(top, MARK), os.path.join(top, "." + MARK)
    def folder():
        os.makedirs(base + "-dir/sub")
        open(base + "-dir/sub/f", "w").close()
    def closed():
        open(base + "-000", "w").close()
        os.chmod(base + "-000", 0)
    def locked():
        os.mkdir(base + "-locked")
        open(base + "-locked/f", "w").close()
        os.chmod(base + "-locked", 0)
    for path, make in ((base, lambda: open(base, "w").write("x")), (hidden, lambda: open(hidden, "w").close()),
                       (base + "-dir", folder), (base + "-000", closed), (base + "-locked", locked),
                       (base + "-fifo", lambda: os.mkfifo(base + "-fifo")),
                       (base + "-link", lambda: os.symlink("/etc/hostname", base + "-link"))):
        attempt(path, make)
for top in sorted({"/tmp", "/dev/shm", tempfile.gettempdir()}):
    plant_files(top)
""",
    r"""
paths = {line.split()[1] for line in A_SAID if line.startswith(("PLANTED /", "REFUSED /"))}
tops = {"/tmp", "/dev/shm", tempfile.gettempdir()} | {os.path.dirname(p) for p in paths}
for top in sorted(tops):
    try:
        paths |= {os.path.join(top, n) for n in os.listdir(top) if MARK in n}
    except OSError:
        pass
for path in sorted(paths):
    if os.path.lexists(path):
        say("FOUND", path)
""",
)

PROCESSES = (
    r"""
import shutil
LOOP = "import time\nwhile True:\n    time.sleep(0.2)\n"
def forked():
    libc.prctl(15, MARK.encode(), 0, 0, 0)  # PR_SET_NAME: its comm, no exec
    while True:
        time.sleep(0.2)
attempt("process-python", lambda: daemon(lambda: os.execv(sys.executable, [sys.executable, "-c", LOOP, MARK])))
attempt("process-sleep", lambda: daemon(lambda: os.execv(shutil.which("sleep"), [MARK, "120"])))
attempt("process-fork", lambda: daemon(forked))
wait_until(lambda: sum(MARK.encode() in c or m == MARK for c, m, _ in processes().values()) >= 3)
""",
    r"""
table = processes()
mine, pid = set(), int(os.readlink("/proc/self"))  # getpid() may be a nested namespace's
while pid in table and pid not in mine:  # this block and its ancestors (the jail's own)
    mine.add(pid)
    pid = table[pid][2]
own = {table[p][0] for p in mine}  # their command lines: the pool's other units share them
for pid, (cmd, comm, _) in sorted(table.items()):
    args = cmd.split(b"\0")
    if MARK.encode() in cmd:
        say("FOUND", "process-python" if b"-c" in args else "process-sleep", pid, args)
    elif comm == MARK:
        say("FOUND", "process-fork", pid, comm)
    elif STRICT and pid not in mine and cmd not in own:
        say("FOUND", "stranger", pid, args, comm)
""",
)

SYSV = (
    r"""
for kind, get in GET.items():
    attempt("sysv-" + kind, lambda: made(get(0o1000 | 0o600)))  # IPC_CREAT
""",
    r"""
for kind, get in GET.items():
    if get(0) >= 0:
        say("FOUND", "sysv-" + kind, "by its key")
    try:
        rows = open("/proc/sysvipc/" + kind).read(1 << 20).splitlines()[1:]
    except OSError:
        rows = []
    for row in rows:  # where the jail has an IPC namespace of its own, any entry is a trace
        if STRICT or int(row.split()[0]) == KEY:
            say("FOUND", "sysv-" + kind, "listed", row)
""",
)
SYSV_SETUP = """
KEY = int(MARK[:7], 16) + 1
GET = {"shm": lambda flags: libc.shmget(KEY, 4096 if flags else 0, flags),
       "msg": lambda flags: libc.msgget(KEY, flags), "sem": lambda flags: libc.semget(KEY, 1 if flags else 0, flags)}
"""

MQUEUE = (
    r"""
attempt("mqueue", lambda: made(libc.mq_open(QUEUE, os.O_CREAT | os.O_RDWR, 0o600, None)))
""",
    r"""
if libc.mq_open(QUEUE, os.O_RDWR) >= 0:
    say("FOUND", "mqueue", "opened by name")
try:
    queues = os.listdir("/dev/mqueue")
except OSError:  # none mounted; or the container's, refused by Landlock (a default `docker run`)
    queues = []
if [n for n in queues if MARK in n]:
    say("FOUND", "mqueue", "listed")
""",
)

POSIX_SHM = (
    r"""
def shm():
    os.ftruncate(_posixshmem.shm_open(SHM, os.O_CREAT | os.O_RDWR, 0o600), 4096)
attempt("posix-shm", shm)
attempt("posix-sem", lambda: made(libc.sem_open(SEM, os.O_CREAT, 0o600, 1)))
""",
    r"""
try:
    _posixshmem.shm_open(SHM, os.O_RDWR, 0o600)
    say("FOUND", "posix-shm", "opened by name")
except OSError:
    pass
if libc.sem_open(SEM, 0):
    say("FOUND", "posix-sem", "opened by name")
try:
    names = os.listdir("/dev/shm")
except OSError:  # the host's, in the Landlock tier without a mount namespace (a user who is not root)
    names = []
for name in names:
    if MARK in name:
        say("FOUND", "posix-listed", name)
""",
)

ABSTRACT = (
    r"""
held = []
def bind(kind):
    held.append(socket.socket(socket.AF_UNIX, KINDS[kind]))
    held[-1].bind("\0" + MARK + kind)
    if kind == "stream":
        held[-1].listen()
for kind in KINDS:
    attempt("abstract-" + kind, lambda: bind(kind))
daemon(lambda: time.sleep(120))  # holds them past the block, alone
for held_socket in held:
    held_socket.close()
""",
    r"""
for kind, type_ in KINDS.items():
    try:
        probe = socket.socket(socket.AF_UNIX, type_)
    except OSError:
        continue
    probe.settimeout(2)
    try:
        probe.connect("\0" + MARK + kind) if kind == "stream" else probe.sendto(b"x", "\0" + MARK + kind)
        say("FOUND", "abstract-" + kind)
    except OSError:
        pass
    probe.close()
try:
    table = open("/proc/net/unix").read(1 << 22)
except OSError:
    table = ""
if "@" + MARK in table:
    say("FOUND", "abstract-listed")
""",
)

KEYRINGS = (
    r"""
def add(ring):
    made(libc.syscall(ctypes.c_long(ADD_KEY), b"user", MARK.encode(), b"left", ctypes.c_size_t(4),
                      ctypes.c_long(RINGS[ring])))
for ring in RINGS:
    attempt("key-" + ring, lambda: add(ring))
""",
    r"""
for ring, serial in RINGS.items():  # KEYCTL_SEARCH
    if libc.syscall(ctypes.c_long(KEYCTL), ctypes.c_long(10), ctypes.c_long(serial), b"user",
                    MARK.encode(), ctypes.c_long(0)) >= 0:
        say("FOUND", "key-" + ring)
try:
    if MARK in open("/proc/keys").read(1 << 20):
        say("FOUND", "key-listed")
except OSError:
    pass
""",
)

ENVIRONMENT = (
    """
os.environ["XB_" + MARK] = "left"
attempt("environment", lambda: None)
""",
    """
try:
    initial = open("/proc/self/environ", "rb").read(1 << 20)
except OSError:  # a pool's block is not dumpable
    initial = b""
if [k for k in os.environ if MARK in k] or MARK.encode() in initial:
    say("FOUND", "environment")
""",
)

PYTHON = (
    """
import builtins, json, types
for item, make in (("python-attribute", lambda: setattr(json, MARK, 1)),
                   ("python-patch", lambda: setattr(json, "dumps", lambda *a, **k: MARK)),
                   ("python-module", lambda: sys.modules.__setitem__(MARK, types.ModuleType(MARK))),
                   ("python-builtin", lambda: setattr(builtins, MARK, 1)),
                   ("python-path", lambda: sys.path.append("/" + MARK))):
    attempt(item, make)
""",
    """
import builtins, json
for item, seen in (("python-attribute", hasattr(json, MARK)), ("python-patch", json.dumps(1) == MARK),
                   ("python-module", MARK in sys.modules), ("python-builtin", hasattr(builtins, MARK)),
                   ("python-path", any(MARK in p for p in sys.path))):
    if seen:
        say("FOUND", item)
""",
)

ATTRIBUTES = (
    """
import resource
os.makedirs(MARK + "-cwd", exist_ok=True)
attempt("cwd", lambda: os.chdir(MARK + "-cwd"))
attempt("umask", lambda: os.umask(0o567))
attempt("nofile", lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (77, resource.getrlimit(resource.RLIMIT_NOFILE)[1])))
""",
    """
import resource
mask = os.umask(0o22)
os.umask(mask)
for item, seen in (("cwd", MARK in os.getcwd()), ("umask", mask == 0o567),
                   ("nofile", resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 77)):
    if seen:
        say("FOUND", item, os.getcwd(), oct(mask))
""",
)

SETUP = {
    "sysv": SYSV_SETUP,
    "mqueue": 'libc.mq_open.restype = ctypes.c_int\nQUEUE = ("/" + MARK).encode()\n',
    "posix-shm": "import _posixshmem\nlibc.sem_open.restype = ctypes.c_void_p\n"
    'SHM, SEM = "/" + MARK + "-shm", ("/" + MARK + "-sem").encode()\n',
    "abstract": 'KINDS = {"stream": socket.SOCK_STREAM, "dgram": socket.SOCK_DGRAM}\n',
    "keyrings": 'libc.syscall.restype = ctypes.c_long\nRINGS = {"session": -3, "user": -4, "user-session": -5}\n'
    'ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]\n',
}
TRACES = {
    "files": FILES,
    "processes": PROCESSES,
    "sysv": SYSV,
    "mqueue": MQUEUE,
    "posix-shm": POSIX_SHM,
    "abstract": ABSTRACT,
    "keyrings": KEYRINGS,
    "environment": ENVIRONMENT,
    "python": PYTHON,
    "attributes": ATTRIBUTES,
}


LIST_DESCRIPTORS = r"""
for fd in sorted(os.listdir("/proc/self/fd"), key=int):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own, closed since
        continue
    if MARK in target:
        say("FOUND", "descriptor", fd, target)
    say("FD", fd, re.sub(r"\[\d+\]", "", target))
"""
HOLD_DESCRIPTORS = r"""
held = [os.open(MARK + "-held", os.O_CREAT | os.O_RDWR), *os.pipe()]
held += [s.detach() for s in socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)]
held.append(os.dup2(held[0], 77))
for fd in held:
    os.set_inheritable(fd, True)
daemon(lambda: time.sleep(120))  # holds them past the block
"""
CLOSE_MINE = """
for fd in held:
    os.close(fd)  # the daemon's copies alone hold them (the stateful session's interpreter lives on)
"""

ARM_TIMERS = r"""
def timer(seconds, name):
    def body():
        def fire(*_):
            for top in {os.getcwd(), "/tmp", tempfile.gettempdir()}:
                try:
                    open(os.path.join(top, MARK + name), "w").close()
                except OSError:
                    pass
        signal.signal(signal.SIGALRM, fire)
        signal.alarm(seconds) if name == "-alarm" else signal.setitimer(signal.ITIMER_REAL, seconds)
        time.sleep(30)
    daemon(body)
timer(0.2, "-control")  # fires while A runs: the mechanism works
timer(2, "-alarm")
timer(1.5, "-itimer")
fired = wait_until(lambda: os.path.exists(MARK + "-control"))
say("PLANTED" if fired else "REFUSED", "timer")
"""
FIRED = r"""
for top in sorted({os.getcwd(), "/tmp", tempfile.gettempdir()}):
    for name in ("-alarm", "-itimer"):
        if os.path.lexists(os.path.join(top, MARK + name)):
            say("FOUND", top, MARK + name)
"""


def code(mode: str, marker: str, *parts: str, said: list[str] | None = None) -> str:
    """A block of ``parts`` after the prelude, for ``mode``, its traces carrying ``marker``."""
    strict = mode != "landlock"  # a jail with namespaces: any process or IPC entry not its own is a trace
    head = f"MARK = {marker!r}\nA_SAID = {said or []!r}\nSTRICT = {strict!r}\n"
    return head + PRELUDE + "".join(textwrap.dedent(p) for p in parts) + '\nsay("CHECKED")\n'

"""``execbox playground``: ``execbox serve`` on a free loopback port with
the web playground at ``/``, opened in the browser (Python's
``webbrowser``, when one is found, through a private file that leads on
to the link, so that the token is in no command line); the link, with the
token made for this run, is printed either way."""

from __future__ import annotations

import argparse
import atexit
import html
import os
import shutil
import socket
import tempfile
import threading
import time
import urllib.request

from .._errors import ConfigurationError, install_hint
from .._models import Limits
from ..backends import DEFAULT_BACKEND, backend_names

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "playground",
        help="open the web playground (execbox serve on a free loopback port)",
        description="Start execbox serve on 127.0.0.1 (or --host) and a free port, and open its web "
        "playground in the "
        "browser: paste a model's reply, run it, watch the output stream, see plots and files. "
        f"Needs the server extra: {install_hint('server')}.",
    )
    cmd.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: 127.0.0.1; another, such as 0.0.0.0 in a container, serves "
        "the page and the API to whoever reaches it, behind the token in the link)",
    )
    cmd.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    cmd.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        help=f"the backend chosen at first: {', '.join(backend_names())} (default: {DEFAULT_BACKEND})",
    )
    cmd.add_argument(
        "--backends",
        default="jupyter",
        metavar="A,B",
        help="other backends the page offers (default: jupyter, for a stateful session)",
    )
    cmd.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="seconds per block at first (default: 60)"
    )
    cmd.add_argument("--allow-network", action="store_true", help="let the page ask for network access")
    cmd.add_argument("--no-browser", action="store_true", help="print the URL only")
    cmd.set_defaults(handler=run)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _open_when_up(url: str) -> None:
    """Open the page (``url``, with its token) once the server answers (at most 30 s of asking)."""
    import webbrowser

    page = url.split("?", 1)[0]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(page, timeout=2):
                break
        except OSError:
            time.sleep(0.2)
    try:
        webbrowser.open(_redirect_file(url))
    except (webbrowser.Error, OSError):
        pass  # no browser here: the URL is printed


def _redirect_file(url: str) -> str:
    """A page only this user may read that sends the browser on to ``url``:
    the browser is started with its path, not with the token, which every
    user of the machine could read in its command line (``/proc/PID/cmdline``;
    Jupyter opens such a file too). Removed when this process exits."""
    folder = tempfile.mkdtemp(prefix="execbox-playground-")  # mode 0700
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "open.html")
    escaped = html.escape(url, quote=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        out.write(
            f'<!doctype html><meta charset="utf-8"><meta name="referrer" content="no-referrer">'
            f'<meta http-equiv="refresh" content="0;url={escaped}"><a href="{escaped}">execbox playground</a>'
        )
    return "file://" + path


def run(args: argparse.Namespace) -> int:
    try:
        from ..server import ServerConfig, serve
        from ..server._serve import page_url
    except ImportError as exc:
        raise ConfigurationError(
            f"execbox playground needs the server extra: {install_hint('server')} ({exc})"
        ) from exc
    port = args.port or free_port(args.host)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip() and b.strip() != args.backend)
    config = ServerConfig(
        host=args.host,
        port=port,
        backend=args.backend,
        backends=backends,
        default_limits=Limits(timeout_s=args.timeout),
        allow_network=args.allow_network,
    )
    if not args.no_browser:
        threading.Thread(target=_open_when_up, args=(page_url(config),), daemon=True).start()
    loopback = args.host in ("127.0.0.1", "localhost", "::1")
    what = "; loopback only" if loopback else f"; listening on {args.host}: the link's token guards it"
    serve(config, name="execbox playground", what=what)  # prints the link, with its token
    return 0

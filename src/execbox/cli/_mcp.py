"""``execbox mcp``: serve execbox's tools (run_code, list_files, read_file,
write_file, reset_session) to MCP clients over stdio or streamable HTTP."""

from __future__ import annotations

import argparse
import sys

from .._errors import ConfigurationError, install_hint
from ..backends import DEFAULT_BACKEND, backend_names

__all__ = ["register"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "mcp",
        help="serve execbox to MCP clients (stdio or streamable HTTP)",
        description="Serve execbox's tools (run_code, list_files, read_file, write_file, reset_session) "
        "over the Model Context Protocol. Needs the mcp extra: " + install_hint("mcp") + ".",
    )
    cmd.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (the default: the client starts this command) or http (streamable HTTP)",
    )
    cmd.add_argument(
        "--host",
        default="127.0.0.1",
        help="HTTP: address to listen on (default: 127.0.0.1; there is no authentication)",
    )
    cmd.add_argument("--port", type=int, default=8000, help="HTTP: port (default: 8000)")
    cmd.add_argument("--path", default="/mcp", help="HTTP: endpoint path (default: /mcp)")
    cmd.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        help=f"where code runs: {', '.join(backend_names())} (default: {DEFAULT_BACKEND})",
    )
    cmd.add_argument(
        "--workspace",
        default=None,
        metavar="DIR",
        help="folder the code and the file tools work in (default: a temporary one, "
        "removed when the server stops)",
    )
    cmd.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="seconds per run_code call (default: 60)"
    )
    cmd.add_argument(
        "--gpus", default=None, metavar="all|0,1", help="NVIDIA GPUs the code may use (sandbox, docker)"
    )
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ..tools.mcp import create_server, serve
    except ImportError as exc:
        if getattr(exc, "name", None) != "mcp":
            raise
        raise ConfigurationError(str(exc)) from exc
    if not 0 < args.port < 65536:
        raise ConfigurationError(f"--port {args.port} is not a port number (1-65535)")
    server = create_server(
        backend=args.backend, workspace=args.workspace, timeout_s=args.timeout, gpus=args.gpus
    )
    if args.transport == "http":
        if args.host not in LOOPBACK:
            print(
                f"execbox mcp: warning: listening on {args.host} without authentication: whoever reaches "
                "it can run code here",
                file=sys.stderr,
            )
        print(
            f"execbox mcp: starting on http://{args.host}:{args.port}{args.path} "
            f"(backend {args.backend}; Ctrl-C stops)",
            file=sys.stderr,
            flush=True,
        )
    serve(server, transport=args.transport, host=args.host, port=args.port, path=args.path)
    return 0

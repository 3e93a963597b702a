"""The options of ``run``, ``exec`` and ``chat`` that set a block's
``Limits`` (memory, processes, CPUs, network), parsed and checked by
argparse: a bad value is a usage error naming the option and what it takes."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from .._models import Limits

__all__ = ["add_limit_options", "as_flags", "limits_from", "memory_size"]

# ``Limits`` fields as the messages of the library name them, and the option that sets each here
_FLAGS = {
    "timeout_s": "--timeout",
    "memory_mb": "--memory",
    "max_processes": "--max-processes",
    "cpus": "--cpus",
    "max_output_bytes": "--max-output-bytes",
    "network": "--network",
}
_FIELD = re.compile(r"Limits(?:\.(?P<field>\w+)(?:=(?P<value>[\w.]+))?|\((?P<call>\w+)=(?P<given>[\w.]+)\))")
_SAID_TWICE = re.compile(r"(--[\w-]+) \(\1 on the command line\)")
_SIZE = re.compile(r"\s*(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[kmgt]?)(?:i?b)?\s*", re.IGNORECASE)
_MB_PER_UNIT = {"k": 1 / 1024, "": 1, "m": 1, "g": 1024, "t": 1024 * 1024}


def memory_size(text: str) -> int:
    """Megabytes from ``512`` (MB), ``512M``, ``2G``, ``1.5GiB``, ``524288K``
    (units of 1024, as Docker counts them)."""
    found = _SIZE.fullmatch(text)
    if found is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size: give megabytes (512) or a size with a unit (512M, 2G)"
        )
    megabytes = int(float(found["number"]) * _MB_PER_UNIT[found["unit"].lower()])
    if megabytes < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is less than 1 MB: give at least 1M")
    return megabytes


def _positive_whole(what: str) -> Callable[[str], int]:
    """An argparse type: a whole number above 0, the error naming ``what``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number of {what}")
        return value

    return parse


_whole_megabytes = _positive_whole("MB")
_processes = _positive_whole("processes (e.g. 64)")


def _cores(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.01 <= value <= 1024:  # Limits.cpus's range (NaN is outside it too)
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of cores from 0.01 to 1024 (e.g. 0.5 or 2)"
        )
    return value


def add_limit_options(cmd: argparse.ArgumentParser) -> None:
    """``--memory`` (``--memory-mb``, its older spelling, still taken),
    ``--max-processes``, ``--cpus`` and ``--network``/``--no-network``."""
    cmd.add_argument(
        "--memory",
        dest="memory_mb",
        type=memory_size,
        default=None,
        metavar="SIZE",
        help="memory per block: megabytes, or with a unit: 512M, 2G (default: the backend's; "
        "the sandbox and docker give half the machine's memory, at most 8 GiB)",
    )
    cmd.add_argument("--memory-mb", dest="memory_mb", type=_whole_megabytes, help=argparse.SUPPRESS)
    cmd.add_argument(
        "--max-processes",
        type=_processes,
        default=None,
        metavar="N",
        help="processes and threads per block (default: 512 on the sandbox and docker)",
    )
    cmd.add_argument(
        "--cpus",
        type=_cores,
        default=None,
        metavar="CORES",
        help="CPU time per block, in cores: 0.5 is half a core (default: no limit)",
    )
    cmd.add_argument(
        "--network",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let blocks use the network, to install packages or fetch data (default: off on the "
        "sandbox and docker backends; the local backend has no switch)",
    )


def limits_from(args: argparse.Namespace, **fields: Any) -> Limits:
    """The ``Limits`` the options ask for, with ``fields`` (timeout_s...)."""
    return Limits(
        memory_mb=args.memory_mb,
        max_processes=args.max_processes,
        cpus=args.cpus,
        network=args.network,
        **fields,
    )


def _flag(found: re.Match[str]) -> str:
    field, value = (found["field"], found["value"]) if found["field"] else (found["call"], found["given"])
    flag = _FLAGS.get(field)
    if flag is None:  # no option sets it here (compile_timeout_s, gpu_memory_mb): the library's name
        return found[0]
    if flag == "--network":
        return "--no-network" if value == "False" else flag
    return f"{flag} {value}" if value else flag


def as_flags(text: str) -> str:
    """``text`` (a result's notes, an error) with the ``Limits`` fields it
    names as the options that set them here: ``Timeout after 10 s
    (Limits.timeout_s=10)`` becomes ``Timeout after 10 s (--timeout 10)``."""
    return _SAID_TWICE.sub(r"\1", _FIELD.sub(_flag, text))

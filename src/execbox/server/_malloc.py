"""A server process's big freed buffers given back to the system (glibc).

glibc's ``malloc`` serves a request of ``M_MMAP_THRESHOLD`` (128 KiB) or
more with a mapping of its own, unmapped when freed; but each such free
raises that threshold to the freed size (up to 32 MiB), so that from then
on buffers of a MiB come from the heap, whose freed middle is never given
back. The server handles a block's output in such buffers (the captures,
the result's texts, an answer's JSON, each up to the cap): its resident
memory then keeps the peak of every flood (security issue 39, measured on
``tests/server/test_output_memory.py``'s 20 floods under a 1 MiB cap in four
sessions: 45 -> 114 MiB resident, 45 -> 69 MiB with the threshold held).
``give_back_big_frees`` holds it at 128 KiB, as ``MALLOC_MMAP_THRESHOLD_=131072``
would: a buffer that big costs a mapping (a system call, its pages' faults)
and is given back when freed. Elsewhere than glibc, or when the operator
set ``MALLOC_MMAP_THRESHOLD_`` (theirs wins), nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["give_back_big_frees"]

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
THRESHOLD = 128 << 10


def give_back_big_frees() -> bool:
    """Hold this process's mmap threshold at 128 KiB; whether it was."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, libc's among them
        libc.gnu_get_libc_version  # noqa: B018 - glibc's alone (musl's mallopt does nothing)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD))

"""Languages execbox knows it does not run, and why: an UnsupportedLanguage
result (and ``/run_code``'s refusal) names the reason beside what runs.

Each is one that model-written code (veRL's and SandboxFusion's language
names among it) asks for, whose toolchain Debian 12 does not package, or
packages too large or too old to be worth a jail's read-only bind."""

from __future__ import annotations

__all__ = ["UNSERVED", "why_unserved"]

_NO_DEBIAN = "Debian 12 packages no {} toolchain"
UNSERVED: dict[str, str] = {
    "julia": _NO_DEBIAN.format("Julia"),
    "swift": _NO_DEBIAN.format("Swift"),
    "lean": _NO_DEBIAN.format("Lean 4"),
    "cuda": "CUDA needs NVIDIA's toolkit (nvcc, non-free) and a GPU",
    "python_gpu": "a GPU Python runtime is not part of execbox's environment",
    "racket": "Debian's racket is ~340 MB installed",
    "kotlin": "Debian's kotlin is 1.3 and ~290 MB installed",
    "scala": "Debian's scala is 2.11, which does not run on Debian's JDK 17",
    "jest": "Debian's jest runs no TypeScript test file without a Babel project",
    "verilog": "no Verilog mode yet",
    "sql": "no SQL mode yet",
}
_ALIASES = {
    "kotlin_script": "kotlin",
    "kt": "kotlin",
    "kts": "kotlin",
    "jl": "julia",
    "rkt": "racket",
    "lean4": "lean",
    "cu": "cuda",
    "v": "verilog",
    "systemverilog": "verilog",
}


def why_unserved(name: str) -> str | None:
    """Why execbox runs no ``name`` (a language it knows of), else None."""
    key = name.strip().lower()
    return UNSERVED.get(_ALIASES.get(key, key))

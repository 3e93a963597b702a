"""SandboxFusion's language names (``/run_code``'s ``language``; veRL's
list is the same 29): those this server serves, as the language of
execbox's table that runs them, and the refusal for the rest.

A test-framework mode runs the block as SandboxFusion runs it: ``pytest``
is the code as a test file given to pytest (success: every test passed,
pytest's exit status 0; its report is the stdout). A name not served
answers ``SandboxError`` (SandboxFusion's answer where it has no runner
for a language) with what is served, and why not this one where execbox
knows (``execbox._unserved``)."""

from __future__ import annotations

from .._unserved import why_unserved

__all__ = ["SANDBOX_FUSION_LANGUAGES", "SANDBOX_FUSION_NAMES", "refusal"]

SANDBOX_FUSION_LANGUAGES = {
    "python": "python",
    "cpp": "cpp",
    "go": "go",
    "java": "java",
    "nodejs": "javascript",
    "typescript": "typescript",
    "rust": "rust",
    "bash": "bash",
    "php": "php",
    "lua": "lua",
    "R": "r",
    "perl": "perl",
    "ruby": "ruby",
    "pytest": "pytest",  # the code a test file, given to pytest
    "D_ut": "d",  # built with its unittest blocks, run before main
    "csharp": "csharp",  # Mono's compiler: C# 7, no top-level statements
}
# every name SandboxFusion's API takes (its Language type; veRL's SUPPORTED_LANGUAGES)
SANDBOX_FUSION_NAMES = (
    "python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash", "typescript", "sql",
    "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest", "junit",
    "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket",
)  # fmt: skip
_WHY = {
    "go_test": "no go test mode yet",
    "junit": "no JUnit mode yet",
}


def refusal(name: str) -> str:
    """``/run_code``'s message for a language it does not serve."""
    why = _WHY.get(name) or why_unserved(name)
    known = (
        "one of SandboxFusion's languages" if name in SANDBOX_FUSION_NAMES else "not a SandboxFusion language"
    )
    reason = f" ({why})" if why else ""
    return (
        f"language {name!r} is not served here: {known}{reason}. This server serves "
        f"{', '.join(SANDBOX_FUSION_LANGUAGES)} (where its backend has the toolchain)"
    )

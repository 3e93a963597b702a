"""The compiled languages' rows of the language table (``_languages``):
how each is built (``Build``: once per source and toolchain, in the jail)
and its program run. TypeScript is built by esbuild where it is installed
(its types stripped, none checked), else by tsc (``Build.fallback``)."""

from __future__ import annotations

import re

from ._language_model import Build, Language

__all__ = ["COMPILED_LANGUAGES"]

# TypeScript's compiler knows no Node.js names without @types/node, which Debian does not package.
_NODE_GLOBALS = (
    "declare var require: any, process: any, module: any, exports: any, Buffer: any;\n"
    "declare var __dirname: string, __filename: string;\n"
)

# a name short enough to be a file's (a longer one is no class javac takes from a file anyway)
_JAVA_PUBLIC = re.compile(r"^\s*public\s+(?:final\s+|abstract\s+)*class\s+([A-Za-z_$][\w$]{0,199})\b", re.M)


def _java_class(code: str) -> str:
    """The class javac wants the file named after (its public class), else ``Main``."""
    found = _JAVA_PUBLIC.search(code)
    return found.group(1) if found else "Main"


COMPILED_LANGUAGES: tuple[Language, ...] = (
    Language(
        "c",
        ("h",),
        ".c",
        "execute",
        install_hint="apt-get install gcc",
        build=Build(
            ("gcc", "-O2", "-std=gnu17", "-pipe", "-o", "{dir}/main", "{src}", "-lm"), ("{dir}/main",)
        ),
        version=("gcc", "-dumpfullversion"),
        package="gcc",
    ),
    Language(
        "cpp",
        ("c++", "cxx", "cc", "hpp"),
        ".cpp",
        "execute",
        install_hint="apt-get install g++",
        other_suffixes=(".cc", ".cxx"),
        build=Build(("g++", "-O2", "-std=gnu++17", "-pipe", "-o", "{dir}/main", "{src}"), ("{dir}/main",)),
        version=("g++", "-dumpfullversion"),
        package="g++",
    ),
    Language(
        "go",
        ("golang",),
        ".go",
        "execute",
        install_hint="apt-get install golang-go",
        build=Build(
            ("go", "build", "-o", "{dir}/main", "{src}"),
            ("{dir}/main",),
            # the executor's own build cache: never shared with another executor's blocks
            env=(
                ("GOCACHE", "{cache}/build"),
                ("GOPATH", "{cache}/path"),
                ("HOME", "/tmp"),
                ("GO111MODULE", "off"),
                ("GOTOOLCHAIN", "local"),
                ("CGO_ENABLED", "0"),
            ),
            cache=True,
        ),
        version=("go", "version"),
        package="golang-go",
        reserves_address_space=True,
    ),
    Language(
        "rust",
        ("rs",),
        ".rs",
        "execute",
        install_hint="apt-get install rustc",
        build=Build(("rustc", "-O", "--edition", "2021", "-o", "{dir}/main", "{src}"), ("{dir}/main",)),
        version=("rustc", "--version"),
        package="rustc",
    ),
    Language(
        "java",
        (),
        ".java",
        "execute",
        install_hint="apt-get install default-jdk-headless",
        build=Build(
            # its own folder as the class path, no annotation processor: nothing of the workspace's runs
            (
                "javac",
                "-encoding",
                "UTF-8",
                "-proc:none",
                "-implicit:none",
                "-cp",
                "{dir}",
                "-d",
                "{dir}",
                "{src}",
            ),
            # a small code cache and class space: the JVM starts under a 1 GiB RLIMIT_AS too
            # (the stand-in for a memory cgroup), where by default it reserves more than that
            (
                "java",
                "-XX:+UseSerialGC",
                "-XX:ReservedCodeCacheSize=32m",
                "-XX:CompressedClassSpaceSize=64m",
                "-cp",
                "{dir}",
                "{main}",
            ),
            env=(("HOME", "/tmp"),),
            main="Main",
            main_of=lambda code: _java_class(code),
        ),
        version=("javac", "-version"),
        package="default-jdk-headless",
        etc=("/etc/java-17-openjdk", "/etc/java-21-openjdk"),
        reserves_address_space=True,
        # its heap sized for the limit (a quarter of it), not for the machine: the initial heap it
        # commits at start (1/64 of the machine's memory) would be past RLIMIT_DATA on a large one
        memory_option="-XX:MaxRAM={mb}m",
    ),
    Language(
        "typescript",
        ("ts", "tsx"),
        ".ts",
        "execute",
        install_hint="apt-get install esbuild nodejs (or node-typescript: tsc, seconds a compile)",
        # esbuild strips the types (milliseconds) and checks none, as tsx, ts-node --transpile-only
        # and Node.js's own type stripping do; tsc (seconds a compile) where esbuild is not installed
        build=Build(
            (
                "esbuild",
                "{src}",
                "--outfile={dir}/main.js",
                "--format=cjs",
                "--platform=node",
                "--target=es2020",
                "--tsconfig={dir}/tsconfig.json",  # its own: none of the workspace's is read
                "--log-level=warning",
                "--color=false",
            ),
            ("node", "{dir}/main.js"),
            files=(("tsconfig.json", "{}\n"),),
            fallback=Build(
                (
                    "tsc",
                    "--target",
                    "es2020",
                    "--module",
                    "commonjs",
                    "--outDir",
                    "{dir}",
                    "{src}",
                    "{dir}/node.d.ts",
                ),
                ("node", "{dir}/main.js"),
                files=(("node.d.ts", _NODE_GLOBALS),),
                version=("tsc", "--version"),
            ),
        ),
        version=("esbuild", "--version"),
        package="esbuild nodejs",
        reserves_address_space=True,
    ),
    Language(
        "d",
        ("dlang", "gdc"),
        ".d",
        "execute",
        install_hint="apt-get install gdc",
        # its unittest blocks built in, as SandboxFusion's D_ut builds them (dmd -unittest), and run
        # before main (a failed one: exit status 1, main not run); druntime takes its option away
        build=Build(
            ("gdc", "-O2", "-funittest", "-pipe", "-o", "{dir}/main", "{src}"),
            ("{dir}/main", "--DRT-testmode=run-main"),
        ),
        version=("gdc", "-dumpfullversion"),
        package="gdc",
    ),
    Language(
        "csharp",
        ("c#", "cs", "mono"),
        ".cs",
        "execute",
        install_hint="apt-get install mono-mcs",
        # Mono's compiler (C# 7: no top-level statements), its program run by Mono
        build=Build(
            ("mcs", "-optimize+", "-nologo", "-out:{dir}/main.exe", "{src}"),
            ("mono", "{dir}/main.exe"),
            env=(("HOME", "/tmp"),),
        ),
        version=("mcs", "--version"),
        package="mono-mcs",
        etc=("/etc/mono",),
        reserves_address_space=True,
    ),
)

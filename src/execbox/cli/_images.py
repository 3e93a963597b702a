"""``execbox images build`` and ``execbox images list``: the docker
backend's images, built locally."""

from __future__ import annotations

import argparse
import json

from ._progress import progress_printer


def register(commands: argparse._SubParsersAction) -> None:
    images = commands.add_parser("images", help="build and list images for the docker backend")
    verbs = images.add_subparsers(dest="verb", metavar="VERB", required=True)

    build = verbs.add_parser(
        "build",
        help="build an image (default: the base image, Debian + Python, from a debootstrap rootfs)",
        description="Build an image locally; no registry is needed. Without options: the base image. "
        "Tags are content-addressed, so a spec is built once; the tag is printed.",
    )
    build.add_argument(
        "-p",
        "--package",
        action="append",
        default=[],
        metavar="REQ",
        help="a pip package to install (repeatable), from a wheelhouse filled by pip download",
    )
    build.add_argument("-r", "--requirements", metavar="FILE", help="a requirements file to install")
    build.add_argument(
        "-f",
        "--dockerfile",
        metavar="FILE",
        help="build this Dockerfile (its folder is the context; FROM execbox/base:latest)",
    )
    build.add_argument("--base", metavar="IMAGE", help="the image to install packages on (default: the base)")
    build.add_argument(
        "--jupyter",
        action="store_true",
        help="the Kernel Gateway image of DockerJupyterServer (plus any --package)",
    )
    build.add_argument(
        "--languages",
        metavar="LANGS",
        help="a base image with these languages' toolchains, from Debian (c,cpp,go,... or all)",
    )
    build.add_argument("--rebuild", action="store_true", help="build even if the tag exists")
    build.set_defaults(handler=run_build)

    listing = verbs.add_parser("list", help="the images execbox built")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(handler=run_list)


def run_build(args: argparse.Namespace) -> int:
    from ..images import ImageSpec, build_image

    show = progress_printer()
    if args.jupyter:
        from ..backends.jupyter._docker_server import jupyter_spec

        spec: ImageSpec | None = jupyter_spec(packages=args.package, base=args.base)
    elif args.package or args.requirements or args.dockerfile or args.base:
        spec = ImageSpec(
            packages=tuple(args.package),
            requirements=args.requirements,
            dockerfile=args.dockerfile,
            base=args.base,
        )
    else:
        spec = None
    languages = [name.strip() for name in (args.languages or "").split(",") if name.strip()]
    tag = build_image(spec, on_progress=show, rebuild=args.rebuild, languages=languages)
    print(tag)
    return 0


def run_list(args: argparse.Namespace) -> int:
    from ..images import list_images

    found = list_images()
    if args.json:
        print(json.dumps([info.__dict__ for info in found], indent=2))
        return 0
    if not found:
        print("no execbox images: build one with `execbox images build`")
        return 0
    width = max(len(", ".join(info.tags)) for info in found)
    for info in found:
        print(f"{', '.join(info.tags):<{width}}  {info.kind:<8} {info.size_mb:>8.1f} MB  {info.created}")
    return 0

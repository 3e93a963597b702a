"""Images built locally (no registry) and the DockerPython environment."""

from __future__ import annotations

import pytest

from execbox import (
    CodeBlock,
    ConfigurationError,
    DockerExecutor,
    DockerPython,
    EnvironmentSetupError,
    LocalExecutor,
)
from execbox.cli import main
from execbox.images import BASE_ALIAS, ImageSpec, base_tag, build_image, list_images
from tests.conftest import require_docker


@pytest.fixture
def docker_ready():
    require_docker()


def test_tags_are_content_addressed(tmp_path):
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("six\n")
    a = ImageSpec(packages=["six", "idna"])
    assert a.tag == ImageSpec(packages=["idna", "six"]).tag  # order does not matter
    assert a.tag != ImageSpec(packages=["six"]).tag
    with_reqs = ImageSpec(requirements=str(reqs)).tag
    reqs.write_text("six==1.16.0\n")
    assert ImageSpec(requirements=str(reqs)).tag != with_reqs  # the file's text counts
    assert a.tag.startswith("execbox/python:") and base_tag().startswith("execbox/base:")


def test_spec_errors_name_the_fix(tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        ImageSpec(requirements=str(tmp_path / "none.txt"))
    with pytest.raises(ConfigurationError, match="list of requirement strings"):
        ImageSpec(packages="numpy")  # type: ignore[arg-type]
    (tmp_path / "Dockerfile").write_text("FROM execbox/base:latest\n")
    with pytest.raises(ConfigurationError, match="not both"):
        ImageSpec(dockerfile=str(tmp_path), packages=["six"])


def test_docker_python_with_packages(docker_ready, tmp_path):
    env = DockerPython(pip_packages=["matplotlib"])  # built by ./dev.sh; built here otherwise
    with DockerExecutor(workspace=tmp_path / "ws", environment=env) as ex:
        result = ex.run(
            CodeBlock(
                "python",
                (
                    "import matplotlib.pyplot as plt\n"
                    "plt.plot([1, 2, 3]); plt.savefig('plot.png'); print('saved')"
                ),
            )
        )
    assert result.exit_code == 0, result.output
    assert result.output == "saved\n" and "plot.png" in result.files
    assert (tmp_path / "ws" / "plot.png").read_bytes()[:4] == b"\x89PNG"


def test_wheelhouse_build_is_done_once(docker_ready, tmp_path):
    spec = ImageSpec(packages=["six==1.16.0"])
    steps: list[str] = []
    tag = build_image(spec, on_progress=steps.append)
    again: list[str] = []
    assert build_image(spec, on_progress=again.append) == tag
    assert not any(step.startswith("building") for step in again)  # the tag existed
    with DockerExecutor(workspace=tmp_path / "ws", image=tag) as ex:
        result = ex.run(CodeBlock("python", "import six; print(six.__version__)"))
    assert result.output == "1.16.0\n"
    assert tag in {t for info in list_images() for t in info.tags}


def test_user_dockerfile(docker_ready, tmp_path):
    folder = tmp_path / "image"
    folder.mkdir()
    (folder / "hello.txt").write_text("from the build context\n")
    (folder / "Dockerfile").write_text(f"FROM {BASE_ALIAS}\nCOPY hello.txt /opt/hello.txt\n")
    env = DockerPython(dockerfile=str(folder / "Dockerfile"))
    with DockerExecutor(workspace=tmp_path / "ws", environment=env) as ex:
        result = ex.run(CodeBlock("sh", "cat /opt/hello.txt"))
    assert env.tag is not None and env.tag.startswith("execbox/custom:")
    assert result.output == "from the build context\n"


def test_dockerfile_from_an_unreachable_registry(docker_ready, tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM registry.invalid/nothing:1\n")
    with pytest.raises(EnvironmentSetupError, match="build FROM execbox/base:latest"):
        build_image(ImageSpec(dockerfile=str(tmp_path / "Dockerfile")))


def test_unknown_package_is_a_clear_error(docker_ready):
    with pytest.raises(EnvironmentSetupError, match="could not download wheels"):
        build_image(ImageSpec(packages=["execbox-no-such-package-xyz"]))


def test_docker_python_is_not_a_host_interpreter(tmp_path):
    with pytest.raises(ConfigurationError, match="DockerExecutor"):
        with LocalExecutor(workspace=tmp_path / "ws", environment=DockerPython()) as ex:
            ex.run(CodeBlock("python", "print(1)"))


def test_cli_build_and_list(docker_ready, capsys):
    assert main(["images", "build"]) == 0
    assert capsys.readouterr().out.strip() == base_tag()
    assert main(["images", "list"]) == 0
    listing = capsys.readouterr().out
    assert base_tag() in listing and "base" in listing

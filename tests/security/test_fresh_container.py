"""The newcomer's scenario (issue 40), for real: a minimal Debian bookworm
container started with the engine's defaults (no flag that changes its
confinement), root, this checkout copied into /root/execbox (0700, as a
clone into root's home leaves it), the README's ``./dev.sh run`` as
written, then ``execbox doctor`` (scripts/fresh-container.sh does each step).

Seen before: ``./dev.sh run`` and ``execbox doctor`` both died with
``SubprocessError: Exception occurred in preexec_fn`` (the jail id could not
reach the venv under /root, and root there may make no mount namespace).

Then the doctor's container advice, tested: a container started with the
options it names gets the namespaces tier.

``./dev.sh test --fast`` in such a container takes tens of minutes: run
``scripts/fresh-container.sh test-fast`` by hand; here a handful of fast
tests run in it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from execbox.jail._container import (
    FULL_ISOLATION,
    FULL_ISOLATION_OPTIONS,
    NETWORK_ISOLATION,
    NETWORK_OPTIONS,
)
from tests.conftest import require, require_docker

CHECKOUT = Path(__file__).resolve().parents[2]
SCRIPT = CHECKOUT / "scripts" / "fresh-container.sh"
IMAGE = os.environ.get("FRESH_IMAGE", "execbox/fresh-debian:bookworm-1")
WAIT_S = 1500

# After ./dev.sh run: the doctor's JSON, Limits(network=True) (refused in the
# Landlock tier), a few fast tests with pytest added to the run venv.
CHECKS = r"""
.venv/bin/execbox doctor --json > /tmp/doctor.json; echo "DOCTOR-EXIT $?"
.venv/bin/python -c 'import json; print("DOCTOR", json.dumps(json.load(open("/tmp/doctor.json"))))'
.venv/bin/python - <<'EOF'
import warnings
from execbox import BackendUnavailableError, CodeBlock, Limits, SandboxExecutor
warnings.simplefilter("ignore")
try:
    with SandboxExecutor(limits=Limits(network=True)) as ex:
        print("NETWORK ran", ex.isolation_in_use, repr(ex.run(CodeBlock("python", "print(1)")).output))
except BackendUnavailableError as exc:
    print("NETWORK refused", str(exc).replace("\n", " "))
EOF
"""
TESTS = r"""
.venv/bin/python -m pip install -q --disable-pip-version-check 'pytest>=8' 'pytest-timeout>=2' >/dev/null
.venv/bin/python -m pytest -q -p no:cacheprovider -rs {tests}; echo "TESTS-EXIT $?"
"""
# fast tests that need only the run venv (and pytest): the sandbox's start and the doctor; the
# Landlock tier's daemons (seen before: without procps's kill(1), not in a minimal Debian, a
# daemon outlived its block where no cgroup is)
FRESH_TESTS = (
    "tests/backends/test_sandbox_no_mounts.py tests/cli/test_doctor.py tests/test_extract.py "
    "tests/security/test_processes.py -k 'landlock or no_mounts or doctor or extract'"
)


def _image() -> None:
    require_docker()
    done = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, timeout=60)
    if done.returncode != 0:
        can_build = os.geteuid() == 0 and shutil.which("debootstrap", path="/usr/sbin:/usr/bin") is not None
        require("the fresh Debian image", can_build, f"no {IMAGE}; building it needs root and debootstrap")
        built = subprocess.run([str(SCRIPT), "image"], capture_output=True, text=True, timeout=WAIT_S)
        assert built.returncode == 0, built.stderr[-3000:]


def _scenario(extra_options: str, tests: str) -> tuple[int, str]:
    began = time.monotonic()
    done = subprocess.run(
        [str(SCRIPT), "run", "--", CHECKS + (TESTS.format(tests=tests) if tests else "")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # in order: what each command printed comes before its FRESH-RESULT
        text=True,
        timeout=WAIT_S,
        cwd=CHECKOUT,
        env={**os.environ, "EXTRA_DOCKER_OPTS": extra_options, "FRESH_IMAGE": IMAGE},
    )
    out = done.stdout
    print(f"\nthe scenario ({time.monotonic() - began:.0f} s):\n{out[-6000:]}")
    return done.returncode, out


def _line(out: str, prefix: str) -> str:
    found = [line.removeprefix(prefix) for line in out.splitlines() if line.startswith(prefix)]
    assert found, f"no line {prefix!r} in:\n{out[-4000:]}"
    return found[-1]


def _doctor(out: str) -> dict:
    assert _line(out, "DOCTOR-EXIT ") == "0", out[-4000:]
    return json.loads(_line(out, "DOCTOR "))


def test_dev_sh_run_and_doctor_in_a_default_container_as_root_with_the_clone_in_root():
    _image()
    status, out = _scenario("", FRESH_TESTS)
    assert "FRESH-RESULT ./dev.sh run exit=0 " in out, out[-4000:]
    assert "primes below 50: [2, 3, 5, 7" in out and "Exception occurred in preexec_fn" not in out, out[
        -4000:
    ]
    # the one-line note: what is weaker, and the docker run options that give full isolation
    run = out[: out.index("FRESH-RESULT ./dev.sh run")]  # what ./dev.sh run printed
    warned = [line for line in run.splitlines() if "WeakerIsolationWarning" in line]
    assert len(warned) == 1 and "Landlock tier" in warned[0] and FULL_ISOLATION in warned[0], warned
    report = _doctor(out)
    assert report["root"] and report["tier"] == "landlock", report
    findings = {f["name"]: f for f in report["findings"]}
    assert findings["the Landlock tier starts"]["ok"], findings
    inside = findings["inside a container"]
    assert not inside["ok"] and FULL_ISOLATION in inside["fix"], inside
    network = _line(out, "NETWORK ")
    assert network.startswith("refused ") and NETWORK_ISOLATION in network, network
    summary = _line(out, "TESTS-EXIT ")
    assert summary == "0", out[-6000:]
    assert status == 0, out[-4000:]


def test_the_doctors_container_advice_gives_the_namespaces_tier():
    _image()
    status, out = _scenario(" ".join(FULL_ISOLATION_OPTIONS), "")
    assert "FRESH-RESULT ./dev.sh run exit=0 " in out and "WeakerIsolationWarning" not in out, out[-4000:]
    report = _doctor(out)
    assert report["tier"] == "namespaces", report
    findings = {f["name"]: f for f in report["findings"]}
    assert findings["the namespaces tier starts"]["ok"] and findings["the warm pool serves blocks"]["ok"], (
        findings
    )
    assert findings["inside a container"]["ok"], findings
    # the network on needs more of the container (the egress namespace): the refusal says what
    network = _line(out, "NETWORK ")
    assert network.startswith("refused ") and NETWORK_ISOLATION in network, network
    assert status == 0, out[-4000:]


def test_the_network_options_give_blocks_the_network_on():
    _image()
    status, out = _scenario(" ".join((*FULL_ISOLATION_OPTIONS, *NETWORK_OPTIONS)), "")
    assert "FRESH-RESULT ./dev.sh run exit=0 " in out, out[-4000:]
    assert _line(out, "NETWORK ") == "ran namespaces '1\\n'", out[-4000:]
    assert status == 0, out[-4000:]

"""Python environments a block runs in: the system interpreter or a venv."""

from ._base import Environment, OnProgress, Progress
from ._docker import DockerPython
from ._options import register_environment_options
from ._system import SystemPython
from ._venv import Venv

__all__ = ["DockerPython", "Environment", "OnProgress", "Progress", "SystemPython", "Venv"]

register_environment_options()  # a saved config names them; _codec learns them here

"""Python environments a block runs in: the system interpreter or a venv."""

from ._base import Environment, Progress
from ._system import SystemPython
from ._venv import Venv

__all__ = ["Environment", "Progress", "SystemPython", "Venv"]

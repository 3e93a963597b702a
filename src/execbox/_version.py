"""The version of execbox (also in pyproject.toml), importable without the package."""

__version__ = "0.1.0"

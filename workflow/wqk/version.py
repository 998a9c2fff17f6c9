"""The package version when it is not installed (pyproject.toml holds the same number)."""

__version__ = "0.1.0"

"""Typed errors. The CLI turns each into one ``Error: ...`` line and an exit code."""

from __future__ import annotations


class DwstokError(Exception):
    """Base of every error dwstok raises for a user's mistake or bad input."""

    exit_code = 1


class ModelFileError(DwstokError):
    """A model artifact is missing, corrupted, truncated or fails its hash check."""


class PatternMismatchError(DwstokError):
    """An artifact was built with another pretokenizer pattern or version than expected."""


class InputError(DwstokError):
    """A corpus file or document cannot be read (names the file and position)."""


class ConfigError(DwstokError):
    """A YAML config has an unknown key, a wrong type or a bad value."""

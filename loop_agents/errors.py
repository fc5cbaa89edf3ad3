"""Errors every layer may raise; kept here so that the lowest packages need nothing above them."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is out of range or inconsistent; the message names the key."""


class CheckpointError(RuntimeError):
    """A checkpoint could not be written (full disk, unwritable directory) or read (corrupted, other model)."""


class CachedModelMismatch(ValueError):
    """A model cached in the run directory (tiny base or warm start) was built by another preset or settings."""


class LostWorkError(RuntimeError):
    """An iteration lost more of its episodes than `collect.max_lost_fraction` allows (or finished none)."""

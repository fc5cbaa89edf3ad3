"""Errors every layer may raise; kept here so that the lowest packages need nothing above them."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is out of range or inconsistent; the message names the key."""

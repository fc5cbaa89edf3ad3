"""`key=value` command lines of the eval scripts: the script's own keys, everything else a Hydra override.

    python scripts/evaluate.py checkpoint=runs/x split=dev runs=5 env.concurrency=4
                               ^^^^^^^^^^^^^^^^^ own keys ^^^^^^^ ^^^ Hydra override ^^^
Own keys never collide with the config's top-level keys (run, llm, env, eval, ...). A bad value is one
line on stderr and exit status 2, like a config error.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class UsageError(ValueError):
    """A bad command line or input path; printed as one line, exit status 2."""


def _convert(key: str, raw: str, kind: type) -> Any:
    if kind is bool:
        if raw.lower() in TRUE:
            return True
        if raw.lower() in FALSE:
            return False
        raise UsageError(f"{key}={raw!r} is not a boolean (true/false)")
    if kind is int:
        try:
            return int(raw)
        except ValueError:
            raise UsageError(f"{key}={raw!r} is not an integer") from None
    return raw


def parse_args(
    argv: Sequence[str], keys: Mapping[str, type], doc: str, allow_overrides: bool = True
) -> tuple[dict[str, Any], list[str]]:
    """Split argv into {own key: typed value} and the remaining Hydra overrides (in order).

    `-h`/`--help` prints `doc` and exits 0. A repeated own key keeps the last value.
    """
    values: dict[str, Any] = {}
    overrides: list[str] = []
    for arg in argv:
        if arg in ("-h", "--help"):
            print(doc)
            raise SystemExit(0)
        key, sep, raw = arg.partition("=")
        if sep and key in keys:
            values[key] = _convert(key, raw, keys[key])
        elif allow_overrides and sep:
            overrides.append(arg)
        else:
            expected = ", ".join(f"{k}=" for k in keys)
            raise UsageError(
                f"unexpected argument {arg!r}; expected {expected}"
                + (" or Hydra overrides" if allow_overrides else "")
            )
    return values, overrides


def exit_with(prog: str, message: str) -> NoReturn:
    """Print `<prog>: error: <message>` (first line only) to stderr and exit with status 2."""
    first = next((line for line in str(message).splitlines() if line.strip()), "failed")
    print(f"{prog}: error: {first}", file=sys.stderr)
    raise SystemExit(2)

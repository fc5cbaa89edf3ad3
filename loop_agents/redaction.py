"""Secrets stay out of configs, logs, checkpoints and child processes.

A secret is the value of an environment variable whose name contains KEY, TOKEN, SECRET, PASSWORD or
CREDENTIAL (`WANDB_API_KEY`, `HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`, ...), the value of a config key whose
name has one of those words as a part (`api_key`, `hf_token`; not `max_new_tokens`), or the password of
a URL (`http://user:PASSWORD@host`). `redact` replaces them with `***` in anything we save or print
(the composed config of a run, wandb's config, the learner's checkpoint metadata, `--cfg job`).
`child_environment` gives child servers (vLLM, AppWorld, AgentGym) the parent's environment without the
secret variables: none of them needs one, and what a child cannot see it cannot log.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

REDACTED = "***"
_SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_NOT_SECRET_ENV = frozenset({"TOKENIZERS_PARALLELISM"})  # contains TOKEN, holds true/false
_SECRET_KEY_PARTS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "credential", "credentials", "auth"}
)
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.-]*://[^/:@\s]+:)[^/@\s]+(?P<tail>@)")
_MIN_SECRET_LEN = 6  # shorter values ("1", "true") would redact half of every config


def is_secret_env_name(name: str) -> bool:
    """True for environment variables whose name says they hold a secret (*KEY*, *TOKEN*, *SECRET*, ...)."""
    return name not in _NOT_SECRET_ENV and bool(_SECRET_ENV_NAME.search(name))


def is_secret_key(key: str) -> bool:
    """True for config keys with a secret word as one of their parts (`wandb_api_key`, `token`)."""
    return any(part in _SECRET_KEY_PARTS for part in re.split(r"[_\-.\s]+", str(key).lower()))


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret environment variables (longest first, so overlapping ones redact fully)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_env_name(k) and len(v) >= _MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with every secret env value and URL password replaced by `***`."""
    for value in secret_values(environ):
        text = text.replace(value, REDACTED)
    return _URL_PASSWORD.sub(rf"\g<head>{REDACTED}\g<tail>", text)


def redact(obj: Any, environ: Mapping[str, str] | None = None) -> Any:
    """A copy of a plain config container (dicts, lists, scalars) with every secret replaced by `***`."""
    if isinstance(obj, Mapping):
        return {
            k: (REDACTED if is_secret_key(k) and v not in (None, "") else redact(v, environ))
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return type(obj)(redact(v, environ) for v in obj)
    if isinstance(obj, str):
        return redact_text(obj, environ)
    return obj


def redacted_yaml(cfg: Any) -> str:
    """The YAML of an OmegaConf config (resolved) with secrets redacted: what we print and save."""
    container = OmegaConf.to_container(cfg, resolve=True) if OmegaConf.is_config(cfg) else cfg
    return OmegaConf.to_yaml(OmegaConf.create(redact(container)))


def child_environment(
    extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of a child server: `base` (default: ours) minus secret variables, plus `extra`."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret_env_name(k)}
    env.update(extra or {})
    return env

"""No secret is printed, saved or handed to a child server.

The secret is a fresh random value in an environment variable named like a key (`*_API_KEY`); the
config reaches it through an interpolation, the way a user would wire a key into a config.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from loop_agents.envs.agentgym import EnvServerProcess
from loop_agents.redaction import REDACTED, child_environment, is_secret_env_name, redact, redact_text

ROOT = Path(__file__).resolve().parents[2]


def _secret() -> str:
    return "s14r-" + secrets.token_hex(16)


def test_cfg_job_prints_the_composed_config_redacted() -> None:
    key = _secret()
    password = _secret()
    env = {**os.environ, "LOOP_TEST_API_KEY": key}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "loop_agents.train",
            "--cfg",
            "job",
            "env=agentgym_http",
            f"env.options.url=http://user:{password}@127.0.0.1:9",
            "logging.wandb_entity=${oc.env:LOOP_TEST_API_KEY}",
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert key not in out and password not in out
    assert f"wandb_entity: '{REDACTED}'" in proc.stdout
    assert f"url: http://user:{REDACTED}@127.0.0.1:9" in proc.stdout


def test_redact_covers_secret_keys_env_values_and_url_passwords() -> None:
    key = _secret()
    environ = {"HF_TOKEN": key, "TOKENIZERS_PARALLELISM": "false", "HOME": "/root"}
    config = {
        "logging": {"wandb_api_key": "abc", "wandb_entity": f"team-{key}"},
        "llm": {"max_new_tokens": 256, "name": "tiny"},
        "urls": ["http://u:pw@127.0.0.1:1/x", "http://127.0.0.1:2"],
    }
    assert redact(config, environ) == {
        "logging": {"wandb_api_key": REDACTED, "wandb_entity": f"team-{REDACTED}"},
        "llm": {"max_new_tokens": 256, "name": "tiny"},  # a *_tokens count is not a secret
        "urls": [f"http://u:{REDACTED}@127.0.0.1:1/x", "http://127.0.0.1:2"],
    }
    assert redact_text("false", environ) == "false"  # TOKENIZERS_PARALLELISM is not a secret
    secret_names = ("WANDB_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD")
    assert [n for n in secret_names if not is_secret_env_name(n)] == []  # every one caught, not any one
    assert not is_secret_env_name("TOKENIZERS_PARALLELISM") and not is_secret_env_name("PATH")


@pytest.mark.slow  # a gem hunt env server
def test_child_servers_do_not_inherit_secret_variables(monkeypatch) -> None:
    """A real env server process: its /proc/<pid>/environ has our variables but none of the secrets."""
    key, token = _secret(), _secret()
    monkeypatch.setenv("WANDB_API_KEY", key)
    monkeypatch.setenv("HF_TOKEN", token)
    monkeypatch.setenv("LOOP_TEST_PLAIN", "visible")
    assert "HF_TOKEN" not in child_environment() and child_environment({"A": "1"})["A"] == "1"
    with EnvServerProcess("gemhunt", startup_timeout_s=90) as server:
        raw = Path(f"/proc/{server.process.pid}/environ").read_bytes().decode()
    names = {entry.split("=", 1)[0] for entry in raw.split("\0") if entry}
    assert "LOOP_TEST_PLAIN" in names and "PYTHONUNBUFFERED" in names
    assert not {"WANDB_API_KEY", "HF_TOKEN"} & names
    assert key not in raw and token not in raw

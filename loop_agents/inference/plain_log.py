"""A vLLM server's log as plain lines: no progress-bar redraws, no '\\r', no colour codes.

The server's stdout and stderr are a file (`ServerProcess`), so what a terminal would redraw in place ends up
in it as '\\r'-separated fragments: the weight-loading bar (turned off by `--no-use-tqdm-on-load`, see
`server_command`), other tqdm and Hugging Face bars (`PLAIN_ENV`), and vLLM's own '\\r\\n' between the lines of a
multi-line message (its formatter, replaced through `VLLM_LOGGING_CONFIG_PATH` by the one in
server_site/plain_vllm_log.py). What the server is doing while it starts is said by the trainer's plain
'[vLLM] starting, 20 s: <stage>' lines (`inference/startup_stage.py`).
"""

from __future__ import annotations

import json
from pathlib import Path

from loop_agents.progress_lines import PLAIN_ENV

FORMATTER = "plain_vllm_log.PlainNewLineFormatter"
# vLLM's own default format (vllm/logger.py), with the prefix VLLM_LOGGING_PREFIX would add left out
FORMAT = (
    "(%(vllm_process_name)s pid=%(process)d) %(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s"
)
DATE_FORMAT = "%m-%d %H:%M:%S"


def logging_config(level: str) -> dict:
    """vLLM's default logging config with the plain formatter (a dictConfig)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"()": FORMATTER, "datefmt": DATE_FORMAT, "format": FORMAT}},
        "handlers": {
            "vllm": {
                "class": "logging.StreamHandler",
                "formatter": "plain",
                "level": level,
                "stream": "ext://sys.stdout",
            }
        },
        "loggers": {"vllm": {"handlers": ["vllm"], "level": level, "propagate": False}},
    }


def plain_log_environment(env: dict[str, str], log_path: Path) -> dict[str, str]:
    """`env` for a server writing `log_path`, plus what keeps that log plain. A logging config the caller set
    (`VLLM_LOGGING_CONFIG_PATH`) or logging turned off (`VLLM_CONFIGURE_LOGGING=0`) is left as it is; the config
    written here sits beside the log (`<log>.logging.json`), at the level of `VLLM_LOGGING_LEVEL`."""
    env = {**env, **{k: v for k, v in PLAIN_ENV.items() if k not in env}}
    if env.get("VLLM_LOGGING_CONFIG_PATH") or env.get("VLLM_CONFIGURE_LOGGING", "1") == "0":
        return env
    if env.get("VLLM_LOGGING_PREFIX"):
        return env  # vLLM's own format carries the prefix; keep it
    config_path = log_path.with_suffix(".logging.json")
    config_path.write_text(
        json.dumps(logging_config(env.get("VLLM_LOGGING_LEVEL", "INFO").upper()), indent=1)
    )
    env["VLLM_LOGGING_CONFIG_PATH"] = str(config_path)
    return env

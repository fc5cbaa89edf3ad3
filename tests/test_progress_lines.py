"""Progress lines: durations, rates, ETA, the at-most-every-10-s rule, and plain text (no ANSI) in files."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time

import pytest

from loop_agents.progress_lines import (
    PLAIN_ENV,
    Heartbeat,
    Ticker,
    eta_seconds,
    format_duration,
    format_rate,
    plain_output_off_a_terminal,
    progress_text,
    strip_ansi,
)


def test_format_duration():
    assert format_duration(7.4) == "7 s"
    assert format_duration(185) == "3 min 05 s"
    assert format_duration(3720) == "1 h 02 min"
    assert format_duration(-3) == "0 s"


def test_format_rate_switches_to_minutes_when_slow():
    assert format_rate(30, 10, "episodes") == "3.0 episodes/s"
    assert format_rate(3, 60, "steps") == "3.0 steps/min"
    assert format_rate(0, 10, "steps") == "- steps/s"


def test_eta_at_the_mean_rate():
    assert eta_seconds(25, 100, 10.0) == 30.0
    assert eta_seconds(0, 100, 10.0) is None
    assert progress_text(30, 120, 15.0, "episodes") == "30/120 episodes (25 %), 2.0 episodes/s, ETA 45 s"
    assert progress_text(120, 120, 60.0, "episodes").endswith("done in 1 min 00 s")


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_ticker_prints_at_most_every_interval_and_once_at_the_end():
    clock, lines = FakeClock(), []
    ticker = Ticker("eval", 100, "episodes", every_s=10, out=lines.append, clock=clock)
    for done in range(1, 100):  # 99 updates over 24.75 s
        clock.now = done * 0.25
        ticker.update(done)
    clock.now = 25.0
    ticker.update(100)
    ticker.update(100)  # after the end: nothing more
    assert lines == [
        "[eval] 40/100 episodes (40 %), 4.0 episodes/s, ETA 15 s",
        "[eval] 80/100 episodes (80 %), 4.0 episodes/s, ETA 5 s",
        "[eval] 100/100 episodes (100 %), 4.0 episodes/s, done in 25 s",
    ]


def test_ticker_is_silent_for_quick_work():
    clock, lines = FakeClock(), []
    ticker = Ticker("eval", 10, "episodes", every_s=10, out=lines.append, clock=clock)
    for done in range(1, 11):
        clock.now = done * 0.5
        ticker.update(done)
    assert lines == []


def test_heartbeat_names_the_stage_and_survives_a_failing_one():
    lines = []
    with Heartbeat(
        "vLLM", "starting", stage=lambda: "loading the model weights", every_s=0.05, out=lines.append
    ):
        time.sleep(0.2)
    assert lines and lines[0].startswith("[vLLM] starting, 0 s: loading the model weights")

    def broken() -> str:
        raise OSError("log gone")

    assert Heartbeat("vLLM", "starting", stage=broken).line(12) == "[vLLM] starting, 12 s"


def test_strip_ansi():
    assert strip_ansi("\x1b[36m(pid=1)\x1b[0m hello\x1b[2K") == "(pid=1) hello"


def test_lines_written_to_a_file_hold_no_ansi(tmp_path):
    """A real process printing through the helpers into a file (not a terminal): plain text only."""
    script = (
        "from loop_agents.progress_lines import Ticker, Heartbeat\n"
        "import time\n"
        "t = Ticker('warm start epoch 1', 3, 'steps', every_s=0.0)\n"
        "for i in (1, 2, 3): t.update(i)\n"
        "with Heartbeat('vLLM', 'starting', stage=lambda: 'importing vLLM', every_s=0.05):\n"
        "    time.sleep(0.2)\n"
    )
    log = tmp_path / "run.log"
    with log.open("w") as out:
        subprocess.run([sys.executable, "-c", script], stdout=out, stderr=subprocess.STDOUT, check=True)
    text = log.read_text()
    assert "[warm start epoch 1] 3/3 steps (100 %)" in text and "[vLLM] starting" in text
    assert "\x1b" not in text


_SAVE_AND_LOAD = (
    "import sys\n"
    "from loop_agents.progress_lines import plain_output_off_a_terminal\n"
    "if sys.argv[2] == 'plain': plain_output_off_a_terminal()\n"
    "from transformers import AutoModelForCausalLM\n"
    "from loop_agents.tiny_model import build_tiny_model\n"
    "AutoModelForCausalLM.from_pretrained(build_tiny_model(sys.argv[1]))\n"
)


@pytest.mark.parametrize("mode", ["plain", "library default"])
def test_model_save_and_load_into_a_file_hold_no_bars(tmp_path, mode):
    """A real process saving and loading a model (transformers' 'Writing model shards' and 'Loading weights'
    bars) with its output in a file: plain lines only once `plain_output_off_a_terminal` ran, as the trainer does
    first (issue 40: the logs held '\\r'-separated bar redraws). Without it the bars are there: the check can fail."""
    log = tmp_path / "run.log"
    env = {k: v for k, v in os.environ.items() if k not in PLAIN_ENV}
    with log.open("w") as out:
        subprocess.run(
            [sys.executable, "-c", _SAVE_AND_LOAD, str(tmp_path / "model"), mode.split()[0]],
            stdout=out, stderr=subprocess.STDOUT, env=env, check=True, timeout=300,
        )  # fmt: skip
    text = log.read_bytes().decode()  # read_text() would turn each '\r' into '\n'
    if mode == "plain":
        assert "\r" not in text and "\x1b" not in text, repr(text[-2000:])
    else:
        assert "\rLoading weights" in text


def test_plain_output_leaves_a_terminal_and_the_callers_settings_alone():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    environ: dict[str, str] = {}
    assert plain_output_off_a_terminal(Terminal(), environ) is False and environ == {}
    environ = {"TQDM_DISABLE": "0"}
    assert plain_output_off_a_terminal(io.StringIO(), environ) is True
    assert environ == {**PLAIN_ENV, "TQDM_DISABLE": "0"}

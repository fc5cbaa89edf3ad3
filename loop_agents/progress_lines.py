"""Plain progress lines for the places a person waits (a terminal or a log file alike).

One line per activity at most every `every_s` seconds (10 by default), never a redraw and never a colour code,
so the same text reads well on a terminal and in a file:

    [warm start] epoch 2: step 120/250 (48 %), 3.1 steps/s, ETA 42 s
    [eval eval-6] 60/100 episodes (60 %), 2.4 episodes/s, ETA 17 s
    [vLLM] starting, 20 s: loading the model weights

`Ticker` counts work with a known total (rate and ETA); `Heartbeat` says that something without a count is
still going (elapsed time and, when it can tell, what it is doing). `plain_output_off_a_terminal` turns the
libraries' redrawn bars (Hugging Face, tqdm) and colours off where the output is a file or a pipe: there they
would write '\r'-separated redraws and escape codes into the log; on a terminal they stay live.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")

EVERY_S = 10.0  # the most often one activity prints a line

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")


# What turns the bars and colours off, for this process and every process it starts (Ray workers, vLLM):
# huggingface_hub's and transformers' bars (read when they are imported), tqdm's default for bars that do not
# set `disable` themselves, and the NO_COLOR convention (vLLM, rich, and others honour it).
PLAIN_ENV = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1", "NO_COLOR": "1"}


def plain_output_off_a_terminal(stream: IO[str] | None = None, environ: dict[str, str] | None = None) -> bool:
    """Where `stream` (stdout by default) is not a terminal, set `PLAIN_ENV` (a value already set wins) and
    turn off the bars of huggingface_hub and transformers if they are already imported. True if it did."""
    stream = sys.stdout if stream is None else stream
    environ = os.environ if environ is None else environ
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream: no terminal to draw on
        terminal = False
    if terminal:
        return False
    for key, value in PLAIN_ENV.items():
        environ.setdefault(key, value)
    if environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == "1":
        if "huggingface_hub" in sys.modules:
            from huggingface_hub.utils import disable_progress_bars

            disable_progress_bars()
        if "transformers" in sys.modules:
            from transformers.utils.logging import disable_progress_bar

            disable_progress_bar()
    return True


def strip_ansi(text: str) -> str:
    """`text` without ANSI escape sequences (colours, cursor moves)."""
    return _ANSI.sub("", text)


def format_duration(seconds: float) -> str:
    """A short human duration: '7 s', '3 min 05 s', '1 h 02 min'."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def format_rate(count: float, seconds: float, unit: str) -> str:
    """'12.3 episodes/s', or per minute when slower than one every ten seconds ('4.2 episodes/min')."""
    if seconds <= 0 or count <= 0:
        return f"- {unit}/s"
    per_s = count / seconds
    if per_s >= 0.1:
        return f"{per_s:.1f} {unit}/s"
    return f"{per_s * 60:.1f} {unit}/min"


def eta_seconds(done: int, total: int, elapsed_s: float) -> float | None:
    """Seconds left at the mean rate so far; None before anything is done."""
    if done <= 0 or total <= 0:
        return None
    return max(total - done, 0) * elapsed_s / done


def progress_text(done: int, total: int, elapsed_s: float, unit: str) -> str:
    """'120/400 episodes (30 %), 12.3 episodes/s, ETA 25 s' (no ETA before the first one is done)."""
    percent = 100 * done / total if total else 100.0
    text = f"{done}/{total} {unit} ({percent:.0f} %), {format_rate(done, elapsed_s, unit)}"
    eta = eta_seconds(done, total, elapsed_s)
    if eta is None:
        return f"{text}, {format_duration(elapsed_s)} so far"
    if done >= total:
        return f"{text}, done in {format_duration(elapsed_s)}"
    return f"{text}, ETA {format_duration(eta)}"


class Ticker:
    """Counts `done` out of `total` and prints a progress line when `every_s` has passed since the last one,
    and once at the end (`done == total`) if any line was printed before or the work took over `every_s`.

    `ticker.update(done)` is cheap: call it as often as the work allows.
    """

    def __init__(
        self,
        label: str,
        total: int,
        unit: str,
        every_s: float = EVERY_S,
        out: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label, self.total, self.unit, self.every_s = label, total, unit, every_s
        self.out = out or (lambda line: print(line, flush=True))
        self.clock = clock
        self.started = self.last = clock()
        self.printed = 0
        self.finished = False

    def update(self, done: int) -> None:
        now = self.clock()
        if self.finished:
            return
        if done >= self.total:
            self.finished = True
            if self.printed or now - self.started >= self.every_s:
                self._say(done, now)
            return
        if now - self.last >= self.every_s:
            self._say(done, now)

    def _say(self, done: int, now: float) -> None:
        self.out(f"[{self.label}] {progress_text(done, self.total, now - self.started, self.unit)}")
        self.last, self.printed = now, self.printed + 1


async def watch(ticker: Ticker, count: Callable[[], int], poll_s: float = 1.0) -> None:
    """Feed `count()` to `ticker` every `poll_s` until cancelled (an asyncio task beside the work)."""
    while True:
        await asyncio.sleep(poll_s)
        ticker.update(count())


def ticked(items: Iterable[T], label: str, total: int, unit: str, every_s: float = EVERY_S) -> Iterator[T]:
    """`items`, with a `Ticker` line at most every `every_s` while they are consumed."""
    ticker = Ticker(label, total, unit, every_s)
    for done, item in enumerate(items, start=1):
        yield item
        ticker.update(done)


class Heartbeat:
    """`with Heartbeat("vLLM", "starting", stage=...):` prints '[vLLM] starting, 20 s: <stage()>' every
    `every_s` from a daemon thread while the block runs (nothing if it ends sooner). `stage()` (optional) says
    what is happening now, e.g. read from a log; its errors are ignored."""

    def __init__(
        self,
        label: str,
        doing: str,
        stage: Callable[[], str | None] | None = None,
        every_s: float = EVERY_S,
        out: Callable[[str], None] | None = None,
    ) -> None:
        self.label, self.doing, self.stage, self.every_s = label, doing, stage, every_s
        self.out = out or (lambda line: print(line, flush=True))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.monotonic()

    def line(self, elapsed_s: float) -> str:
        text = f"[{self.label}] {self.doing}, {format_duration(elapsed_s)}"
        try:
            now = self.stage() if self.stage is not None else None
        except Exception:  # noqa: BLE001 - a stage we cannot read is left out, the heartbeat goes on
            now = None
        return f"{text}: {now}" if now else text

    def __enter__(self) -> Heartbeat:
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat {self.label}", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            self.out(self.line(time.monotonic() - self.started))

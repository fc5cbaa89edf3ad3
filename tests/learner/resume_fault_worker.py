"""Subprocess of the fault-injection test: `python -m tests.learner.resume_fault_worker MODEL OUT N KILLS SEED MAX_AT`.

Torch and the learner are imported (and one learner built) once; each attempt is a forked child (a fresh
process as far as the run directory can tell) that resumes the run the way the driver does
(`verified_checkpoint`, `load_checkpoint`, `restore_metrics`) and trains iterations up to N, each ending as
the driver's do: a checkpoint holding the iteration's metrics row, then the row appended to metrics.jsonl.

OUT/reference is one attempt without faults. Then a chain of attempts in OUT/chain<c>: each SIGKILLs itself at
the k-th file-system write under its run directory (k drawn from 1..MAX_AT with SEED; Python's audit events:
an open for writing, mkdir, rename/replace, remove, rmtree), before that write happens (every third kill
counts metrics.jsonl's writes only, k from 1..3: they are 2 of ~16 writes an iteration); at an append to
metrics.jsonl it first writes part of the row, as a kill mid-write leaves it. After each kill the run
directory is copied to OUT/branch<i> and resumed there to the end without faults, while the chain goes on
from the killed state with the next kill (a new chain starts when one reaches N first). Stops after KILLS
kills. One JSON line per attempt on stdout: its run dir, how it ended, the write it was killed at.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sys
from pathlib import Path

import torch

from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner
from loop_agents.orchestration.resume import restore_metrics, verified_checkpoint
from loop_agents.orchestration.run_log import RunLog
from tests.learner.batch import learner_config, loop_algorithm, make_batch

_WRITE_EVENTS = {"os.mkdir", "os.rename", "os.replace", "os.remove", "shutil.rmtree"}


def _arm(run_dir: Path, kill_at: int, report: int, only: str = "") -> None:
    """Count writes under `run_dir` (to paths containing `only`); at the `kill_at`-th, tell `report` (a pipe)
    which write it is and die."""
    root, seen, busy = str(run_dir), [0], [False]

    def hook(event: str, args: tuple) -> None:
        if busy[0] or not args:
            return
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            writing = (mode and any(c in str(mode) for c in "wax+")) or (
                mode is None and flags & (os.O_WRONLY | os.O_RDWR)
            )
            if not writing:
                return
        elif event not in _WRITE_EVENTS:
            return
        path = str(args[0])
        if not path.startswith(root) or only not in path:
            return
        seen[0] += 1
        if seen[0] < kill_at:
            return
        busy[0] = True
        where = f"{event} {os.path.relpath(path, root)}"
        if event == "open" and path.endswith("metrics.jsonl") and "a" in str(args[1]):
            with open(path, "a") as f:  # a torn row: what a kill in the middle of the append leaves
                f.write('{"iteration": 99, "rollout/cou')
            where += " (torn row)"
        os.write(report, (where + "\n").encode())
        os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(hook)


def _attempt(model_dir: str, run_dir: Path, iterations: int) -> None:
    """One process's life: resume, then train to the end."""
    learner = Learner(learner_config(model_dir, epochs=1, keep_checkpoints=2), loop_algorithm())
    folder = run_dir / "checkpoints"
    checkpoint = verified_checkpoint(folder)
    state = learner.load_checkpoint(checkpoint) if checkpoint is not None else {}
    start = int(state.get("iteration", 0))
    log = RunLog(run_dir)
    restore_metrics(log, start, state.get("metrics_row"))
    for iteration in range(start + 1, iterations + 1):
        batch = make_batch(seed=iteration)
        compute_advantages(batch, loop_algorithm())
        learned = learner.train_iteration(batch)
        row = {"rollout/count": len(batch), "learn/loss": float(learned["loss"])}
        learner.save_checkpoint(
            folder / f"checkpoint-{iteration}", {"iteration": iteration, "metrics_row": row}
        )
        log.log(row, iteration)


def _run(model_dir: str, run_dir: Path, iterations: int, kill_at: int | None, only: str = "") -> dict:
    """One attempt in a forked child; what it said and how it ended."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 0
        try:
            if kill_at is not None:
                _arm(run_dir, kill_at, write, only)
            _attempt(model_dir, run_dir, iterations)
        except BaseException as err:  # noqa: BLE001 - reported to the test, which fails on it
            os.write(write, f"error {type(err).__name__}: {err}\n".encode())
            code = 1
        os._exit(code)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        said = pipe.read().strip()
    ended = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
    result = {"run_dir": str(run_dir), "kill_at": kill_at, "only": only, "ended": ended, "said": said}
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    model_dir, out = sys.argv[1], Path(sys.argv[2])
    iterations, kills, seed, max_at = (int(a) for a in sys.argv[3:7])
    torch.set_num_threads(1)  # before any torch work: no thread pool for the forks to inherit half-way
    Learner(learner_config(model_dir, epochs=1), loop_algorithm())  # warm: the attempts' builds take 0.1 s
    rng = random.Random(seed)
    _run(model_dir, out / "reference", iterations, None)
    chains, killed = 0, 0
    chain = out / "chain0"
    while killed < kills:
        if killed % 3 == 2:  # a third of the kills among metrics.jsonl's writes (2 of ~16 an iteration)
            result = _run(model_dir, chain, iterations, rng.randint(1, 3), "metrics.jsonl")
        else:
            result = _run(model_dir, chain, iterations, rng.randint(1, max_at))
        if result["ended"] != "signal 9":  # finished before the k-th write (or failed: the test says so)
            chains += 1
            chain = out / f"chain{chains}"
            continue
        branch = out / f"branch{killed}"
        shutil.copytree(chain, branch)
        _run(model_dir, branch, iterations, None)
        killed += 1


if __name__ == "__main__":
    main()

"""An evaluation's scores on disk: `eval.json` beside its checkpoint, and `checkpoints/best/` (adapter +
eval.json) replaced atomically when it beats the best so far on `eval.best_metric`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path


def record_evaluation(
    run_dir: Path, checkpoint: Path, iteration: int, metrics: dict[str, float], best_metric: str
) -> None:
    """Write the scores beside the checkpoint and keep `checkpoints/best/`. The evaluated adapter's copy
    (`eval_adapters/iter_<n>`, made when the evaluation was submitted: pruning may have removed the
    checkpoint since) becomes the best adapter if it scores best, and is removed either way."""
    adapter = run_dir / "eval_adapters" / f"iter_{iteration:06d}"
    if checkpoint.exists():
        (checkpoint / "eval.json").write_text(json.dumps(metrics))
    key = f"eval/{best_metric}"
    best_dir = run_dir / "checkpoints" / "best"
    best_file = best_dir / "eval.json"
    best = json.loads(best_file.read_text()) if best_file.exists() else None
    if key in metrics and (best is None or metrics[key] > best["value"]):
        temp = best_dir.parent / ".best.tmp"
        shutil.rmtree(temp, ignore_errors=True)
        shutil.copytree(adapter, temp / "adapter")
        record = {"iteration": iteration, "checkpoint": str(checkpoint), "metric": key, "value": metrics[key]}
        (temp / "eval.json").write_text(json.dumps({**record, "metrics": metrics}, indent=2))
        shutil.rmtree(best_dir, ignore_errors=True)
        temp.rename(best_dir)
    shutil.rmtree(adapter, ignore_errors=True)

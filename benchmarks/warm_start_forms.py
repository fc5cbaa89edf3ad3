"""How fast the demo's full-weight warm start learns in each form the agent can act in: a proxy, not a run.

    python -m benchmarks.warm_start_forms text=agent=text tools=agent=tools \
        tools_4_layers=agent=tools,llm.tiny.num_layers=4 --demos 2000 --epochs 4

Each variant is `name=override,override,...` (Hydra overrides on `experiment=demo`). For each: the tiny model of
that config is built, the demo's warm start inputs are built exactly as a run builds them (its demonstrations in the
agent's form, its token weights, its held-out check episodes), `--demos` of them are trained for `--epochs` epochs
with the demo's SFT settings (`sft_full_weights`, fixed epochs: no readiness target, no redraws), and after every
epoch the check episodes are scored teacher-forced: P(optimal episode), P(opens), P(answer | opens) and P(code
symbol 1 / 2) (chance for a symbol: 0.1). That is the skill whose absence stalls a warm start (the copy of the gem's
code), measured in a tenth of a warm start's time. Results: benchmarks/results/warm_start_forms.json, rewritten
after each epoch (a stopped series keeps what it measured; a new invocation adds its variants to those on record),
with the load average: the machine may be shared. Each variant also records `copy_key`: how ambiguous a one-token
copy of the code's first symbol is in its form (`--keys-only`: that alone, no training).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.run_records import provenance
from benchmarks.runner import RESULTS_DIR, write_analysis
from loop_agents.config.load import compose
from loop_agents.envs.selected import prepare_environment
from loop_agents.orchestration import components as C
from loop_agents.orchestration.full_sft import sft_full_weights
from loop_agents.orchestration.warm_model import warm_start_inputs
from loop_agents.rollout.demonstration import action_spans

RESULT = RESULTS_DIR / "warm_start_forms.json"


def variant(spec: str) -> tuple[str, list[str]]:
    """`name=a=1,b=2` -> ("name", ["a=1", "b=2"])."""
    name, _, overrides = spec.partition("=")
    return name, [o for o in overrides.split(",") if o]


def copy_key(trajectories, chat) -> dict[str, float]:
    """How well induction (predict what followed the earlier occurrences of the current context) copies the code's
    first symbol: at the answer's token before it (the key: that one token, or the two before it), over the
    demonstrations that answer, the mean number of earlier occurrences of the key, the share of them followed by
    that symbol, and how often the most recent one is. A 2-layer model copies by such induction; a key that recurs
    before other things makes the copy ambiguous."""
    from loop_agents.envs.bundled.warm_start_quality import code_token_positions

    stats = {width: ([], [], []) for width in (1, 2)}
    answering = 0
    for traj in trajectories:
        last = action_spans(traj.loss_mask)[-1]
        if "answer" not in chat.decode([traj.token_ids[t] for t in last]):
            continue
        answering += 1
        ids, first = traj.token_ids, code_token_positions(traj, chat)[0]
        for width, (counts, shares, recent) in stats.items():
            key = ids[first - width : first]
            earlier = [p for p in range(width, first - 1) if ids[p - width : p] == key]
            counts.append(len(earlier))
            shares.append(sum(ids[p] == ids[first] for p in earlier) / len(earlier) if earlier else 0.0)
            recent.append(float(bool(earlier) and ids[earlier[-1]] == ids[first]))
    n = max(answering, 1)
    out: dict[str, float] = {"answering_demonstrations": answering}
    for width, (counts, shares, recent) in stats.items():
        out.update({f"key{width}_occurrences": round(sum(counts) / n, 2),
                    f"key{width}_followed_by_code": round(sum(shares) / n, 3),
                    f"key{width}_most_recent_followed_by_code": round(sum(recent) / n, 3)})  # fmt: skip
    return out


DECLARE_TOOLS = "declare_tools"  # a variant flag, not a Hydra override: see text_form_with_tool_declarations


def text_form_with_tool_declarations(cfg, base: str, trajectories, checks):
    """The text-action demonstrations rendered with the gem hunt's tools declared in the system turn (the template's
    `# Tools` block, as `agent=tools` renders it), actions and observations still text: an episode as long as the
    tool form's opening, in the text form's format, so a copy that fails in tool form can be told apart as length
    or format. The check episodes are scored in the same rendering; the code keeps its weight."""
    from transformers import AutoTokenizer

    from loop_agents.envs.bundled.warm_checks import code_token_weights
    from loop_agents.orchestration.agent_choice import agent_tool_schemas
    from loop_agents.rollout.chat import ChatFormat
    from loop_agents.rollout.demonstration import demonstration_trajectory

    schemas = agent_tool_schemas(compose(["experiment=demo", "agent=tools"]))
    chat = ChatFormat(AutoTokenizer.from_pretrained(base), tools=schemas)
    padded = [demonstration_trajectory(chat, t.messages, t.task_id) for t in trajectories]
    weights = code_token_weights(padded, chat, float(cfg.env.options.demo_code_weight))
    checks.chat = chat
    examples = [(list(t.token_ids), list(t.loss_mask), list(w)) for t, w in zip(padded, weights, strict=True)]
    return padded, examples


def measure(
    name: str, overrides: list[str], demos: int, epochs: int, work: Path, record: dict, note: str = ""
) -> dict:
    """Train one variant's warm start for `epochs`, scoring its check episodes after each (appended to `record`)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    declare_tools = DECLARE_TOOLS in overrides
    overrides = [o for o in overrides if o != DECLARE_TOOLS]
    cfg = compose(["experiment=demo", f"env.options.demo_count={demos}", *overrides])
    torch.set_num_threads(cfg.gpu_allocation.cpu_learner_threads)
    base = C.resolve_model(cfg, work / name)
    prepare_environment(cfg)
    examples_built = time.perf_counter()
    trajectories, readiness, weights, _ = warm_start_inputs(cfg, base)
    checks = (
        readiness.__self__
    )  # GemHuntWarmChecks: its factors() holds every probability, not only readiness
    if declare_tools:
        trajectories, examples = text_form_with_tool_declarations(cfg, base, trajectories, checks)
    else:
        examples = [(list(t.token_ids), list(t.loss_mask)) for t in trajectories]
        if weights is not None:
            examples = [(ids, mask, list(w)) for (ids, mask), w in zip(examples, weights, strict=True)]
    entry = {"variant": name, "overrides": overrides, "note": note, **provenance(), "demonstrations": len(examples),
             "tokens_per_demonstration": round(sum(len(e[0]) for e in examples) / len(examples), 1),
             "trained_tokens_per_demonstration": round(sum(sum(e[1]) for e in examples) / len(examples), 1),
             "build_s": round(time.perf_counter() - examples_built, 1),
             "copy_key": copy_key(trajectories, checks.chat), "epochs": []}  # fmt: skip
    record["variants"].append(entry)
    write_analysis("warm_start_forms", record)
    torch.manual_seed(C.warm_seed(cfg))
    model = AutoModelForCausalLM.from_pretrained(
        base, dtype=torch.float32, attn_implementation=cfg.learner.sft_attention
    )
    began = time.perf_counter()

    def after_epoch(epoch: int, loss: float) -> bool:
        factors = {key: round(value, 5) for key, value in checks.factors(model).items()}
        entry["epochs"].append({"epoch": epoch, "loss": round(loss, 4), "seconds": round(time.perf_counter() - began, 1),
                                "load": round(os.getloadavg()[0], 2), **factors})  # fmt: skip
        print(f"[{name}] epoch {epoch}: loss {loss:.3f} {factors}", flush=True)
        write_analysis("warm_start_forms", record)
        return False

    tokenizer = AutoTokenizer.from_pretrained(base)
    sft_full_weights(model, examples, epochs, cfg.learner.sft_lr, cfg.learner.sft_batch_size, C.warm_seed(cfg),
                     tokenizer.pad_token_id, after_epoch)  # fmt: skip
    return entry


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "variants", nargs="+", help=f"name=override,override,... ({DECLARE_TOOLS}: see below)"
    )
    parser.add_argument("--demos", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--note", default="")
    parser.add_argument("--keys-only", action="store_true", help="the copy-key statistics only, no training")
    args = parser.parse_args(argv)
    record = {"note": args.note, "demonstrations": args.demos, "epochs": args.epochs, "variants": []}
    if RESULT.is_file():  # the variants measured before stay on record (a series is several invocations)
        record["variants"] = json.loads(RESULT.read_text())["variants"]
    with tempfile.TemporaryDirectory(prefix="warm_start_forms_") as work:
        for spec in args.variants:
            epochs = 0 if args.keys_only else args.epochs
            measure(*variant(spec), args.demos, epochs, Path(work), record, args.note)


if __name__ == "__main__":
    main()

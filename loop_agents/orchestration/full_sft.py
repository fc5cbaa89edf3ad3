"""Full-weight SFT warm start (`learner.sft_target=full`): a small base model cloned on demonstrations.

For the tiny CPU models the warm start trains every weight (a LoRA on a randomly initialised
0.2 M-parameter model learns the task format far slower), writes a normal Hugging Face model
directory, and RL then trains a LoRA on top of it. The result is cached in the run directory
(`warm_model/`, with `warm_start.json`), so a resumed run or a rerun reuses it.
Loss = mean token NLL over the assistant actions and their `<|im_end|>` (the Trajectory loss mask),
i.e. exactly the tokens the policy samples in the rollouts' layout.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import torch

from loop_agents.errors import CachedModelMismatch
from loop_agents.learner.prefix_sharing import shareable_prefix, shared_prefix_hidden
from loop_agents.progress_lines import Heartbeat, Ticker
from loop_agents.rollout.trajectory import Trajectory


def masked_token_nll(
    model,
    input_ids: torch.Tensor,
    attention: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor | None = None,
    share_prefix_min_tokens: int = 0,
) -> torch.Tensor:
    """Weighted mean NLL of the labelled next tokens:
    Σ_{(b,t)∈M} w_{b,t+1} · (−log softmax(W h_{b,t})[labels_{b,t+1}]) / Σ_{(b,t)∈M} w_{b,t+1}.

    Without `weights` (all 1) this is `model(..., labels=labels).loss` (Hugging Face shifts the labels the
    same way), but the vocabulary projection runs only at the positions M that have a label: in the demo's
    demonstrations 14 % of the tokens, and the projection is about a third of the 0.6 M model's compute.
    `weights[b, t]` weighs the label at position t (aligned with `labels`).
    With `share_prefix_min_tokens` > 0, a batch whose rows share their first P >= that many tokens runs them
    once (`shared_prefix_batch_hidden`): the same loss and gradients up to float summation order.
    """
    prefix_len = batch_prefix(input_ids, attention, share_prefix_min_tokens)
    if prefix_len:
        hidden = shared_prefix_batch_hidden(model.model, input_ids, attention, prefix_len)
    else:
        hidden = model.model(input_ids=input_ids, attention_mask=attention).last_hidden_state
    targets = labels[:, 1:]
    keep = targets != -100
    logits = model.lm_head(hidden[:, :-1][keep]).float()
    if weights is None:
        return torch.nn.functional.cross_entropy(logits, targets[keep])
    token_weights = weights[:, 1:][keep]
    nll = torch.nn.functional.cross_entropy(logits, targets[keep], reduction="none")
    return (token_weights * nll).sum() / token_weights.sum()


def batch_prefix(input_ids: torch.Tensor, attention: torch.Tensor, min_tokens: int) -> int:
    """P, the tokens every row of a right-padded batch starts with (each row keeps >= 1 own token), when it is
    at least `min_tokens` (> 0); else 0: run the batch unshared."""
    if min_tokens <= 0:
        return 0
    lengths = attention.sum(dim=1).tolist()
    rows = [input_ids[row, :length].tolist() for row, length in enumerate(lengths)]
    return shareable_prefix(rows, "auto", min_tokens)


def shared_prefix_batch_hidden(
    decoder, input_ids: torch.Tensor, attention: torch.Tensor, prefix_len: int
) -> torch.Tensor:
    """[B, W, H] last hidden states of a right-padded batch whose rows share their first `prefix_len` tokens:
    the rows are packed and run by the learner's `shared_prefix_hidden` (one prefix forward, the suffixes on
    its expanded cache), then put back in their padded places (padding positions hold zeros)."""
    real = attention.bool()
    lengths = attention.sum(dim=1)
    positions = torch.cat([torch.arange(int(n)) for n in lengths])[None]
    packed = shared_prefix_hidden(decoder, input_ids[real][None], positions, prefix_len)
    hidden = packed.new_zeros(*input_ids.shape, packed.shape[-1])
    hidden[real] = packed
    return hidden


def sft_full_weights(
    model,
    examples: list[tuple[list[int], list[int]]] | list[tuple[list[int], list[int], list[float]]],
    epochs: int,
    lr: float,
    batch_size: int,
    seed: int,
    pad_id: int,
    after_epoch: Callable[[int, float], bool] | None = None,
    share_prefix_min_tokens: int = 0,
) -> list[float]:
    """AdamW on all weights over padded batches of (token ids, loss mask[, token weights]); returns each
    epoch's mean loss (`masked_token_nll`, weighted where the examples carry weights).

    `after_epoch(epoch, loss)` runs after every epoch (model in eval mode); returning True stops training.

    `share_prefix_min_tokens` > 0: a batch's common prefix runs once (`masked_token_nll`).
    Inside an epoch a progress line (steps done, rate, ETA) is printed at most every 10 s.

    Constant learning rate: a cosine decay to 0 over 6 epochs left the 0.6 M demo model at P(optimal dev
    episode) 0.001 for 3 seeds, where 5 epochs at a constant rate had reached 0.05.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    rng = random.Random(seed)
    model.train()
    losses = []
    steps_per_epoch = -(-len(examples) // batch_size)
    print(
        f"[warm start] training all weights on {len(examples)} demonstrations: up to {epochs} epochs of "
        f"{steps_per_epoch} steps",
        flush=True,
    )
    for epoch in range(1, epochs + 1):
        order = list(range(len(examples)))
        rng.shuffle(order)
        total, steps = 0.0, 0
        ticker = Ticker(f"warm start epoch {epoch}", steps_per_epoch, "steps")
        for start in range(0, len(order), batch_size):
            batch = [examples[i] for i in order[start : start + batch_size]]
            width = max(len(example[0]) for example in batch)
            input_ids = torch.full((len(batch), width), pad_id)
            labels = torch.full((len(batch), width), -100)
            attention = torch.zeros((len(batch), width), dtype=torch.long)
            weights = torch.ones((len(batch), width)) if len(batch[0]) > 2 else None
            for row, (ids, mask, *token_weights) in enumerate(batch):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                attention[row, : len(ids)] = 1
                labels[row, : len(ids)] = torch.tensor(
                    [t if m else -100 for t, m in zip(ids, mask, strict=True)]
                )
                if weights is not None:
                    weights[row, : len(ids)] = torch.tensor(token_weights[0])
            loss = masked_token_nll(model, input_ids, attention, labels, weights, share_prefix_min_tokens)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            total, steps = total + loss.item(), steps + 1
            ticker.update(steps)
        losses.append(total / steps)
        if after_epoch is not None:
            model.eval()
            stop = after_epoch(len(losses), losses[-1])
            model.train()
            if stop:
                break
    model.eval()
    return losses


# config.json keys that decide whether two models have the same shape
_SHAPE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")


def check_reusable(out_dir: Path, base_dir: Path, provenance: dict) -> None:
    """Refuse a cached warm model whose shape or recorded settings differ from this run's (nothing is changed)."""
    warm_config = json.loads((out_dir / "config.json").read_text())
    base_config = json.loads((base_dir / "config.json").read_text())
    for key in _SHAPE_KEYS:
        if warm_config.get(key) != base_config.get(key):
            raise CachedModelMismatch(
                f"warm model {out_dir} has {key}={warm_config.get(key)} but this run's base model has "
                f"{base_config.get(key)} (built by another preset?); delete {out_dir} or choose another run.dir"
            )
    recorded = json.loads((out_dir / "warm_start.json").read_text()).get("provenance", {})
    for key, value in provenance.items():
        if key in recorded and recorded[key] != value:
            raise CachedModelMismatch(
                f"warm model {out_dir} was built with {key}={recorded[key]!r} but this run asks for {value!r}; "
                f"delete {out_dir} to rebuild it, or choose another run.dir"
            )


def effective_epochs(
    epochs: int, ready_at: float | None, max_epochs: int | None, checked: bool
) -> tuple[float | None, int]:
    """(ready_at, max_epochs) as a warm start runs them: a family without warm-start checks (`checked` false)
    trains exactly `epochs`, and so does one without `ready_at`."""
    ready_at = ready_at if checked else None
    return ready_at, epochs if ready_at is None or max_epochs is None else max(epochs, max_epochs)


def recorded_warm_settings(out_dir: Path, settings: dict) -> dict:
    """The provenance a finished warm model in `out_dir` must match for `settings` (build_warm_model's keyword
    arguments), without the family's readiness check: whether it had one is in its recorded epoch checks."""
    report = json.loads((Path(out_dir) / "warm_start.json").read_text())
    ready_at, max_epochs = effective_epochs(
        settings["epochs"], settings.get("ready_at"), settings.get("max_epochs"),
        checked=bool(report.get("epoch_checks")),
    )  # fmt: skip
    return warm_provenance(**{**settings, "ready_at": ready_at, "max_epochs": max_epochs})


def warm_provenance(
    epochs: int,
    lr: float,
    seed: int,
    batch_size: int = 32,
    ready_at: float | None = None,
    max_epochs: int | None = None,
    redraws: int = 0,
    redraw_epoch: int = 3,
    attention: str = "eager",
    share_prefix_min_tokens: int = 0,
    provenance: dict | None = None,
) -> dict:
    """The settings a warm model records in `warm_start.json` and a reuse must match (see build_warm_model)."""
    return {"epochs": epochs, "lr": lr, "seed": seed, "batch_size": batch_size, "ready_at": ready_at,
            "max_epochs": max_epochs, "redraws": redraws, "redraw_epoch": redraw_epoch,
            **({} if attention == "eager" else {"attention": attention}),
            **({"share_prefix_min_tokens": share_prefix_min_tokens} if share_prefix_min_tokens else {}),
            **(provenance or {})}  # fmt: skip


def build_warm_model(
    base_dir: str | Path,
    out_dir: str | Path,
    demonstrations: list[Trajectory],
    epochs: int,
    lr: float,
    seed: int,
    batch_size: int = 32,
    provenance: dict | None = None,
    readiness: Callable[[object], float] | None = None,
    ready_at: float | None = None,
    max_epochs: int | None = None,
    redraws: int = 0,
    redraw_epoch: int = 3,
    token_weights: list[list[float]] | None = None,
    stall_probe: Callable[[object], str | None] | None = None,
    attention: str = "eager",
    share_prefix_min_tokens: int = 0,
) -> Path:
    """SFT `base_dir` on the demonstrations into `out_dir` (atomically); a finished `out_dir` is reused.

    `provenance` (the settings that decide the result: demonstrations, epochs, lr, seed, threads) is
    recorded in `warm_start.json`; a cached warm model built with other settings or another model shape
    raises CachedModelMismatch instead of being trained on silently.
    Deterministic for a given seed and torch thread count (the kernels' summation order depends on it).
    `readiness(model)` (e.g. P(optimal held-out episode)) is measured after every epoch and recorded. With
    `ready_at`, training goes on past `epochs` while readiness is below it, up to `max_epochs`: a warm start
    that is already ready after `epochs` is exactly the fixed-epoch one.
    A warm start can also stall: whether the 0.6 M demo model learns to copy the gem's code depends on the
    order of the demonstrations (issue 18), and one that has not by `redraw_epoch` did not in 4 more epochs.
    With `redraws` > 0, a run that has stalled after `redraw_epoch` epochs (`stall_probe(model)` says why;
    without a probe: readiness still below `ready_at` / 10)
    starts again from the base model with another (seeded) order, up to `redraws` times.
    `token_weights` (one list per demonstration, aligned with its tokens) weigh the loss per token.
    `attention` is the attention kernel (`learner.sft_attention`; which one is faster depends on the length).
    `share_prefix_min_tokens` > 0 runs a batch's common prefix once (`learner.sft_share_prefix`).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    ready_at, max_epochs = effective_epochs(epochs, ready_at, max_epochs, checked=readiness is not None)
    # the attention kernel and prefix sharing are recorded only when not the default: warm models built before
    # the switches existed (no such keys) stay reusable
    provenance = warm_provenance(epochs=epochs, lr=lr, seed=seed, batch_size=batch_size, ready_at=ready_at,
                                 max_epochs=max_epochs, redraws=redraws, redraw_epoch=redraw_epoch,
                                 attention=attention, share_prefix_min_tokens=share_prefix_min_tokens,
                                 provenance=provenance)  # fmt: skip
    if (out_dir / "warm_start.json").exists():
        check_reusable(out_dir, Path(base_dir), provenance)
        return out_dir
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    t0 = time.perf_counter()
    examples = [(list(t.token_ids), list(t.loss_mask)) for t in demonstrations]
    if token_weights is not None:
        examples = [(ids, mask, list(w)) for (ids, mask), w in zip(examples, token_weights, strict=True)]
    checks: list[dict] = []
    draw, stalled = 0, False

    def after_epoch(epoch: int, loss: float) -> bool:
        nonlocal stalled
        line = f"[warm start] epoch {epoch}/{epochs}" + (
            f" (up to {max_epochs})" if max_epochs > epochs else ""
        )
        line += f"{f', order {draw + 1}' if draw else ''}: loss {loss:.3f}"
        ready = True
        if readiness is not None:
            with Heartbeat("warm start", f"epoch {epoch}: measuring P(optimal held-out episode)"):
                value = readiness(model)
            checks.append({"draw": draw, "epoch": epoch, "loss": loss, "readiness": value})
            ready = ready_at is None or value >= ready_at
            target = f" (ready at >= {ready_at})" if ready_at is not None else ""
            line += f", P(optimal held-out episode) {value:.3f}{target}"
            why = None
            if ready_at is not None and draw < redraws and epoch == redraw_epoch:
                why = stall_probe(model) if stall_probe is not None else (
                    f"below {ready_at / 10:g}" if value < ready_at / 10 else None
                )  # fmt: skip
            stalled = why is not None
            if stalled:
                line += f"; stalled ({why}): starting again in another order ({draw + 1} of {redraws})"
        print(f"{line} ({time.perf_counter() - t0:.0f} s)", flush=True)
        return stalled or (epoch >= epochs and ready)

    while True:
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(
            base_dir, dtype=torch.float32, attn_implementation=attention
        )
        order_seed = seed + 1_000_003 * draw  # draw 0 is the plain seed: no redraw, the same warm start
        losses = sft_full_weights(
            model,
            examples,
            max_epochs,
            lr,
            batch_size,
            order_seed,
            tokenizer.pad_token_id,
            after_epoch,
            share_prefix_min_tokens,
        )
        if not stalled:
            break
        draw += 1
    temp = out_dir.parent / f".{out_dir.name}.tmp"
    model.save_pretrained(temp, safe_serialization=True)
    tokenizer.save_pretrained(temp)
    report = {
        "demonstrations": len(examples),
        "epochs": epochs,  # at least; up to max_epochs while not ready (epochs_run says how many ran)
        "max_epochs": max_epochs,
        "epochs_run": len(losses),  # of the last draw
        "draws": draw + 1,
        "epoch_losses": losses,
        "epoch_checks": checks,  # readiness after each epoch (P(optimal held-out episode) for gem hunt)
        "ready": None if ready_at is None else bool(checks and checks[-1]["readiness"] >= ready_at),
        "seconds_per_epoch": (time.perf_counter() - t0) / max(len(checks), len(losses)),
        "seconds": time.perf_counter() - t0,
        "torch_threads": torch.get_num_threads(),
        "provenance": provenance,
    }
    if report["ready"] is False:
        print(
            f"[warm start] not ready: P(optimal held-out episode) {checks[-1]['readiness']:.3f} < {ready_at} after "
            f"{len(losses)} epochs in {draw + 1} order(s); RL may not take off from it (docs/log/demo.md)",
            flush=True,
        )
    (temp / "warm_start.json").write_text(json.dumps(report, indent=2))
    temp.rename(out_dir)
    return out_dir

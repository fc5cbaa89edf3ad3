"""Full-weight warm start: the cloned model fits its demonstrations, and a finished warm model is reused."""

from __future__ import annotations

import json

import pytest
from transformers import AutoTokenizer

from loop_agents.orchestration.full_sft import build_warm_model
from loop_agents.rollout.trajectory import Trajectory


def _demos(tokenizer, n: int = 8) -> list[Trajectory]:
    out = []
    for i in range(n):
        prompt = tokenizer(f"<|im_start|>user\nopen box {i}<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
        action = tokenizer(f"answer {i} {i}<|im_end|>")["input_ids"]
        ids = prompt + action
        mask = [False] * len(prompt) + [True] * len(action)
        out.append(
            Trajectory(
                task_id=f"t{i}",
                group_id=f"t{i}",
                token_ids=ids,
                loss_mask=mask,
                sample_logprobs=[0.0] * len(ids),
            )
        )
    return out


@pytest.mark.slow  # 12 epochs of SFT
def test_warm_model_fits_the_demonstrations_and_is_reused(tiny_model_dir, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer)
    out = build_warm_model(tiny_model_dir, tmp_path / "warm", demos, epochs=12, lr=3e-3, seed=0, batch_size=4)
    report = json.loads((out / "warm_start.json").read_text())
    losses = report["epoch_losses"]
    assert len(losses) == 12 and report["demonstrations"] == 8
    assert losses[-1] < 0.5 * losses[0], losses  # it learned the answers
    assert not (tmp_path / ".warm.tmp").exists()  # written atomically

    stamp = (out / "model.safetensors").stat().st_mtime_ns
    again = build_warm_model(
        tiny_model_dir, tmp_path / "warm", demos, epochs=12, lr=3e-3, seed=0, batch_size=4
    )
    assert again == out and (out / "model.safetensors").stat().st_mtime_ns == stamp  # cached, not retrained


def _weights_digest(model_dir) -> str:
    import hashlib

    return hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()


@pytest.mark.slow  # five SFT runs
def test_warm_start_is_deterministic_for_a_seed_and_thread_count(tiny_model_dir, tmp_path):
    """Same seed and torch thread count → bit-identical warm weights; another seed → other weights."""
    import torch

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer, n=12)
    threads = torch.get_num_threads()
    digests = {}
    try:
        for name, seed, n_threads in (("a", 0, 2), ("b", 0, 2), ("c", 1, 2), ("d", 0, 1), ("e", 0, 1)):
            torch.set_num_threads(n_threads)
            out = build_warm_model(
                tiny_model_dir, tmp_path / name, demos, epochs=3, lr=3e-3, seed=seed, batch_size=4
            )
            digests[name] = _weights_digest(out)
    finally:
        torch.set_num_threads(threads)
    assert digests["a"] == digests["b"]  # repeated with 2 threads
    assert digests["d"] == digests["e"]  # repeated with 1 thread
    assert digests["a"] != digests["c"]  # the seed matters (shuffling), so the check can fail


def test_a_cached_warm_model_from_other_settings_is_refused(tiny_model_dir, tmp_path):
    import pytest

    from loop_agents.orchestration.full_sft import CachedModelMismatch

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer, n=4)
    out = build_warm_model(
        tiny_model_dir,
        tmp_path / "warm",
        demos,
        epochs=1,
        lr=3e-3,
        seed=0,
        batch_size=4,
        provenance={"threads": 2},
    )
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    with pytest.raises(CachedModelMismatch, match=r"built with threads=2 but this run asks for 1"):
        build_warm_model(
            tiny_model_dir, out, demos, epochs=1, lr=3e-3, seed=0, batch_size=4, provenance={"threads": 1}
        )
    with pytest.raises(CachedModelMismatch, match=r"built with epochs=1 but this run asks for 2"):
        build_warm_model(tiny_model_dir, out, demos, epochs=2, lr=3e-3, seed=0, batch_size=4)
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp  # nothing overwritten


def test_a_warm_model_of_another_size_is_refused(tiny_model_dir, tmp_path):
    import pytest

    from loop_agents.orchestration.full_sft import CachedModelMismatch
    from loop_agents.tiny_model import TinyModelSpec, build_tiny_model

    wider = build_tiny_model(tmp_path / "wider", TinyModelSpec(hidden_size=128, num_heads=4))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer, n=4)
    out = build_warm_model(tiny_model_dir, tmp_path / "warm", demos, epochs=1, lr=3e-3, seed=0, batch_size=4)
    with pytest.raises(CachedModelMismatch, match=r"has hidden_size=64 but this run's base model has 128"):
        build_warm_model(wider, out, demos, epochs=1, lr=3e-3, seed=0, batch_size=4)


@pytest.mark.slow  # about 20 epochs of SFT (~40 s idle)
def test_warm_start_stops_at_the_first_epoch_that_is_ready(tiny_model_dir, tmp_path):
    """Readiness (here: mean teacher-forced P(action) of the demonstrations) is checked after every epoch;
    past the minimum of 10 epochs, training stops at the first epoch reaching `ready_at` (at most 40 epochs);
    every check is recorded."""
    import torch

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer)

    @torch.no_grad()
    def p_actions(model) -> float:
        total = 0.0
        for t in demos:
            ids = torch.tensor([t.token_ids])
            logprobs = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1).gather(1, ids[0, 1:, None])[
                :, 0
            ]
            total += float(logprobs[torch.tensor(t.loss_mask[1:])].sum().exp())
        return total / len(demos)

    # P(action) of these 8 demonstrations climbs slowly from ~0 (0.003 at epoch 18, 0.006 at 20, 0.015 at 40)
    out = build_warm_model(
        tiny_model_dir,
        tmp_path / "warm",
        demos,
        10,
        3e-3,
        0,
        batch_size=4,
        readiness=p_actions,
        ready_at=0.005,
        max_epochs=40,
    )
    report = json.loads((out / "warm_start.json").read_text())
    checks = [c["readiness"] for c in report["epoch_checks"]]
    assert 10 < report["epochs_run"] < 40 and len(checks) == report["epochs_run"] == len(
        report["epoch_losses"]
    )
    assert checks[-1] >= 0.005 and all(c < 0.005 for c in checks[:-1]), checks
    assert report["ready"] is True and report["provenance"]["ready_at"] == 0.005
    assert report["epochs"] == 10 and report["max_epochs"] == 40


def test_heldout_check_demonstrations_are_clean_and_disjoint_from_the_training_ones():
    from loop_agents.envs.bundled.demonstrations import generate_demonstrations, heldout_clean_demonstrations
    from loop_agents.envs.bundled.game import GemHuntGame
    from loop_agents.envs.bundled.tasks import generate_task, parse_task_id

    training = {task_id for task_id, _ in generate_demonstrations(9_900, 0.3)}
    checks = heldout_clean_demonstrations(100, training)
    assert len({t for t, _ in checks}) == 100 and not {t for t, _ in checks} & training
    for task_id, messages in checks:  # the solver's exact episode: every action optimal, solved
        game = GemHuntGame(generate_task(parse_task_id(task_id)))
        for message in messages[2::2]:
            assert message["content"] == game.optimal_action()
            game.step(message["content"])
        assert game.solved
    try:
        heldout_clean_demonstrations(101, training)
    except ValueError as err:
        assert "only 100 train tasks are unused" in str(err)
    else:
        raise AssertionError("asking for more held-out tasks than exist must fail")


@pytest.mark.slow  # three short SFT runs
def test_a_stalled_warm_start_starts_again_in_another_order(tiny_model_dir, tmp_path):
    """Readiness below ready_at / 10 at redraw_epoch → start from the base model again in another order."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer)
    scripted = iter(
        [0.0, 0.001, 0.2, 0.3, 0.9]
    )  # draw 0 stalls at its epoch 2; draw 1 is ready after 3 epochs
    out = build_warm_model(
        tiny_model_dir, tmp_path / "redrawn", demos, 3, 3e-3, 0, 4, readiness=lambda m: next(scripted),
        ready_at=0.5, max_epochs=3, redraws=2, redraw_epoch=2,
    )  # fmt: skip
    report = json.loads((out / "warm_start.json").read_text())
    assert report["draws"] == 2 and report["epochs_run"] == 3
    assert [(c["draw"], c["epoch"]) for c in report["epoch_checks"]] == [
        (0, 1),
        (0, 2),
        (1, 1),
        (1, 2),
        (1, 3),
    ]
    plain = build_warm_model(tiny_model_dir, tmp_path / "plain", demos, 3, 3e-3, 0, 4)
    redrawn, first_order = _weights_digest(out), _weights_digest(plain)
    assert redrawn != first_order  # another order gives another model (from the same base weights)
    never = iter([0.0, 0.0, 0.0, 0.0])
    out = build_warm_model(
        tiny_model_dir, tmp_path / "no_redraw", demos, 3, 3e-3, 0, 4, readiness=lambda m: next(never),
        ready_at=0.5, max_epochs=4, redraws=0, redraw_epoch=2,
    )  # fmt: skip
    report = json.loads((out / "warm_start.json").read_text())
    assert report["draws"] == 1 and report["epochs_run"] == 4 and report["ready"] is False


def test_masked_token_nll_is_the_models_own_causal_lm_loss(tiny_model_dir):
    """The loss that projects only labelled positions equals Hugging Face's loss over the full logits."""
    import torch
    from transformers import AutoModelForCausalLM

    from loop_agents.orchestration.full_sft import masked_token_nll

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(
        tiny_model_dir, dtype=torch.float32, attn_implementation="eager"
    )
    vocab = model.config.vocab_size
    input_ids = torch.randint(0, vocab, (3, 11))
    attention = torch.ones_like(input_ids)
    attention[1, 8:] = 0  # a padded row
    labels = torch.full_like(input_ids, -100)
    labels[0, 4:9] = input_ids[0, 4:9]
    labels[1, 2:8] = input_ids[1, 2:8]
    labels[2, 10] = input_ids[2, 10]
    expected = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
    got = masked_token_nll(model, input_ids, attention, labels)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    got.backward()  # gradients flow through the selected positions
    assert model.lm_head.weight.grad is not None and model.lm_head.weight.grad.abs().sum() > 0


def test_sdpa_and_eager_warm_starts_agree_on_right_padded_batches(tiny_model_dir, tmp_path):
    """learner.sft_attention=sdpa (AppWorld's long demonstrations) trains the same model as eager up to float
    summation order: the right-padded rows of unequal length are masked the same way by both kernels."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    demos = _demos(tokenizer)
    demos[3].token_ids, demos[3].loss_mask = demos[3].token_ids + demos[3].token_ids, demos[3].loss_mask * 2
    weights = {}
    for attention in ("eager", "sdpa"):
        out = build_warm_model(tiny_model_dir, tmp_path / attention, demos, epochs=2, lr=3e-3, seed=0, batch_size=4,
                               attention=attention)  # fmt: skip
        report = json.loads((out / "warm_start.json").read_text())
        assert report["provenance"].get("attention") == (None if attention == "eager" else "sdpa")
        model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
        weights[attention] = {name: p.detach().clone() for name, p in model.named_parameters()}
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    moved = max(
        (weights["eager"][name] - value).abs().max().item() for name, value in base.named_parameters()
    )
    assert moved > 1e-3  # training changed the weights, so agreeing is not trivial
    for name, value in weights["eager"].items():
        torch.testing.assert_close(weights["sdpa"][name], value, rtol=1e-4, atol=1e-5)


def test_a_stall_probe_redraws_the_order_after_the_redraw_epoch(tiny_model_dir, tmp_path, capsys):
    """`stall_probe` (the gem hunt's: code copied at chance) decides the redraw instead of the readiness rule."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    verdicts = iter(["code copied at P 0.10 < 0.2", None])
    out = build_warm_model(
        tiny_model_dir, tmp_path / "warm", _demos(tokenizer), epochs=2, lr=3e-3, seed=0, batch_size=4,
        readiness=lambda model: 0.5, ready_at=0.05, max_epochs=3, redraws=2, redraw_epoch=1,
        stall_probe=lambda model: next(verdicts),
    )  # fmt: skip
    report = json.loads((out / "warm_start.json").read_text())
    assert report["draws"] == 2 and report["epochs_run"] == 2  # order 1 stalled after epoch 1; order 2 ran 2
    assert (
        "stalled (code copied at P 0.10 < 0.2): starting again in another order (1 of 2)"
        in capsys.readouterr().out
    )


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_a_shared_prefix_batch_gives_the_unshared_loss_and_gradients(tiny_model_dir, attention):
    """learner.sft_share_prefix=auto: right-padded rows of unequal length that share their first 40 tokens run the
    prefix once; the weighted loss (labels inside the prefix too) and every weight's gradient are the unshared
    ones up to float summation order. Below the threshold the batch runs unshared."""
    import torch
    from transformers import AutoModelForCausalLM

    from loop_agents.orchestration.full_sft import batch_prefix, masked_token_nll

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(
        tiny_model_dir, dtype=torch.float32, attn_implementation=attention
    )
    vocab, prefix, lengths = model.config.vocab_size, 40, [52, 70, 45, 61]
    shared = torch.randint(0, vocab, (prefix,))
    input_ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    labels = torch.full_like(input_ids, -100)
    for row, length in enumerate(lengths):
        input_ids[row, :length] = torch.cat([shared, torch.randint(0, vocab, (length - prefix,))])
        attention_mask[row, :length] = 1
        labels[row, prefix - 6 : length] = input_ids[row, prefix - 6 : length]
    weights = torch.rand(input_ids.shape) + 0.5
    assert (
        batch_prefix(input_ids, attention_mask, 32) >= prefix
        and batch_prefix(input_ids, attention_mask, 0) == 0
    )
    results = []
    for min_tokens in (0, 32):
        model.zero_grad()
        loss = masked_token_nll(model, input_ids, attention_mask, labels, weights, min_tokens)
        loss.backward()
        results.append((loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}))
    (unshared, unshared_grads), (shared_loss, shared_grads) = results
    torch.testing.assert_close(shared_loss, unshared, rtol=1e-6, atol=1e-6)
    for name, grad in unshared_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_a_family_without_warm_start_checks_trains_the_set_epochs(tiny_model_dir, tmp_path):
    """A preset's readiness target (experiment=demo's sft_until_p_optimal) with a family that has demonstrations
    but no warm-start checks: exactly `epochs`, no readiness claimed (it ended in an IndexError)."""
    demos = _demos(AutoTokenizer.from_pretrained(tiny_model_dir), 4)
    out = build_warm_model(tiny_model_dir, tmp_path / "warm", demos, epochs=2, lr=3e-3, seed=0, batch_size=4,
                           readiness=None, ready_at=0.05, max_epochs=6, redraws=2, redraw_epoch=1)  # fmt: skip
    report = json.loads((out / "warm_start.json").read_text())
    assert len(report["epoch_losses"]) == 2 and report["ready"] is None and report["draws"] == 1

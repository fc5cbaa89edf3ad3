"""Warm-start demonstrations train exactly on the assistant actions and their `<|im_end|>`."""

from __future__ import annotations

from loop_agents.envs.bundled.demonstrations import generate_demonstrations
from loop_agents.rollout.demonstration import demonstration_trajectory


def test_loss_mask_covers_exactly_the_actions(tiny_model_dir):
    from transformers import AutoTokenizer

    from loop_agents.rollout.chat import ChatFormat

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    chat = ChatFormat(tokenizer)
    ((task_id, messages),) = generate_demonstrations(1, noise=0.5, seed=3)
    traj = demonstration_trajectory(chat, messages, task_id)
    ids, mask = traj.token_ids, traj.loss_mask
    assert ids == chat.encode(chat.render(messages))  # same ids as the template on the whole conversation
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    actions = [m["content"] for m in messages if m["role"] == "assistant"]
    assert trained == "".join(f"{a}<|im_end|>" for a in actions)


def test_code_weight_falls_on_the_answers_code_symbols_only(tiny_model_dir):
    """`env.options.demo_code_weight`: the code of each final `answer <code>` weighs that much, nothing else."""
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from loop_agents.orchestration.demonstrations import demonstration_weights
    from loop_agents.rollout.chat import ChatFormat

    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_dir))
    demos = [demonstration_trajectory(chat, m, t) for t, m in generate_demonstrations(40, noise=0.3, seed=5)]

    def cfg(weight: float):
        return OmegaConf.create({"env": {"name": "bundled", "options": {"demo_code_weight": weight}}})

    assert demonstration_weights(cfg(1.0), chat, demos) is None
    weights = demonstration_weights(cfg(4.0), chat, demos)
    answered = 0
    for traj, row in zip(demos, weights, strict=True):
        heavy = [chat.decode([traj.token_ids[p]]).strip() for p, w in enumerate(row) if w != 1.0]
        last = [m["content"] for m in traj.messages if m["role"] == "assistant"][-1]
        if last.startswith("answer "):
            answered += 1
            assert heavy == last.removeprefix("answer ").split() and set(row) == {1.0, 4.0}
        else:
            assert heavy == []
    assert answered >= 20  # 26 of these 40 noisy demonstrations answer; the others run out of moves


def test_weighted_loss_is_the_weighted_mean_of_the_token_nlls(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    from loop_agents.orchestration.full_sft import masked_token_nll

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(
        tiny_model_dir, dtype=torch.float32, attn_implementation="eager"
    )
    input_ids = torch.randint(0, model.config.vocab_size, (2, 9))
    attention = torch.ones_like(input_ids)
    labels = torch.full_like(input_ids, -100)
    labels[0, 3:7], labels[1, 5:9] = input_ids[0, 3:7], input_ids[1, 5:9]
    weights = torch.ones(2, 9)
    weights[0, 4], weights[1, 8] = 4.0, 3.0
    logprobs = torch.log_softmax(model(input_ids=input_ids).logits.float(), -1)
    nll = {
        (b, t): -logprobs[b, t - 1, input_ids[b, t]]
        for b in range(2)
        for t in range(9)
        if labels[b, t] != -100
    }
    expected = sum(weights[b, t] * v for (b, t), v in nll.items()) / sum(weights[b, t] for b, t in nll)
    torch.testing.assert_close(masked_token_nll(model, input_ids, attention, labels, weights), expected)
    unweighted = masked_token_nll(model, input_ids, attention, labels, torch.ones(2, 9))
    torch.testing.assert_close(unweighted, masked_token_nll(model, input_ids, attention, labels))


def test_the_stall_probe_calls_an_untrained_model_stalled_and_shares_one_scoring_with_readiness(
    tiny_model_dir, monkeypatch
):
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from loop_agents.envs.bundled import warm_checks
    from loop_agents.orchestration.demonstrations import warm_start_checks
    from loop_agents.rollout.chat import ChatFormat

    chat = ChatFormat(AutoTokenizer.from_pretrained(tiny_model_dir))
    cfg = OmegaConf.create(
        {"env": {"name": "bundled", "train_split": "train", "options": {}},
         "learner": {"sft_check_episodes": 20, "sft_stall_copy": 0.2}}
    )  # fmt: skip
    scored = []
    real = warm_checks.episode_probabilities
    monkeypatch.setattr(
        warm_checks, "episode_probabilities", lambda *a: scored.append(1) or real(*a)
    )  # counts the real scoring passes
    readiness, probe = warm_start_checks(cfg, chat, set())
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    assert 0.0 <= readiness(model) < 0.005
    assert probe(model).startswith("code copied at P 0.0") and probe(model).endswith("< 0.2")
    assert len(scored) == 1  # one pass over the check episodes serves readiness and the probe
    with torch.no_grad():
        next(model.parameters()).add_(0.01)  # an optimizer step changes the weights in place
    probe(model)
    assert len(scored) == 2
    cfg.learner.sft_stall_copy = None
    assert warm_start_checks(cfg, chat, set())[1] is None
    cfg.env.name = "babyai"  # a family without warm-start checks
    assert warm_start_checks(cfg, chat, set()) == (None, None)

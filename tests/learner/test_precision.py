"""bf16 autocast on CPUs with bf16 units: device probe, fallback, and the tolerances against the fp32 oracle."""

from __future__ import annotations

import logging

import pytest
import torch

from loop_agents.algorithms import compute_advantages
from loop_agents.learner import Learner
from loop_agents.learner.precision import autocast_dtype, cpu_bf16_flags, cpu_has_bf16
from tests.learner.batch import learner_config, loop_algorithm, make_batch
from tests.learner.test_oracle import reference_result  # noqa: F401  (module fixture: the fp32 oracle)

CPU = torch.device("cpu")


def test_cpu_bf16_flags_are_read_from_cpuinfo_text():
    sapphire = "processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_bf16 amx_tile amx_bf16 amx_int8\n"
    epyc_zen3 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n"
    assert cpu_bf16_flags(sapphire) == {"avx512_bf16", "amx_bf16"}
    assert cpu_bf16_flags(epyc_zen3) == set()
    assert cpu_bf16_flags("") == set()


def test_precision_resolution_and_the_fallback_line(caplog):
    assert autocast_dtype("fp32", CPU, has_bf16=True) is None
    assert autocast_dtype("auto", CPU, has_bf16=True) is torch.bfloat16
    assert autocast_dtype("bf16", CPU, has_bf16=True) is torch.bfloat16
    with caplog.at_level(logging.INFO, logger="loop_agents.learner.precision"):
        assert autocast_dtype("bf16", CPU, has_bf16=False) is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "learner.precision=bf16" in warnings[0].getMessage()
    assert "computing in fp32" in warnings[0].getMessage()
    assert autocast_dtype("auto", CPU, has_bf16=False) is None


def test_bad_precision_value_names_the_key(tiny_model_dir):
    with pytest.raises(ValueError, match="learner.precision='half'"):
        learner_config(tiny_model_dir, precision="half").validate()


@pytest.mark.skipif(not cpu_has_bf16(), reason="this CPU reports neither amx_bf16 nor avx512_bf16")
def test_bf16_autocast_tracks_the_fp32_reference(tiny_model_dir, reference_result):  # noqa: F811
    """Measured on a Xeon with AMX-BF16 (2026-11-25): first-epoch losses <= 1.1e-3 and grad norms
    <= 1.1e-3 relative, later steps <= 1.5e-2, LoRA weights 0.10 relative Frobenius norm after 6 AdamW
    steps at lr 1e-2 (same reasons as the GPU bf16 test in test_oracle.py). A reduction or loss bug is
    off by factors, so these tolerances still catch it; a silent fp32 run would show 0.0 below."""
    batch = make_batch(seed=0)
    compute_advantages(batch, loop_algorithm())
    learner = Learner(learner_config(tiny_model_dir, precision="bf16"), loop_algorithm())
    assert learner.autocast is torch.bfloat16
    learner.train_iteration(batch)
    ref_state, ref_history = reference_result
    grad_rel = []
    for step, (ours, theirs) in enumerate(zip(learner.step_history, ref_history, strict=True)):
        rel = 5e-3 if step < 3 else 5e-2  # 3 minibatches per epoch
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=rel, abs=5e-4)
        assert ours["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=rel)
        grad_rel.append(abs(ours["grad_norm"] - theirs["grad_norm"]) / theirs["grad_norm"])
    assert max(grad_rel) > 0  # bf16 really ran (fp32 matches the reference to float order, ~1e-7)
    state = learner.trainable_state()
    for name, tensor in ref_state.items():
        assert state[name].dtype == torch.float32
        assert float((state[name] - tensor).norm() / tensor.norm()) < 0.2, name

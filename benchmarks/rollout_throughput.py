"""Generated tokens/s through VLLMClient vs a bare aiohttp loop against the same vLLM server (goal: >= 0.8x).

Both sides send the identical `/v1/completions` body (token-id prompt, logprobs=0) with the same prompts and the
same number of requests in flight; the raw side does no parsing beyond json. Tokens are counted from vLLM's own
`vllm:generation_tokens_total` counter. Rounds alternate raw/client to spread the noise of a shared machine.

Usage: .venv/bin/python -m benchmarks.rollout_throughput [--model DIR] [--concurrency 16 64] [--requests 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

from loop_agents.inference.api_key import auth_headers
from loop_agents.inference.client import VLLMClient
from loop_agents.inference.config import InferenceConfig
from loop_agents.inference.protocol import SamplingParams
from loop_agents.inference.server import VLLMServer


def _generated_tokens(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10, headers=auth_headers()).text
    return sum(float(m) for m in re.findall(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)", text, re.M))


async def _raw(
    url: str,
    model: str,
    prompts: list[list[int]],
    max_tokens: int,
    concurrency: int,
    ignore_eos: bool = False,
) -> None:
    gate = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), headers=auth_headers()
    ) as session:

        async def one(prompt: list[int]) -> None:
            body = {
                "model": model,
                "prompt": prompt,
                "max_tokens": max_tokens,
                "temperature": 1.0,
                "logprobs": 0,
                "return_token_ids": True,
                "skip_special_tokens": False,
                "ignore_eos": ignore_eos,
            }
            async with gate:
                # a keep-alive connection the server has just closed: retried, as our client does
                for attempt in range(3):
                    try:
                        async with session.post(f"{url}/v1/completions", json=body) as reply:
                            reply.raise_for_status()
                            await reply.json()
                            return
                    except aiohttp.ServerDisconnectedError:
                        if attempt == 2:
                            raise

        await asyncio.gather(*(one(p) for p in prompts))


async def _client(url: str, model: str, prompts: list[list[int]], max_tokens: int, concurrency: int) -> None:
    gate = asyncio.Semaphore(concurrency)
    client = VLLMClient([url], model)
    params = SamplingParams(max_tokens=max_tokens, temperature=1.0)

    async def one(prompt: list[int]) -> None:
        async with gate:
            await client.generate(prompt, params)

    await asyncio.gather(*(one(p) for p in prompts))
    await client.aclose()


def _measure(fn, url: str, *args) -> float:
    before, started = _generated_tokens(url), time.perf_counter()
    asyncio.run(fn(url, *args))
    elapsed = time.perf_counter() - started
    return (_generated_tokens(url) - before) / elapsed


def run(
    model: str | None = None,
    concurrency: tuple[int, ...] = (16, 64),
    requests: int = 256,
    max_tokens: int = 64,
    rounds: int = 2,
    verbose: bool = True,
) -> list[dict]:
    tmp = Path(tempfile.mkdtemp(prefix="rollout_throughput_"))
    if model is None:
        from loop_agents.tiny_model import build_tiny_model

        model = str(build_tiny_model(tmp / "model"))
    config = InferenceConfig(
        model_path=model, max_model_len=2048, enable_lora=False, dtype="float32", run_dir=str(tmp / "run")
    )
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 1600) for _ in range(32)] for _ in range(requests)]
    server = VLLMServer(config)
    started = time.perf_counter()
    server.start()
    startup_s = time.perf_counter() - started
    rows = []
    try:
        asyncio.run(_raw(server.url, config.served_model_name, prompts[:16], 8, 16))  # warm-up
        for c in concurrency:
            raw, ours = [], []
            for _ in range(rounds):
                raw.append(_measure(_raw, server.url, config.served_model_name, prompts, max_tokens, c))
                ours.append(_measure(_client, server.url, config.served_model_name, prompts, max_tokens, c))
            row = {
                "startup_s": round(startup_s, 1),
                "concurrency": c,
                "raw_tok_s": round(max(raw)),
                "client_tok_s": round(max(ours)),
                "ratio": round(max(ours) / max(raw), 3),
            }
            rows.append(row)
            if verbose:
                print(json.dumps(row), flush=True)
    finally:
        server.stop()
    return rows


def bench(quick: bool = False) -> dict:
    """Entry point of `python -m benchmarks run rollout_throughput`: the worst ratio over the concurrencies."""
    if quick:
        rows = run(concurrency=(16,), requests=64, max_tokens=32, rounds=2)
    else:
        rows = run(concurrency=(16, 64), requests=128, max_tokens=64, rounds=2)
    worst = min(rows, key=lambda r: r["ratio"])
    return {
        "ratio": worst["ratio"],
        "ratio_definition": "VLLMClient generated tok/s / raw aiohttp tok/s, same server/prompts/concurrency, "
        "best of alternating rounds; the lowest ratio over the concurrencies",
        "summary": "; ".join(
            f"concurrency {r['concurrency']}: client {r['client_tok_s']} vs raw {r['raw_tok_s']} tok/s"
            for r in rows
        ),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default=None)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    run(args.model, tuple(args.concurrency), args.requests, args.max_tokens, args.rounds)


if __name__ == "__main__":
    main()

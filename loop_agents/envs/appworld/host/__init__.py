"""The AppWorld episode host's parts, run inside the AppWorld venv by `episode_host.py` (never by the trainer).

common      settings, the monotonic clock, descriptor hygiene, applying the sandbox layers
episode     the per-episode processes: A (enters the namespaces) and B (the world, sandboxed)
evaluation  the evaluator fork E and the sandboxed scoring of a whole experiment
factory     the warmed-up parent that forks the pool's hosts (`episode_host.py --factory`)
service     the HTTP endpoints and the host's warm-up
"""

"""Benchmarks: one script per question, run through `python -m benchmarks` (see benchmarks/runner.py)."""

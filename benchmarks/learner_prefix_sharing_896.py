"""`learner_prefix_sharing` with two decoder layers of Qwen2.5-0.5B's shape (hidden 896, 14 heads, 2 KV heads,
MLP 4864) instead of the 256-wide model: `python -m benchmarks run learner_prefix_sharing_896`."""

from __future__ import annotations

from benchmarks.learner_prefix_sharing import bench as _bench


def bench(quick: bool = False) -> dict:
    """The shared-prefix learner against the unshared one at the 0.5B layer shape (WIDTHS["896"])."""
    return _bench(quick=quick, width="896")

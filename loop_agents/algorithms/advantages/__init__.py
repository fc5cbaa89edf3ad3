"""Advantage estimators: outcome-level (one scalar per rollout) and token-level (per token)."""

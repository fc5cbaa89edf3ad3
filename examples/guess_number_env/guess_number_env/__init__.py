"""Guess-the-number, an example environment family for loop_agents (declared by entry point)."""

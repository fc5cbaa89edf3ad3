"""orchestration package."""

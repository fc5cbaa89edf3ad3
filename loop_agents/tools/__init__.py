"""Tools an environment family offers to a tool-calling agent (declarations, call parsing, validation)."""

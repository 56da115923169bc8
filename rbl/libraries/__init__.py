"""The library catalogue: which libraries exist and their typed pattern parameters."""

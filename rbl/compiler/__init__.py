"""The rbl compiler: parse, lower, check and expand a test space (see compiler/pipeline.py)."""

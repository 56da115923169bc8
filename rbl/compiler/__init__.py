"""The rbl compiler: check, expand and plan a test space read by rbl.lang (see compiler/pipeline.py)."""

"""The checker passes, one module each, run in order by compiler/pipeline.py."""

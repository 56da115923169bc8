"""`python -m rbl` runs the CLI."""

from .cli import main

main()

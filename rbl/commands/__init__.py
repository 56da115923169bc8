"""The `rbl` commands, one module each (check.py, plan.py, compile.py, run.py, calibrate.py,
report.py, diff.py, merge.py, explain.py, import_.py), and what they share: the options of a spec
(options.py), reading and compiling a spec (spec_input.py), a cluster's options (cluster.py), which
backend runs a plan (backend_choice.py), the plan-size policy of `rbl compile -o DIR` (plan_size.py),
what follows a run (after_run.py) and `rbl import`'s safe writing (import_output.py).

rbl/cli.py registers them on the typer app. Each command imports what it needs when it runs, so
loading these modules for `rbl --help` costs next to nothing.
"""

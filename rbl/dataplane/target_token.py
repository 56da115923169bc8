"""How a run's target proves it is the run's own: a token handed to it at start, sent back on
every response (target_app.py), checked by the runner before each round (rbl/runner/liveness.py)."""

TOKEN_HEADER = "X-Rbl-Target"        # added to every response by target_app.py
TOKEN_ENV = "RBL_TARGET_TOKEN"       # how the runner hands the token to gunicorn's workers

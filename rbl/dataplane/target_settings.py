"""The plan's target settings that change how the target app serves, handed to its gunicorn workers
through the environment (target_app.py reads them at import), by every backend the same way."""

from __future__ import annotations

DROP_ABANDONED_ENV = "RBL_TARGET_DROP_ABANDONED"     # "1": /factorial/N stops once its caller has gone


def target_environment(target: dict) -> dict[str, str]:
    """The environment of a target replica for the plan's target record (`target.drop_abandoned`)."""
    return {DROP_ABANDONED_ENV: "1"} if target.get("drop_abandoned") else {}

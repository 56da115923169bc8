"""The original ResilienceBench scheduler's scenario expansion, restated as an independent oracle
(scheduler/app.py build_scenarios + scheduler/utils.py expand_config_template): nested loops over
fault rates, users and clients, recursive dict-copying expansion of list-valued parameters in key
order (first key slowest). Used by the import tests and, as the naive baseline, by bench/."""

from __future__ import annotations

from math import prod


def _generate(template: dict, keys: list) -> list[dict]:
    out = []
    key, values = keys[0]
    for value in values:
        config = template.copy()
        config[key] = value
        out += _generate(config, keys[1:]) if keys[1:] else [config]
    return out


def expand_config_template(template: dict) -> list[dict]:
    keys = [(k, v) for k, v in template.items() if isinstance(v, list)]
    return _generate(template, keys) if keys else [template]


def build_scenarios(conf: dict) -> list[dict]:
    """Every scenario x round, as the original builds them (all in memory)."""
    scenarios = []
    for fault_percentage in conf["fault"]["percentage"]:
        for users in conf["users"]:
            for spec in conf["clientSpecs"]:
                for config in expand_config_template(spec["patternConfig"]):
                    for round_ in range(1, conf["rounds"] + 1):
                        scenarios.append({"patternConfig": config, "users": users, "round": round_,
                                          "faultPercentage": fault_percentage, "lib": spec["lib"],
                                          "strategy": spec["strategy"], "maxRequests": conf["maxRequests"],
                                          "successfulRequests": conf["succRequests"]})
    return scenarios


def expected_size(data: dict) -> int:
    """Equation 1 read straight off the JSON (used by tests as an independent count)."""
    users = data.get("users", data.get("concurrentUsers"))
    rates = data["fault"]["percentage"]
    clients = data.get("clientSpecs", data.get("patterns"))
    confs = [prod(len(v) for v in (c.get("patternConfig") or c.get("configTemplate") or {}).values()
                  if isinstance(v, list)) for c in clients]
    return len(rates) * len(users) * sum(confs)

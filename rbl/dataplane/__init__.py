"""What stands between the client services and the target, and the target: rbl's Envoy-compatible
fault proxy (fault_proxy.py, its admin API the runner drives) and httpbin answering with the run's
token (target_app.py), whose /factorial/N drops abandoned work when the plan's target settings say
so (target_settings.py). Imports nothing of the runner: it runs as its own process or container."""

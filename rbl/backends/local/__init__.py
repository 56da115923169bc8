"""The local backend: httpbin under gunicorn, the fault proxy and the client services as child
processes of the runner on this machine (the embedded default)."""

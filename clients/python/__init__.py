"""rbl's Python client service over tenacity and pybreaker (run as `python -m rbl.clients.python.service`)."""

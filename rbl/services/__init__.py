"""Services rbl ships: the fault proxy and the Python client service."""

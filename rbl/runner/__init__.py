"""Executes plans: local processes today (docker later), fault control, metrics, results."""

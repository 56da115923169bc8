"""Artifact generators: the Envoy config (and, with issue 3, the compose file) for a plan."""

"""The docker backend: the compose file, Envoy config and build context `rbl compile` writes, and
the driver that builds those images and runs their containers through a Docker engine."""

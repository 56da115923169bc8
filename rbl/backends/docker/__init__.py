"""The docker backend: the driver that builds the compose deployment's images (builds.py) and runs
their containers through a Docker engine (driver.py). The deployment and its files are
rbl/targets/compose's, exactly what `rbl compile` writes."""

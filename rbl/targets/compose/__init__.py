"""`rbl compile --target compose`, the default: the deployment model (deployment.py, with the
target's replicas in target_replicas.py and the images in images.py), the compose file and build
context (compose.py), each mesh client's sidecar files (sidecars.py), and artifacts.py, which
writes them all. The docker backend runs exactly this deployment."""

"""What `rbl compile` writes, a package or module per target: compose/ (the default: the
deployment model, the compose file, the fault proxy's and each mesh client's Envoy files, the
docker build context), kubernetes/ (a Job of shards' manifests, the runner image's build context)
and istio.py (a mesh's Istio policies). Beside them, what writing them needs: output_dir.py (what
compile may write and overwrite in -o DIR), envoy.py (the fault proxy's Envoy config),
packaging.py (rbl's own package as images get it), client_builds.py (the client services built
from their sources and cached) and envoy_binary.py (where Envoy comes from, the release images
install).

The run backends import these to apply exactly what compile writes: the docker backend runs the
compose deployment, the kubernetes backend creates the manifests, and the local backend starts
the same client builds and Envoy config on this machine. Nothing here imports a backend or the
runner."""

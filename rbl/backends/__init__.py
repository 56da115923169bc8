"""The places a plan runs, one package each, making its artifacts and driving them: local
(processes on this machine, the embedded default), docker (compose file, build context, Docker
SDK) and kubernetes (manifests, runner image, a Job of shards). Beside them, what they share: the
deployment model, the Envoy config, image choices, compile's output directory, client builds and
rbl's own package as images get it."""

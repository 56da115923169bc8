"""The service mesh as rbl runs it: a mesh (`istio`) client's sidecar Envoy. sidecar_config.py
translates a configuration's Istio policies into the Envoy config Istio's control plane would give
the sidecar; sidecar.py is the running sidecar as the backends start it and the rounds drive it
(switching its configuration, reading its counters). The run backends and the compose target use
it; it imports neither, nor the runner."""

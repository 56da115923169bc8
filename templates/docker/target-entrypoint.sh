#!/bin/sh
# Starts httpbin (gunicorn, loopback only: the clients reach it through the proxy) and then the
# fault proxy in the foreground: Envoy with the mounted config when the image has it and
# RBL_PROXY is not `builtin`, otherwise rbl's built-in proxy with the same admin API.
# RBL_TARGET_ROLE splits the two when the plan sets the target's resources (one container per
# replica, under its own CPU limit): `httpbin` runs only httpbin, on BIND_HOST, in the foreground;
# `proxy` runs only the proxy, in front of the replicas in UPSTREAMS (host:port,...; Envoy's are
# in its config). The default, `all`, runs both.
set -eu
: "${BIND_HOST:=0.0.0.0}" "${PROXY_PORT:=9211}" "${ADMIN_PORT:=9901}" "${HTTPBIN_PORT:=8000}"
: "${HTTPBIN_WORKERS:=2}" "${HTTPBIN_THREADS:=16}" "${RBL_PROXY:=auto}" "${RBL_TARGET_ROLE:=all}"
: "${ENVOY_CONFIG:=/etc/rbl/envoy.yaml}" "${UPSTREAMS:=127.0.0.1:${HTTPBIN_PORT}}"

# With RBL_TARGET_TOKEN (set by `rbl run --backend docker`), httpbin answers with the run's token
# on every response, so the runner can tell its own target from anything else on the port.
app=httpbin:app
if [ -n "${RBL_TARGET_TOKEN:-}" ]; then
    app=rbl.dataplane.target_app:app
fi
set -- --workers "${HTTPBIN_WORKERS}" --worker-class gthread --threads "${HTTPBIN_THREADS}" --graceful-timeout 2 "${app}"
if [ "${RBL_TARGET_ROLE}" = httpbin ]; then
    exec gunicorn --bind "${BIND_HOST}:${HTTPBIN_PORT}" "$@"
elif [ "${RBL_TARGET_ROLE}" != proxy ]; then
    gunicorn --bind "127.0.0.1:${HTTPBIN_PORT}" "$@" &
fi

if [ "${RBL_PROXY}" != builtin ] && command -v envoy >/dev/null 2>&1; then
    exec envoy -c "${ENVOY_CONFIG}" --log-level warning
fi
set -- --listen "${BIND_HOST}:${PROXY_PORT}" --admin "${BIND_HOST}:${ADMIN_PORT}" --upstream "${UPSTREAMS}"
if [ -n "${RBL_PROXY_SEED:-}" ]; then
    set -- "$@" --seed "${RBL_PROXY_SEED}"
fi
exec python -m rbl.dataplane.fault_proxy "$@"

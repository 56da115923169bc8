# The image of `rbl run --backend kubernetes`: rbl with its embedded default (httpbin under
# gunicorn, rbl's fault proxy, the Python client service over tenacity and pybreaker), so a pod
# runs `rbl run --shard I/N` exactly as a machine does. Build arg: PYTHON_IMAGE (a Python 3.11+
# image, or a Debian base with python3-venv: scripts/make-base-image.sh).
ARG PYTHON_IMAGE=python:3.11-slim
FROM ${PYTHON_IMAGE}
COPY rbl /opt/rbl
# a virtual environment: works on python:* images and on Debian bases with python3-venv, whose
# system Python refuses pip installs (PEP 668)
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir /opt/rbl
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /tmp
CMD ["rbl", "--help"]

# rbl's Python client service (tenacity, pybreaker); the library is chosen by --library.
ARG PYTHON_IMAGE
FROM ${PYTHON_IMAGE}
COPY rbl /opt/rbl
# a virtual environment: works on python:* images and on Debian bases with python3-venv, whose
# system Python refuses pip installs (PEP 668)
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir /opt/rbl
ENV PATH=/opt/venv/bin:$PATH
ENTRYPOINT ["python", "-m", "rbl.clients.python.service"]

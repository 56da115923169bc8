# rbl's Python client service (tenacity, pybreaker); the library is chosen by --library.
ARG PYTHON_IMAGE
FROM ${PYTHON_IMAGE}
COPY rbl /opt/rbl
RUN pip install --no-cache-dir /opt/rbl
ENTRYPOINT ["python", "-m", "rbl.services.python_client"]

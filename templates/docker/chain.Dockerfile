# rbl-chain, the synthetic service every tier of a topology runs (services/chain, Go standard library
# only: no module to download). A static binary, run on a small base; the compose file starts one
# container per replica with its configuration mounted at /etc/rbl/chain/config.json.
# Build args: GOLANG_IMAGE, DEBIAN_IMAGE.
ARG GOLANG_IMAGE
ARG DEBIAN_IMAGE
FROM ${GOLANG_IMAGE} AS build
WORKDIR /src
COPY clients/chain /src
RUN CGO_ENABLED=0 go build -trimpath -mod=readonly -o /out/rbl-chain ./cmd/rbl-chain

FROM ${DEBIAN_IMAGE}
COPY --from=build /out/rbl-chain /opt/rbl/rbl-chain
ENTRYPOINT ["/opt/rbl/rbl-chain"]

# rbl's Go client service (clients/go: failsafe-go, gobreaker, cenkalti/backoff); the library is chosen
# by --library. A static binary (modules pinned by go.sum), run on a small base.
# Build args: GOLANG_IMAGE, DEBIAN_IMAGE.
ARG GOLANG_IMAGE
ARG DEBIAN_IMAGE
FROM ${GOLANG_IMAGE} AS build
WORKDIR /src
COPY clients/go /src
RUN CGO_ENABLED=0 go build -trimpath -mod=readonly -o /out/rbl-client-go ./cmd/rbl-client-go

FROM ${DEBIAN_IMAGE}
COPY --from=build /out/rbl-client-go /opt/rbl/rbl-client-go
ENTRYPOINT ["/opt/rbl/rbl-client-go"]

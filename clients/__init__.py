"""Client services, one directory per runtime (python/, resilience4j/, node/, go/), and the
protocol they all speak (protocol.py), shipped as rbl.clients so an installed rbl can run and
build them; see rbl/targets/client_builds.py for the ones built in other languages."""

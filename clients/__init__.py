"""Client services in their own languages (clients/<kind>/), shipped as rbl.clients so an installed
rbl can build them; see rbl/runner/client_builds.py."""

"""The services of a topology, one directory each (chain/: rbl-chain, the synthetic service every tier
runs), shipped as rbl.services so an installed rbl can build them; see rbl/targets/client_builds.py."""

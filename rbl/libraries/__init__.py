"""The library catalogue: which libraries exist and their typed pattern parameters, how a composed
client's configuration splits by policy, and Istio's defaults that several parts rely on."""

"""The Envoy bootstrap `rbl run --proxy envoy` writes carries what the runner's fault control needs.
(Validation against Envoy's API protos is issue 3; no Envoy binary exists here to run it.)"""

from __future__ import annotations

from rbl.backends.envoy import envoy_bootstrap


def test_bootstrap_has_admin_layer_fault_blocks_before_the_router_and_loopback_addresses():
    config = envoy_bootstrap(listen_port=10000, admin_port=9901, upstream_host="127.0.0.1", upstream_port=8000)
    assert config["admin"]["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 9901}
    assert any("admin_layer" in layer for layer in config["layered_runtime"]["layers"])
    (listener,) = config["static_resources"]["listeners"]
    assert listener["address"]["socket_address"]["address"] == "127.0.0.1"
    manager = listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert manager["stat_prefix"] == "ingress_http"
    names = [f["name"] for f in manager["http_filters"]]
    assert names == ["envoy.filters.http.fault", "envoy.filters.http.router"]
    fault = manager["http_filters"][0]["typed_config"]
    assert fault["abort"]["percentage"]["numerator"] == 0
    assert fault["delay"]["percentage"]["numerator"] == 0
    endpoint = config["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    assert endpoint["endpoint"]["address"]["socket_address"]["port_value"] == 8000

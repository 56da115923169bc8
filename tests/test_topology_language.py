"""Topologies in the language: `topology { service ... }`, placements (`host`), the plan's
record, and the located, coded errors of a topology that cannot run."""

from __future__ import annotations

import json
import os

import pytest

from rbl.compiler.pipeline import compile_source
from rbl.compiler.plan import plan_header
from rbl.topology import CLIENT, Edge, topology_from_record

CART = """\
space cart {
  load = open
  load.rate = 120%
  topology {
    entry = frontend
    service frontend {
      work = factorial(300)
      cpus = 0.5
      calls recommendation
      calls productcatalog * 4 parallel
    }
    service recommendation {
      work = sleep(2ms)
      calls productcatalog
    }
    service productcatalog {
      work = factorial(1000)
      replicas = 3
      cpus = 0.5
      noisy_cpus = 0.25
    }
  }
  client istio.circuit_breaker {
    http2MaxRequests = 20
    host in [frontend, recommendation, productcatalog, all]
  }
  client istio.retry + circuit_breaker as storm {
    retry.attempts = 1
    retry.host = productcatalog
    circuit_breaker.http2MaxRequests in [1, 1024]
    circuit_breaker.host = productcatalog
  }
  client resilience4j.retry { maxAttempts = 2 }
}
"""


def compiled(text: str):
    result = compile_source(text, "spec.rbl")
    assert result.ok, [f"{d.code} {d.message}" for d in result.diagnostics]
    return result.space


def errors(text: str) -> list[tuple[str, int, int, str]]:
    result = compile_source(text, "spec.rbl")
    assert not result.ok
    return [(d.code, d.labels[0].span.line, d.labels[0].span.col, d.message)
            for d in result.diagnostics if d.severity == "error"]


def test_the_cart_topology_is_the_papers_figure():
    space = compiled(CART)
    topology = space.topology
    assert topology.entry == "frontend" and topology.names == ("frontend", "recommendation", "productcatalog")
    assert topology.tiers() == {"frontend": 1, "recommendation": 2, "productcatalog": 3}
    # /cart: frontend -> recommendation x1 and productcatalog x4, recommendation -> productcatalog x1
    assert topology.requests_per_entry() == {"frontend": 1, "recommendation": 1, "productcatalog": 5}
    assert set(topology.edges()) == {Edge(CLIENT, "frontend", 1), Edge("frontend", "recommendation", 1),
                                      Edge("frontend", "productcatalog", 4), Edge("recommendation", "productcatalog", 1)}
    catalogue = topology.service("productcatalog")
    assert [catalogue.replica_cpus(r) for r in range(3)] == [0.5, 0.5, 0.25]
    assert topology.service("recommendation").work.amount == 2000          # microseconds


def test_retries_multiply_along_every_path_in_the_worst_case():
    topology = compiled(CART).topology
    # one retry of every call of productcatalog: 4 x 2 from the frontend, 1 x 2 from recommendation
    assert topology.worst_case_per_entry({"productcatalog": 1})["productcatalog"] == 10
    # and one of the entry too: everything below it is asked twice as often
    assert topology.worst_case_per_entry({"productcatalog": 1, "frontend": 1}) == {
        "frontend": 2, "recommendation": 2, "productcatalog": 20}


def test_a_placement_axis_is_several_configurations():
    space = compiled(CART)
    assert space.size == 4 + 2 + 1
    header = plan_header(space)
    assert header["clients"][0]["parameters"]["host"]["values"] == ["frontend", "recommendation",
                                                                     "productcatalog", "all"]
    assert header["clients"][1]["parameters"]["retry.host"]["value"] == "productcatalog"
    assert header["target"] == {"path": "/"}
    assert "at" not in header["fault"]               # faults are injected where the load enters
    assert topology_from_record(json.loads(json.dumps(header["topology"]))) == space.topology


def test_the_plan_with_a_topology_keeps_to_its_schema(tmp_path):
    from rbl.compiler.plan import write_plan
    from rbl.store.plan_file import load_plan_file            # the checks `rbl run PLAN` makes
    space = compiled(CART)
    write_plan(space, tmp_path)
    header, scenarios = load_plan_file(tmp_path / "plan.json")
    assert len(list(scenarios)) == space.size
    assert header["topology"]["entry"] == "frontend"


@pytest.mark.parametrize("edit, problem", [
    (lambda t: t["services"][1]["calls"].append({"service": "frontend", "times": 1, "parallel": False}),
     "topology: the calls go round in a cycle: frontend -> recommendation -> frontend"),
    (lambda t: t.update(entry="nowhere"), "topology: the entry 'nowhere' is not a service"),
    (lambda t: t["services"][0]["calls"][0].update(service="ghost"), "topology: frontend calls 'ghost', which is not a service"),
])
def test_a_plan_whose_topology_cannot_run_is_refused(tmp_path, edit, problem):
    from rbl.compiler.plan import write_plan
    from rbl.errors import UsageError
    from rbl.store.plan_file import load_plan_file
    write_plan(compiled(CART), tmp_path)
    plan = json.loads((tmp_path / "plan.json").read_text())
    edit(plan["topology"])
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(UsageError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        load_plan_file(tmp_path / "plan.json")


def test_a_space_without_a_topology_has_the_plan_it_had():
    space = compiled("space s {\n  users = 1\n  client istio.retry {}\n}\n")
    header = plan_header(space)
    assert space.topology is None and "topology" not in header and "at" not in header["fault"]
    assert "host" not in header["clients"][0]["parameters"]


def _space(topology: str, client: str = "client istio.retry {}", extra: str = "") -> str:
    return f"space s {{\n  users = 1\n{extra}  topology {{\n{topology}\n  }}\n  {client}\n}}\n"


@pytest.mark.parametrize("topology, extra, client, expected", [
    ("    service a { calls b }\n    service c { work = none() }", "", "client istio.retry {}",
     ("E0601", 4, 23, "no service `b` in the topology")),
    ("    service a { calls a }", "", "client istio.retry {}", ("E0602", 4, 23, "service `a` calls itself")),
    ("    entry = a\n    service a { calls b }\n    service b { calls c }\n    service c { calls a }", "",
     "client istio.retry {}", ("E0602", 5, 23, "the calls go round in a cycle: a -> b -> c -> a")),
    ("    service a { replicas = 0 }", "", "client istio.retry {}",
     ("E0203", 4, 28, "`replicas` of service `a` must be >= 1, found 0")),
    ("    service a { cpus = 1000 }", "", "client istio.retry {}",
     ("E0203", 4, 24, "`cpus` of service `a` must be <= 256.0, found 1000.0")),
    ("    service a { work = none() }", "", "client istio.retry { host = b }",
     ("E0601", 6, 24, "no service `b` in the topology")),
    ("    service a { work = none() }", "  fault.at = z\n", "client istio.retry {}",
     ("E0601", 3, 14, "no service `z` in the topology")),
    ("    service a { work = none() }\n    service b { work = none() }", "", "client istio.retry {}",
     ("E0604", 3, 3, "the topology does not say which service the load calls")),
    ("    service a { work = none() }", "  target = \"/bytes/5\"\n", "client istio.retry {}",
     ("E0604", 3, 3, "`target` does not apply to a space with a topology")),
    ("    service a { work = none() }", "  target.drop_abandoned = true\n", "client istio.retry {}",
     ("E0604", 3, 3, "`target.drop_abandoned` does not apply to a space with a topology")),
    ("    service a { work = none() }\n    service a { work = none() }", "", "client istio.retry {}",
     ("E0604", 5, 13, "service `a` is declared twice")),
    ("    service a { calls b * 101 }\n    service b { work = none() }", "", "client istio.retry {}",
     ("E0203", 4, 27, "a service calls another 1 to 100 times in a step, found 101")),
    ("    service a { work = spin(3) }", "", "client istio.retry {}", ("E0211", 4, 24, "`spin` is not a kind of work")),
    ("    service a { calls b * 2 paralel }\n    service b { work = none() }", "", "client istio.retry {}",
     ("E0211", 4, 29, "`paralel` is not how calls are made")),
])
def test_a_bad_topology_is_a_located_coded_error(topology, extra, client, expected):
    assert expected in errors(_space(topology, client, extra))


def test_a_budget_above_the_machines_cores_is_refused():
    cores = os.cpu_count() or 1
    found = errors(_space(f"    service a {{ cpus = {cores + 1} }}"))
    assert ("E0603", 4, 24, f"`cpus` {cores + 1} is more than this machine's {cores} cores") in found


def test_a_placement_without_a_topology_says_what_is_missing():
    found = errors("space s {\n  users = 1\n  client istio.circuit_breaker {\n    http2MaxRequests = 1\n"
                   "    host = frontend\n  }\n}\n")
    assert found == [("E0604", 5, 5, "`host` of client `istio.circuit_breaker` places it on a service, but the "
                                     "space has no topology")]


def test_a_fault_placed_without_a_topology_says_what_is_missing():
    found = errors("space s {\n  users = 1\n  fault.at = back\n  client istio.retry {}\n}\n")
    assert found == [("E0604", 3, 14, "`fault.at` places it on a service, but the space has no topology")]


def test_a_fault_placed_on_a_service_is_in_every_scenario():
    space = compiled(CART.replace("load.rate = 120%", "load.rate = 120%\n  fault.at = productcatalog"))
    header = plan_header(space)
    assert header["fault"]["at"] == "productcatalog" and "by" not in header["fault"]
    by_sidecar = compiled(CART.replace("load.rate = 120%", "load.rate = 120%\n  fault.at = productcatalog\n"
                                                            "  fault.by = sidecar"))
    assert plan_header(by_sidecar)["fault"]["by"] == "sidecar"


def test_a_fault_on_one_edge_names_a_caller_of_its_service():
    one_edge = compiled(CART.replace("load.rate = 120%", "load.rate = 120%\n  fault.at = productcatalog\n"
                                                          "  fault.by = sidecar\n  fault.from = recommendation"))
    assert plan_header(one_edge)["fault"]["from"] == "recommendation"
    wrong = CART.replace("load.rate = 120%", "load.rate = 120%\n  fault.at = recommendation\n"
                                             "  fault.by = sidecar\n  fault.from = productcatalog")
    assert ("E0604", 6, 16, "`productcatalog` does not call `recommendation`: no edge to inject the fault on") \
        in errors(wrong)
    alone = CART.replace("load.rate = 120%", "load.rate = 120%\n  fault.at = productcatalog\n  fault.from = frontend")
    assert ("E0219", 5, 3, "`fault.from` only applies to a fault the callers' sidecars inject") in errors(alone)


def test_who_injects_a_fault_needs_where():
    found = errors(_space("    service a { work = none() }", extra="  fault.by = sidecar\n"))
    assert found == [("E0219", 3, 3, "`fault.by` only applies to a fault placed with `fault.at`")]


def test_a_pool_with_only_a_placement_is_still_a_pool_istio_refuses():
    found = errors(_space("    service a { work = none() }", "client istio.circuit_breaker { host = a }"))
    assert found[0][0] == "E0227"


def test_fan_out_beyond_the_bound_is_refused():
    tiers = "\n".join(f"    service s{i} {{ calls s{i + 1} * 100 }}" for i in range(3)) + "\n    service s3 { work = none() }"
    assert any(code == "E0604" and "becomes" in message for code, _, _, message in errors(_space(tiers)))


def test_an_unreached_service_is_a_warning():
    result = compile_source(_space("    entry = a\n    service a { work = none() }\n    service b { work = none() }"),
                            "spec.rbl")
    assert result.ok
    assert [(d.code, d.message) for d in result.diagnostics] == [("W0601", "service `b` is never called")]


def test_topology_is_a_keyword_only_where_a_statement_starts():
    # the fast reader hands a topology to Lark; both read `topology = 1` as Lark does (a syntax error)
    assert errors("space s {\n  users = 1\n  topology = 1\n  client istio.retry {}\n}\n")[0][0] == "E0101"
    # and a name `topology` in value position is still a name
    assert errors("space s {\n  users = 1\n  fault.kind = topology\n  client istio.retry {}\n}\n")[0][0] == "E0211"


@pytest.mark.parametrize("args, refusal, hint", [
    (["--backend", "docker", "--network", "host"], "a topology runs each replica in a network namespace of its own",
     "leave out --network host"),
])
def test_a_topology_a_backend_cannot_run_is_a_located_refusal_naming_what_runs_it(tmp_path, args, refusal, hint):
    from .conftest import REPO, run_rbl
    spec = REPO / "examples" / "boutique-cart.rbl"
    line = next(n for n, text in enumerate(spec.read_text().splitlines(), 1) if text.strip().startswith("topology"))
    done = run_rbl("run", str(spec), *args, "-o", "run", cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert f"boutique-cart.rbl:{line}:3: {refusal}" in done.stderr, done.stderr
    assert hint in done.stderr
    assert not (tmp_path / "run").exists()

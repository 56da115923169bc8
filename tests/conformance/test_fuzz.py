"""Fuzzing every client service's request parsing (hypothesis): random JSON in every job field and
random bytes on the wire always get a well-formed reply (200, 4xx or 503), never a hang or a
dropped connection, and the service stays healthy; random target URLs run exactly when the
compiler's rule for a target path accepts them (hostile.runs)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rbl.clients.protocol import MAX_COUNT
from rbl.compiler.urlpath import MAX_TARGET_LENGTH

from . import hostile
from .conftest import ids, selected_profiles

ALL = selected_profiles()
FIELDS = ("strategy", "target_url", "successes", "max_requests", "share", "instance", "vu", "max_duration_ms")
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False,
    allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)


def short(job: dict) -> dict:
    """Keep a job that happens to be valid short: few successes and requests, half a second at most."""
    for key, high in (("successes", 3), ("max_requests", 6), ("max_duration_ms", 500)):
        value = job.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= max(MAX_COUNT, 86_400_000):
            job[key] = min(value, high)
    job.setdefault("max_duration_ms", 500)
    return job


def assert_well_formed(url: str, data: bytes) -> None:
    status, reply, _ = hostile.raw_exchange(url, data, shut_write=True, timeout=30)
    assert status == 200 or 400 <= status < 500 or status == 503, f"{status} {reply!r:.200} for {data[:200]!r}"
    assert isinstance(reply, dict) and (status == 200 or reply.get("error")), reply


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_random_json_in_every_field(client_url, start_proxy, profile):
    url, proxy = client_url(profile), start_proxy()
    proxy.set_fault(abort__abort_percent=50, abort__http_status=503)
    valid = hostile.job_for(proxy, max_duration_ms=500)
    steps = st.lists(st.fixed_dictionaries({"pattern": st.sampled_from(profile.patterns) | st.text(max_size=8),
                                            "params": st.dictionaries(st.text(max_size=12), json_values, max_size=3)
                                            | json_values}), max_size=3)

    @FUZZ
    @given(changes=st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=4), strategy=steps | json_values)
    def fuzz(changes, strategy):
        job = short({**valid, "strategy": strategy, **changes})
        assert_well_formed(url, hostile.post_raw(json.dumps(job).encode()))

    fuzz()
    hostile.assert_healthy(url)


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_random_bytes(client_url, start_proxy, profile):
    url, proxy = client_url(profile), start_proxy()
    valid = json.dumps(hostile.job_for(proxy, max_duration_ms=500)).encode()
    request_lines = st.sampled_from([b"POST /run HTTP/1.1\r\n", b"GET /health HTTP/1.1\r\n", b"POST /run HTTP/1.0\r\n"])
    headers = st.lists(st.sampled_from([b"Content-Length: 5\r\n", b"Content-Length: -1\r\n", b"Transfer-Encoding: x\r\n",
                                        b"Expect: 100-continue\r\n", b"Connection: close\r\n", b": x\r\n"])
                       | st.binary(max_size=30).map(lambda b: b + b"\r\n"), max_size=4)

    @FUZZ
    @given(data=st.binary(min_size=1, max_size=300)
           | st.tuples(request_lines, headers, st.binary(max_size=100) | st.just(valid)).map(
               lambda t: t[0] + b"".join(t[1]) + b"\r\n" + t[2])
           | st.binary(max_size=40).map(lambda junk: valid[:len(valid) // 2] + junk).map(hostile.post_raw))
    def fuzz(data):
        if not data.strip(b"\r\n"):
            return                       # no request at all: nothing to answer
        assert_well_formed(url, data)

    fuzz()
    hostile.assert_healthy(url)


# Characters a target path may or may not hold, weighted toward the ones with a special meaning
PATH_CHARACTERS = list("ab/?%#@[]:;=&'!*+,-._~ \\\t\n\"<>^`{|}") + ["0", "4", "A", "F", "f", "G", "g", "\u00e9", "\x00",
                                                                 "\x7f", "\U0001F600"]


def target_urls(port: int):
    """Random target URLs: mostly the --target's authority, a path of the characters above (or one
    around the length limit), sometimes another scheme, authority or port."""
    authorities = [f"127.0.0.1:{port}"] * 8 + [f"127.0.0.1:0{port}", f"127.0.0.1:{port}0", "127.0.0.1",
                                                f"127.0.0.1:{port + 1}", f"x@127.0.0.1:{port}", f"[::1]:{port}",
                                                f"127.0.0.1:{port}:{port}", "[::1", f"localhost:{port}", ""]
    schemes = ["http://"] * 8 + ["https://", "HTTP://", "http:/", "http:", ""]
    paths = (st.text(st.sampled_from(PATH_CHARACTERS), max_size=24)
             | st.text(st.sampled_from(PATH_CHARACTERS), max_size=24).map(lambda p: "/" + p)
             | st.integers(MAX_TARGET_LENGTH - 3, MAX_TARGET_LENGTH + 2).map(lambda n: "/" + "a" * (n - 1))
             | st.integers(MAX_TARGET_LENGTH - 3, MAX_TARGET_LENGTH + 2).map(lambda n: "/a?" + "%20" * ((n - 3) // 3)))
    return st.builds(lambda scheme, authority, path: scheme + authority + path,
                     st.sampled_from(schemes), st.sampled_from(authorities), paths)


def fuzz_target_urls(url: str, proxy, examples: int = 150) -> None:
    @settings(FUZZ, max_examples=examples)
    @given(target_url=target_urls(proxy.data_port))
    def fuzz(target_url):
        hostile.assert_target_url(url, proxy, target_url)

    fuzz()


@pytest.mark.parametrize("profile", ALL, ids=ids(ALL))
def test_random_target_urls_run_exactly_when_the_compiler_accepts_them(client_url, start_proxy, profile):
    url = client_url(profile)
    fuzz_target_urls(url, start_proxy())
    hostile.assert_healthy(url)

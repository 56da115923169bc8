"""Client service overhead per request, and 150 concurrent virtual users, for the JVM client; the
same per-request gap for every other client (Python, Node.js, Go), side by side.

The overhead is what the client measures itself: within one virtual user's loop, the time from
the end of one request to the start of the next (the pattern's decorators, the loop, recording
the observation) - time not spent waiting on the target. Because the client's HTTP stack sits
inside its measured request time, the bench also compares the client's median request time with
a bare keep-alive socket loop's on the same target (one user), and checks gap + that difference. Measured through the real fault proxy
(0% faults) in front of httpbin, for baseline, retry and circuit breaker, with 1 and 10
concurrent virtual users; then 150 concurrent virtual users must all finish without an error.
The Python client is measured the same way, for comparison. Target: median < 200 us
for the JVM client, and no errors at 150 users.

Start-up and the first job: each client service is started afresh as the runner starts
it (process start to `listening` and a healthy /health; target < 1 s for the JVM client), then its
very first job is compared with the jobs after it: the first request of the first job against the
median first request of the later jobs (each job opens its own connection), and the first job's
wall time against theirs. Targets: equal within noise (at most 2x the steady median).

Clients are table-driven: KINDS says how the runner starts each library's service, STRATEGIES
what each is measured with; a new client is one entry in each.

python3 bench/client_overhead.py [--successes 200] [--startups 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rbl.targets.client_builds import client_jar  # noqa: E402
from rbl.backends.local.backend import LocalOptions, LocalServices  # noqa: E402

TARGET_US = 200
STARTUP_TARGET_S = {"resilience4j": 1.0}
FIRST_JOB_FACTOR = 2.0
KINDS = {"resilience4j": "resilience4j", "tenacity": "python",     # library -> client service kind
         "cockatiel": "node", "opossum": "node", "failsafe": "go", "gobreaker": "go", "backoff": "go"}
STACK_CHECKED = ("resilience4j", "failsafe")    # gap + HTTP stack < TARGET_US: the JVM and the Go client
STRATEGIES = {
    "resilience4j": {
        "baseline": [],
        "retry": [{"pattern": "retry", "params": {"maxAttempts": 3, "intervalFunction": "FIXED", "waitDuration": 10}}],
        "circuit_breaker": [{"pattern": "circuit_breaker", "params": {"slidingWindowSize": 10,
                                                                      "minimumNumberOfCalls": 10,
                                                                      "waitDurationInOpenState": 50}}],
    },
    "tenacity": {
        "baseline": [],
        "retry": [{"pattern": "retry", "params": {"stop_after_attempt": 3, "wait": "fixed", "wait_fixed": 0.01}}],
    },
    "cockatiel": {
        "baseline": [],
        "retry": [{"pattern": "retry", "params": {"maxAttempts": 2, "backoff": "CONSTANT", "initialDelay": 10}}],
        "circuit_breaker": [{"pattern": "circuit_breaker", "params": {"exceptionsAllowedBeforeBreaking": 10,
                                                                      "halfOpenAfter": 50}}],
    },
    "opossum": {"circuit_breaker": [{"pattern": "circuit_breaker", "params": {"volumeThreshold": 10,
                                                                              "resetTimeout": 50}}]},
    "failsafe": {
        "baseline": [],
        "retry": [{"pattern": "retry", "params": {"maxAttempts": 3, "delay": 10}}],
        "circuit_breaker": [{"pattern": "circuit_breaker", "params": {"failureThreshold": 10, "delay": 50}}],
    },
    "gobreaker": {"circuit_breaker": [{"pattern": "circuit_breaker", "params": {"consecutiveFailures": 9,
                                                                                "timeout": 50}}]},
    "backoff": {"retry": [{"pattern": "retry", "params": {"maxTries": 3, "backOff": "CONSTANT", "interval": 10}}]},
}


def post_job(port: int, job: dict) -> dict:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    connection.request("POST", "/run", body=json.dumps(job))
    response = connection.getresponse()
    body = json.loads(response.read())
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"client answered {response.status}: {body}")
    return body


def run_users(port: int, target_url: str, strategy: list, users: int, successes: int) -> list[dict]:
    jobs = [{"strategy": strategy, "target_url": target_url, "successes": successes, "max_requests": successes * 3,
             "share": "user", "instance": "bench", "vu": vu} for vu in range(1, users + 1)]
    with ThreadPoolExecutor(max_workers=users) as pool:
        return list(pool.map(lambda job: post_job(port, job), jobs))


def gaps_us(replies: list[dict]) -> list[int]:
    gaps = []
    for reply in replies:
        requests = [r for call in reply["calls"] for r in call["requests"]]
        gaps += [b[0] - (a[0] + a[1]) for a, b in zip(requests, requests[1:])]
    return gaps


def bare_socket_request_us(target_url: str, count: int = 400) -> float:
    """Median request time of a minimal keep-alive HTTP/1.1 loop (no library, no decorators)."""
    import socket
    import time
    from urllib.parse import urlsplit
    url = urlsplit(target_url)
    request = f"GET {url.path} HTTP/1.1\r\nHost: {url.hostname}\r\n\r\n".encode()
    times = []
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        for _ in range(count):
            begin = time.perf_counter_ns()
            sock.sendall(request)
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            reader.read(length)
            times.append((time.perf_counter_ns() - begin) / 1000)
    return statistics.median(times[count // 4:])


def request_us(replies: list[dict]) -> float:
    return statistics.median(r[1] for reply in replies for call in reply["calls"] for r in call["requests"])


def errors(replies: list[dict], successes: int) -> int:
    """Virtual users that did not reach their successes, or saw a failed request (0% faults)."""
    return sum(1 for reply in replies
               if reply["stopped_by"] != "successes"
               or any(r[2] != 200 for call in reply["calls"] for r in call["requests"])
               or sum(call["ok"] for call in reply["calls"]) != successes)


def fresh_start_s(backend: LocalServices, library: str) -> float:
    """Stops the library's client service and starts a new one as the runner does; its start-up time."""
    service, _ = backend.clients.pop(library)
    service.stop(grace=1.0)
    backend.services.remove(service)
    begin = time.perf_counter()
    backend.start_client(library)
    return time.perf_counter() - begin


def timed_job(port: int, target_url: str, strategy: list, successes: int) -> tuple[float, list[int]]:
    """(wall ms of one 1-user job, its requests' durations in us)."""
    begin = time.perf_counter()
    (reply,) = run_users(port, target_url, strategy, 1, successes)
    wall = (time.perf_counter() - begin) * 1000
    return wall, [r[1] for call in reply["calls"] for r in call["requests"]]


def startup_and_first_job(backend: LocalServices, target_url: str, startups: int) -> bool:
    """Start-up time, then the first job after `listening` against the steady state, per client and pattern."""
    ok = True
    print(f"\n{'client':<14} {'strategy':<16} {'start-up s':>10} {'1st request us':>15} {'steady 1st us':>14} "
          f"{'1st job ms':>11} {'steady job ms':>14}")
    for library, strategies in STRATEGIES.items():
        for name, strategy in strategies.items():
            starts, firsts, steady_firsts, first_walls, steady_walls = [], [], [], [], []
            for _ in range(startups):
                starts.append(fresh_start_s(backend, library))
                port = backend.client_address(library)[1]
                wall, requests = timed_job(port, target_url, strategy, 20)
                first_walls.append(wall)
                firsts.append(requests[0])
                for _ in range(5):
                    wall, requests = timed_job(port, target_url, strategy, 20)
                    steady_walls.append(wall)
                    steady_firsts.append(requests[0])
            start, first, steady_first = map(statistics.median, (starts, firsts, steady_firsts))
            first_wall, steady_wall = statistics.median(first_walls), statistics.median(steady_walls)
            verdicts = []
            if library in STARTUP_TARGET_S:
                met = start < STARTUP_TARGET_S[library]
                ok &= met
                verdicts.append(f"start-up {'ok' if met else f'MISSED (target < {STARTUP_TARGET_S[library]:g} s)'}")
            met = first <= FIRST_JOB_FACTOR * steady_first and first_wall <= FIRST_JOB_FACTOR * steady_wall
            ok &= met
            verdicts.append("first job ok" if met else f"first job MISSED (target <= {FIRST_JOB_FACTOR:g}x steady)")
            print(f"{library:<14} {name:<16} {start:>10.2f} {first:>15.0f} {steady_first:>14.0f} {first_wall:>11.1f} "
                  f"{steady_wall:>14.1f}  {', '.join(verdicts)}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--successes", type=int, default=200, help="successful calls per virtual user")
    parser.add_argument("--startups", type=int, default=3, help="fresh starts per client and pattern (medians)")
    parser.add_argument("--startup-only", action="store_true", help="only the start-up and first-job part")
    args = parser.parse_args()
    jars = {library: client_jar(kind, say=print) for library, kind in KINDS.items() if kind != "python"}
    options = LocalOptions(proxy="builtin", seed=1, client_jars=jars)
    ok = True
    with tempfile.TemporaryDirectory() as logs, LocalServices(Path(logs), KINDS, options) as backend:
        backend.fault.apply({"kind": "abort", "rate": 0, "status": 503})
        target_url = backend.target_url("/bytes/100")
        if args.startup_only:
            return 0 if startup_and_first_job(backend, target_url, args.startups) else 1
        print(f"{'client':<14} {'strategy':<16} {'users':>5} {'requests':>9} {'gap p50 us':>11} {'p95 us':>8}")
        side_by_side: dict[str, dict[str, float]] = {}                     # library -> strategy -> 1-user gap
        for library, strategies in STRATEGIES.items():
            port = backend.client_address(library)[1]
            run_users(port, target_url, [], 10, 50)                       # warm-up (JIT, connections)
            for name, strategy in strategies.items():
                for users in (1, 10):
                    replies = run_users(port, target_url, strategy, users, args.successes)
                    gaps = sorted(gaps_us(replies))
                    median, p95 = statistics.median(gaps), gaps[int(len(gaps) * 0.95)]
                    if users == 1:
                        side_by_side.setdefault(library, {})[name] = median
                    verdict = ""
                    if library == "resilience4j":
                        verdict = "ok" if median < TARGET_US else f"MISSED (target < {TARGET_US})"
                        ok &= median < TARGET_US
                    print(f"{library:<14} {name:<16} {users:>5} {len(gaps) + len(replies):>9} {median:>11.0f} "
                          f"{p95:>8.0f}  {verdict}")
        print("\nper-request gap p50 (us), 1 virtual user, every client side by side")
        print(f"{'client':<14} {'kind':<13}" + "".join(f"{name:>17}" for name in ("baseline", "retry", "circuit_breaker")))
        for library, gaps_by_strategy in side_by_side.items():
            print(f"{library:<14} {KINDS[library]:<13}" + "".join(
                f"{gaps_by_strategy[name]:>17.0f}" if name in gaps_by_strategy else f"{'-':>17}"
                for name in ("baseline", "retry", "circuit_breaker")))
        bare = bare_socket_request_us(target_url)
        for library in STACK_CHECKED:
            port = backend.client_address(library)[1]
            replies = run_users(port, target_url, [], 1, args.successes * 2)
            stack = request_us(replies) - bare
            total = statistics.median(gaps_us(replies)) + stack
            print(f"{library:<14} baseline, 1 user: request p50 {request_us(replies):.0f} us vs a bare socket loop's "
                  f"{bare:.0f} us: HTTP stack +{stack:.0f} us; gap + stack = {total:.0f} us  "
                  f"{'ok' if total < TARGET_US else f'MISSED (target < {TARGET_US})'}")
            ok &= total < TARGET_US
        port = backend.client_address("resilience4j")[1]
        replies = run_users(port, target_url, STRATEGIES["resilience4j"]["retry"], 150, 20)
        failed = errors(replies, 20)
        gaps = sorted(gaps_us(replies))
        print(f"resilience4j   retry, 150 concurrent users: {len(replies)} replies, {failed} with errors, "
              f"gap p50 {statistics.median(gaps):.0f} us (2 cores shared with httpbin and the proxy)  "
              f"{'ok' if failed == 0 and len(replies) == 150 else 'MISSED'}")
        ok &= failed == 0 and len(replies) == 150
        ok &= startup_and_first_job(backend, target_url, args.startups)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""The registry of diagnostic codes and their long explanations (`rbl explain CODE`)."""

from __future__ import annotations

CODES: dict[str, tuple[str, str]] = {
    # ---- E01xx: syntax ----
    "E0101": ("unexpected token", """
The parser met a token that cannot appear at this point. The message lists what it expected.
Typical causes: a stray word, a missing `=` or `in`, a value where a name was expected.

    users in [50 100]      // error: a comma is missing between 50 and 100
    users in [50, 100]     // ok
"""),
    "E0102": ("unclosed bracket", """
A `{`, `[` or `(` is never closed. The error points at the opening bracket; the secondary
label shows where the parser noticed that the file (or the block) ended without it.

    users in [50, 100      // error
    users in [50, 100]     // ok
"""),
    "E0103": ("unexpected end of file", """
The file ends in the middle of a statement or block. Check the last lines for an incomplete
setting or a missing `}`.
"""),
    "E0104": ("unexpected character", """
A character that is not part of the rbl language. Strings use double quotes ("..."),
comments start with `//`.
"""),
    "E0105": ("missing value", """
`=` and `in` must be followed by a value on the same line (lists and ranges may span lines
inside their brackets).

    rounds =               // error
    rounds = 10            // ok
"""),
    "E0106": ("unmatched or mismatched bracket", """
A closing bracket does not match the most recent opening bracket, or closes nothing.

    users in [50, 100)     // error: `[` closed with `)`
"""),
    "E0107": ("malformed client header", """
A client block names a library and one of its patterns, separated by a dot:

    client resilience4j.retry { maxAttempts = 6 }
    client polly.circuit_breaker as polly_cb { ... }   // `as` gives it a label
"""),
    "E0108": ("`:` used to bind a value", """
Settings are bound with `=` (one value) or `in` (an axis of several values). The `name: type`
form is only for parameter declarations inside `library` blocks.

    rounds: 10             // error
    rounds = 10            // ok
"""),
    "E0109": ("two statements on one line", """
Newlines end statements. Put each setting on its own line.
"""),
    "E0110": ("not UTF-8 text", """
A spec is UTF-8 text (a byte-order mark at the start is allowed). The error points at the first
byte that is not UTF-8 and names it and its offset; re-save the file as UTF-8.
"""),
    "E0111": ("spec too large", """
rbl reads specs of at most 16 MiB (16,777,216 bytes). A test space is a few KB of text: long axes
are ranges (`users in 1..1000`, `fault.rate in 0%..100% step 1%`), not lists of every value.
"""),
    "E0112": ("brackets nested too deeply", """
Brackets (`(`, `[`, `{`) nest at most 64 levels. Real specs nest three or four; write the
expression or the neutral value flatter.
"""),
    # ---- E02xx: types, units and names ----
    "E0201": ("unknown unit", """
Durations take one of the units ns, us, ms, s, m (minutes), h; percentages are written `40%`.
`20ms` and `1.5s` are durations; `20` is a plain integer.
"""),
    "E0202": ("wrong type", """
Every setting and parameter has a declared type: int, float, duration, percent, bool, string,
or an enum of names. The value given has another type. Durations need a unit (`20ms`, not `20`);
percentages need `%`; strings are quoted; enum values are bare names.

    initialIntervalMillis in [20, 40]      // error: integers, not durations
    initialIntervalMillis in [20ms, 40ms]  // ok
"""),
    "E0203": ("value out of range", """
The value violates a bound of the parameter's type, e.g. `maxAttempts: int & >= 1`. The
secondary label points at the bound's declaration in the library catalogue. For ranges, both
ends are checked.
"""),
    "E0204": ("unknown library", """
The client block names a library the catalogue does not have. `rbl` knows resilience4j, polly,
cockatiel, opossum, failsafe, gobreaker, backoff, tenacity and pybreaker; a spec may declare another
with a `library` block:

    library mylib {
      platform = "go"
      pattern retry { attempts: int & >= 1 = 3 }
    }
"""),
    "E0205": ("unknown pattern", """
The library does not implement this pattern. The help line lists those it does, and the
libraries that implement the pattern you named (README.md's pattern table has them all).
"""),
    "E0206": ("unknown parameter", """
The pattern has no parameter of this name. Parameter names are the library's own
(e.g. `maxAttempts` for resilience4j.retry, `retryCount` for polly.retry). If the name is an
older spelling from the original JSON tool, the help line names the current one.
"""),
    "E0207": ("missing required parameter", """
The pattern declares parameters without a default (e.g. Polly's `retryCount` and
`sleepDuration`); a client block must set them.
"""),
    "E0208": ("duplicate key", """
The same setting, parameter, label or declaration appears twice. Keep one. To try several
values of one parameter, make it an axis: `x in [a, b]`.
"""),
    "E0209": ("unknown setting", """
Space settings are: rounds, users, successes, max_requests, target, fault.kind, fault.status,
fault.duration, fault.rate, order, order.seed, warmup, load, target.cpus, target.replicas,
target.noisy_cpus, target.drop_abandoned, and for open-loop load (`load = open`) load.rate,
load.rps, load.arrivals, load.duration, load.warmup, load.profile, load.peak, load.peak_rps,
load.period, load.length, load.timeout, load.window, load.slo and load.capacity. Client parameters
belong inside a `client` block.
"""),
    "E0210": ("setting cannot vary", """
Only `users`, `fault.rate`, `target`, `target.cpus`, the `load.*` settings of open-loop load
and client parameters may be axes (`in`). Other settings take one value (`=`). Run separate specs
to vary the others. The target (its path, so the work per request, and its replicas' CPU budget)
varies only under load the load generator sends (`load = open` or `load = users`): closed-loop
virtual users are compared per fault rate and user count.

    load = users
    target in ["/factorial/5000", "/factorial/10000"]   // ok: |T| = 2
    target.cpus in [0.5, 1, 2]                           // ok: |T| = 6, each budget a restart
"""),
    "E0211": ("unknown enum value", """
The parameter takes one of a fixed set of names; the help line lists them.
"""),
    "E0212": ("value cannot be handed to the client exactly", """
Each duration parameter is handed to its client in a declared unit (e.g. `as ms` for
Resilience4j's integer milliseconds). A value that is not a whole number of that unit would be
silently rounded by the client, so it is rejected.
"""),
    "E0213": ("missing setting", """
A required space setting is missing: `users` always, and `fault.duration` for delay faults.
"""),
    "E0215": ("several values bound with `=`", """
`=` binds one value. Use `in` to declare an axis the space varies over:

    users = [50, 100]      // error
    users in [50, 100]     // ok
"""),
    "E0216": ("axis with a single value", """
`in` declares an axis and takes a list `[a, b]` or a range `a..b step s`. For one value use `=`.
"""),
    "E0217": ("range of a non-numeric parameter", """
Ranges `a..b step s` apply to ints, floats, durations and percentages. List other values.
"""),
    "E0218": ("inconsistent settings", """
Two settings contradict each other (e.g. `max_requests` below `successes`), or a setting has a
value its meaning rules out (e.g. a `target` that is not a path).
"""),
    "E0219": ("setting does not apply", """
`fault.status` applies to abort faults, `fault.duration` to delay faults.
"""),
    "E0220": ("unknown type", """
Parameter types are int, float, duration, percent, bool, string and enum(A, B, ...), optionally
followed by bounds: `int & >= 1`, `duration & >= 0ms`.
"""),
    "E0221": ("bad handoff unit", """
A duration parameter must say how it reaches the client: `as ms` (integer milliseconds),
`as s` (float seconds), `as us` or `as ns`. A percent may be handed `as ratio` (0..1).
"""),
    "E0222": ("library declared twice", """
Library names are unique, and the built-in catalogue's libraries cannot be redeclared.
"""),
    "E0223": ("number out of range", """
A numeric literal has at most 64 digits; an integer, decimal, percentage or size assertion is at
most 9223372036854775807 (2^63-1, a signed 64-bit integer, what the clients hold), and a duration
at most 1000000h.

    rounds = 99999999999999999999      // error
"""),
    "E0224": ("control character in a string", """
Strings may not hold control characters (U+0000-U+001F, U+007F-U+009F, U+2028, U+2029) written
raw: they are never part of a path, platform or name, and they would break the files rbl writes.
Write a tab or a new line as `\\t` or `\\n` where one is meant.
"""),
    "E0225": ("unknown escape in a string", """
A backslash in a string starts an escape, and rbl knows four: `\\n` (a new line), `\\t` (a tab),
`\\\\` (a backslash) and `\\"` (a double quote). Any other character after a backslash is an
error rather than a character that quietly loses its backslash: rbl has no `\\u0000`, `\\x41`
or `\\r`. Write the character itself (control characters are not allowed, see E0224), or
double the backslash where a backslash is meant.

    target = "/anything/\\u00e9"     // error
    target = "/anything/%C3%A9"     // ok: a URL path escapes as %XX
"""),
    "E0226": ("patterns that cannot be composed", """
`client LIB.a + b` puts several of a library's patterns on one client. Only a library that
declares a composition can do that: `composition = "nested"` (resilience4j, failsafe,
cockatiel) runs the patterns in the written order, each wrapping the ones after it (`retry +
timeout`: a timeout on every attempt; `timeout + retry`: one for the whole call), and
`composition = "policies"` (istio: a VirtualService and a DestinationRule combine) leaves the
order to the library (Envoy's). Each pattern may appear once, `baseline` not at all (it means no
policy), and a composed client sets native parameters (no `use`). Qualify each parameter by its
pattern:

    client resilience4j.retry + circuit_breaker + timeout {
      retry.maxAttempts = 3
      circuit_breaker.slidingWindowSize = 4
      timeout.timeoutDuration in [50ms, 100ms]
    }
"""),
    "E0227": ("a setting Istio refuses", """
The built-in `istio` library follows Istio's own validation of VirtualServices and
DestinationRules: retryOn holds Envoy retry conditions (5xx, gateway-error, reset,
reset-before-request, connect-failure, retriable-4xx, refused-stream, retriable-status-codes,
retriable-headers, envoy-ratelimited, http3-post-connect-failure; gRPC's cancelled,
deadline-exceeded, internal, resource-exhausted, unavailable) or HTTP statuses, comma-separated
without spaces; attempts 0 (no retries) cannot come with perTryTimeout, retryOn or backoff; a connection
pool (`circuit_breaker`) needs at least one setting. Istio would refuse such a resource on a real
mesh, so rbl does not run it either.
"""),
    "E0228": ("a controller or adaptive filter where it cannot run", """
A controller (`istio.adaptive_breaker`, `istio.aimd_retry`) retunes its policy while the load runs,
from the last window's per-request measurements: it needs open-loop load (`load = open`), whose
requests rbl records one by one as they are answered. Controllers run on one hop (no `topology`)
for now. A client cannot compose a controller with the static policy it controls
(`adaptive_breaker` with `circuit_breaker`, `aimd_retry` with `retry`): both would set the same
field. Two controllers compose (`aimd_retry + adaptive_breaker`) when they share one `interval`:
they decide together, on the same window. Envoy's adaptive concurrency and admission control
filters (`istio.adaptive_concurrency`, `istio.admission_control`) sit on the client sidecar's
listener, so they run on one hop too, and not beside a controller, whose every retune would
restart them.
"""),
    "E0229": ("an Istio release rbl does not know, or a field it lacks", """
`istio.version` names the Istio release whose defaults the `istio` clients follow, as `1.MINOR`
or `1.MINOR.PATCH` in quotes, 1.8 or later (rbl read Istio's defaults from 1.8 on; a release after
the newest it read behaves as that one). What changes with it: before 1.24, Istio's default
retry, and a `retry` that leaves retryOn out, also retry a 503 answer. A field the release does not
have is refused: `retries.backoff` came in 1.26.

    istio.version = "1.14"         // ok: the service-mesh papers' release
    istio.version = 1.14           // error: a number, not a release (as numbers, 1.14 and 1.140 are one)
"""),
    "E0230": ("a load trace rbl cannot replay", """
`load.profile = trace` replays `load.trace`, a CSV file beside the spec (or an absolute path): a
header `seconds,factor`, then one point per line, a time from the round's start and a factor of
the load's rate (`load.rate` or `load.rps`) at that time. Times increase; numbers are plain
decimals (no signs, no exponents); factors are at most 100 and not all 0; at most 10,000 points
and 1,000,000 bytes. Between points the rate moves linearly. Blank lines and `#` lines are skipped.

    seconds,factor
    0,0.8
    300,1.4        // 140% of the rate five minutes in
    600,0.8
"""),
    "E0231": ("a varying target with rates of one capacity", """
A rate given as a share of capacity (`load.rate`, `load.peak`) is a share of the one capacity
`rbl calibrate` measured for the plan's target. When `target` or `target.cpus` varies, each point
has a capacity of its own, so the shares would mean something else on each. Give the rate in
requests per second (`load.rps`, `load.peak_rps`), fix the capacity with `load.capacity`, or
send from a population (`load = users`), whose rate follows the target.

    target.cpus in [0.5, 1]
    load.rate = 80%            // error: 80% of which capacity?
    load.rps = 40              // ok
"""),
    "E0232": ("an objective rbl cannot score", """
`objective = METRIC` names the metric the report's recommendation optimises, in its own direction
(more carried throughput, less total time); `objective.METRIC = VALUE` bounds another: at most
VALUE, or at least VALUE for a metric better high. The metric must be one the space's rounds
measure: closed-loop virtual users (totalExecutionTime, successTimePerRequest, latencyP99,
requestsPerSuccess, ...) or load the generator sends (carriedThroughput, successP99Ms,
p95UnderSloShare, ...). A fact about a mechanism (retries made, calls refused) has no better end
and cannot be the objective, only bounded. A bound is written in its metric's unit: a duration
(`500ms`) for times, a percentage (`90%`) for shares, a number for counts.

    objective = carriedThroughput
    objective.successP99Ms = 500ms     // ok: p99 of successes at most 500 ms
    objective.successP99Ms = 500       // error: a time needs its unit
"""),
    "E0233": ("parameters that do not fit together", """
Some parameters of a pattern depend on each other in a way one parameter's type cannot say: a
capacity at least its threshold, buckets that divide a window, a setting that applies only beside
another, two settings that exclude each other. The library (or rbl's client of it) would refuse such
a configuration, or silently ignore one of the settings, so `rbl check` refuses it, for every
configuration an axis makes. The message names both parameters.

    client failsafe.circuit_breaker {
      failureThreshold = 5
      failureThresholdingCapacity = 3      // error: fewer executions than the failures it counts
    }
    client opossum.circuit_breaker {
      rollingCountTimeout = 10s
      rollingCountBuckets = 3              // error: 10000 ms is no whole number of ms per bucket
    }
"""),
    # ---- E03xx: expansion and assertions ----
    "E0301": ("empty axis", """
An axis with no values makes the test space empty (Size(S) = 0). Give at least one value.
"""),
    "E0302": ("non-positive step", """
A range step must be greater than zero: `0%..80% step 20%`.
"""),
    "E0303": ("range without a step", """
A range of durations, percentages or floats needs an explicit step; only integer ranges default
to step 1.
"""),
    "E0304": ("size assertion failed", """
`assert size == N` is checked at compile time against Equation 1,
Size(S) = |F| x |U| x sum_i |CONF_i|. The note shows the factor breakdown.
"""),
    "E0305": ("no clients", """
A test space needs at least one `client <library>.<pattern> { ... }` block.
"""),
    "E0306": ("empty range", """
The range's end is below its start. Write the smaller bound first.
"""),
    "E0307": ("unknown assertion subject", """
Assertions are about the size of the space (`assert size == 210`, `assert size <= 1000`), checked
when the spec compiles, or the run's noise floor (`assert noise < 5%`), checked after a run.
"""),
    "E0312": ("bad noise or size assertion", """
`assert noise < 5%` bounds the run's noise floor from above: the smallest difference between
cells the run can resolve, measured on cells that cannot differ in behaviour (the report's A/A
check). It is checked after `rbl run`, which exits 3 with the measured floor when it fails. The
bound is one percentage and the comparison `<` or `<=`; the size (`assert size == 90`) is a count.
"""),
    "E0308": ("axis too long", """
An axis has at most 9223372036854775807 (2^63-1) values; a range with a tiny step has more.
Use a larger step: `fault.rate in 0%..80% step 1%`.
"""),
    "E0310": ("no space block", """
A spec holds one `space { ... }` block with the settings, clients and assertions.
"""),
    "E0311": ("more than one space block", """
A spec holds exactly one `space` block. Put other test spaces in their own files.
"""),
    "E0501": ("unknown neutral value", """
A library-neutral value is written as a call: `retry(...)` or `circuit_breaker(...)`, with
`backoff: none() | constant(50ms) | exponential(initial: 20ms, multiplier: 1.5[, max: 1s])` and
`open_when: consecutive_failures(2)`. `use NAME` refers to a value defined in the space with
`let NAME = retry(...)`. See "Library-neutral patterns" in docs/language.md.
"""),
    "E0502": ("bad argument to a neutral value", """
Arguments are named (`attempts: 6`) or, in order, positional (`constant(50ms)`); an argument may
be an axis (`initial in [20ms, 40ms]`). `backoff` and `open_when` take a call, the others a value.
"""),
    "E0503": ("neutral value does not fit the client", """
A client configured with `use` takes one neutral value of its own pattern, and no native
parameters beside it (only the client settings `share` and `approximate`). Neutral values map
onto resilience4j, polly, cockatiel, opossum, failsafe, gobreaker, backoff, tenacity and pybreaker.
"""),
    "E0504": ("library cannot express the neutral value exactly", """
Each note names what the library cannot express and the closest native setting. For example
Polly's client has no cap on retry waits, Resilience4j takes durations in whole milliseconds,
and pybreaker lets a single trial call decide after the open duration. Change the value, or
write `approximate = true` in the client to run the closest setting; the plan then records the
approximation under the client's `neutral.approximations`.
"""),
    # ---- E06xx: topologies ----
    "E0601": ("unknown service", """
A call, the `entry`, a mesh policy's `host` or `fault.at` names a service the space's topology
does not declare. The help lists the services (and, for a policy, `all`).

    topology {
      service frontend { calls catalog }     // error: no service `catalog`
      service catalogue { work = none() }
    }
"""),
    "E0602": ("the calls make a cycle", """
A service calls itself, directly or through the services it calls. One request would then never
end. A topology's calls go one way: a service may be called by several others (fan-in), but
never by a service it calls.

    service a { calls b }
    service b { calls a }                    // error: a -> b -> a
"""),
    "E0603": ("a CPU budget above the machine", """
A service's `cpus` (or `noisy_cpus`) asks each replica for more cores than the machine has. A
budget is a cgroup quota, a share of this machine's cores: a replica cannot use more than all of
them. Lower it, or run the space where the cores are.
"""),
    "E0604": ("a topology that cannot run", """
The topology is incomplete or conflicts with another setting: no service, a service declared
twice, no `entry` when several services are called by none, two `topology` blocks, too much
fan-out (one entry request may become at most 10000 requests), a `target` setting beside it (the
entry service is the target), or a placement (`host`, `fault.at`) in a space with no topology.

    topology {
      entry = frontend
      service frontend {
        work = factorial(300)
        calls catalogue * 4
      }
      service catalogue {
        work = factorial(1000)
        replicas = 3
      }
    }
"""),
    # ---- warnings ----
    "W0301": ("step does not land on the end", """
`a..b step s` includes a, a+s, ... up to the last value not above b. When b is not reached
exactly, the range stops short of it; the label shows the last value.
"""),
    "W0302": ("duplicate axis value", """
The same value twice in one axis produces identical scenarios, run twice.
"""),
    "W0303": ("size assertion overridden", """
A command-line override (`--users`, `--set 'fault.rate in [...]'`, `--set LABEL.param ...`)
changed the size of the space, so its `assert size` no longer holds. The assertion is about the
spec as written: the run goes ahead with the overridden size, which the plan and the run's
manifest record together with the overrides. `rbl check SPEC` checks the assertion as written.
"""),
    "W0501": ("clients compared across libraries do not behave alike", """
The space compares two clients of the same pattern in different libraries whose native
configurations do not behave alike: different attempt counts or waits (beyond half a
millisecond), or breakers that open, stay open or probe differently. The seed paper's Listing 4
is an example: Polly's `pow^k * sleepDuration` waits 1.5x as long as Resilience4j's
`ofExponentialBackoff` for the "same" settings. Configure both from one neutral value
(`let r = retry(...)`, then `use r` in each client); `rbl plan --mapping` shows every wait.
"""),
    "W0502": ("neutral value never used", """
A `let` defines a neutral value that no client uses.
"""),
    "W0503": ("neutral value approximated", """
The client opted into `approximate = true` and its library cannot express the neutral value
exactly; the notes say what runs instead. The plan records it.
"""),
    "W0601": ("a service no request reaches", """
The entry service never calls it, directly or through others: it runs, but nothing reaches it.
Call it from a service, or remove it.
"""),
    "E0401": ("invalid ResilienceBench JSON", """
`rbl import` reads the original tool's JSON test spaces (Listings 3-4 of the CCPE paper). The
file is not valid JSON, or lacks a field the original tool requires, or uses a value rbl cannot
translate. The message names the JSON path.
"""),
    "W0401": ("the imported spec differs from what the JSON says, or from what the original ran", """
`rbl import` writes what the original tool's client services did, not what a JSON key seems to
say: the original Resilience4j client always used `ofExponentialBackoff`, the Polly client always
waited `exponentialBackoffPow^k * sleepDuration`, a missing key took the client language's value.
This warning names a JSON value the original client never read, a key the JSON lacks (and what
ran instead), or a difference rbl cannot reproduce (the original cockatiel client never let its
policy see a failure). `rbl plan --mapping` shows the attempts and waits each scenario runs.
"""),
}


def explain(code: str) -> str | None:
    entry = CODES.get(code.upper())
    if entry is None:
        return None
    title, body = entry
    return f"{code.upper()}: {title}\n{body.rstrip()}\n"

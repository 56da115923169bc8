"""report.html in a real browser (headless Chromium, driven over the DevTools protocol on a pipe):
at 1280x800 the first screen shows which configuration to deploy, the A/A verdict and the findings, nothing scrolls sideways,
every image loads, and the A/A pairs' table is collapsed; for a run with a finding by construction,
the same spec in one round, and the quickstart."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from .conftest import EXAMPLES
from .conftest import run_rbl as rbl
from .test_findings import SPEC

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1280, 800
# Without the background-networking flags Chromium tries to reach Google's servers (and fails offline).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         "--disable-default-apps", "--mute-audio", f"--window-size={WIDTH},{HEIGHT}")


class Browser:
    """Chromium with --remote-debugging-pipe: commands go in on its fd 3, answers and events come
    out on its fd 4, each a JSON message ended by a NUL byte."""

    def __init__(self, profile: Path):
        commands_read, self._commands = os.pipe()
        self._answers, answers_write = os.pipe()

        def child_fds():                  # the protocol's fixed descriptors in the child
            import fcntl
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands_read, answers_write)]
            os.dup2(high[0], 3)           # above 10 first: one of the pipes may already be 3 or 4
            os.dup2(high[1], 4)

        self.log = profile / "chromium.log"       # a file, not a pipe nobody reads: Chromium never blocks on it
        with self.log.open("wb") as log:
            self.process = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}",
                                             "--remote-debugging-pipe", "about:blank"], stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=log, preexec_fn=child_fds, pass_fds=(3, 4))
        os.close(commands_read)
        os.close(answers_write)
        self._buffer = b""
        self._next = 0
        self.session = None

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next:
                assert "error" not in answer, (method, answer)
                return answer["result"]

    def wait_for(self, event: str, session: str) -> dict:
        while True:
            message = self._read()
            if message.get("method") == event and message.get("sessionId") == session:
                return message["params"]

    def _read(self) -> dict:
        import select
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._answers], [], [], 60)
            assert ready, "Chromium did not answer within 60 s"
            chunk = os.read(self._answers, 1 << 20)
            assert chunk, f"Chromium closed the pipe: {self.log.read_text(errors='replace')[-2000:]}"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def open(self, url: str) -> str:
        """A page at WIDTH x HEIGHT showing `url` once loaded; its session id."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.send("Page.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                                                         "mobile": False}, session)
        self.send("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (AssertionError, OSError):
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._commands)
        os.close(self._answers)


@pytest.fixture(scope="module")
def browser():
    assert CHROMIUM, "headless Chromium is needed for this test: apt-get install chromium (.ci/run installs it)"
    profile = Path(tempfile.mkdtemp(prefix="rbl-chromium-"))
    opened = Browser(profile)
    yield opened
    opened.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[int, Path]:
    """report.html of test_findings.py's spec (a retry slower by construction) with its 4 rounds and
    with 1, and of the quickstart (two user counts, breakers and retries) with 3."""
    work = tmp_path_factory.mktemp("browser")
    (work / "findings.rbl").write_text(SPEC)
    made = {}
    for name, spec, overrides in (("findings", "findings.rbl", []),
                                  ("one round", "findings.rbl", ["--rounds", "1", "--set", "successes=5"]),
                                  ("quickstart", EXAMPLES / "quickstart.rbl", ["--users", "3", "--set", "successes=5"])):
        run = work / name.replace(" ", "-")
        done = rbl("run", spec, *overrides, "-o", run, cwd=work)
        assert done.returncode == 0, done.stderr
        done = rbl("report", run, "--resamples", "500", cwd=work)
        assert done.returncode == 0, done.stderr
        made[name] = run / "report"
    return made


FIRST_SCREEN = """(() => {
  const box = element => { const r = element.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; };
  const findings = document.getElementById('findings');
  return {
    scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
    innerHeight: window.innerHeight,
    verdict: box(document.getElementById('noise-verdict')),
    verdictText: document.getElementById('noise-verdict').innerText,
    findingsHeading: box(findings.querySelector('h2')),
    findingsHeadline: box(findings.querySelector('.headline')),
    findingsText: findings.innerText,
    firstFinding: findings.querySelector('li') ? box(findings.querySelector('li')) : null,
    firstFindingVisible: findings.querySelector('li') ? findings.querySelector('li').checkVisibility() : null,
    firstFindingText: findings.querySelector('li') ? findings.querySelector('li').innerText : null,
    images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth})),
    pairsOpen: document.getElementById('aa-pairs') ? document.getElementById('aa-pairs').open : null,
    order: ['noise-verdict', 'findings', 'cells', 'noise-floor'].map(id =>
      document.getElementById(id).getBoundingClientRect().top + window.scrollY),
    answer: box(document.querySelector('#recommendation h2')),
    firstAnswer: box(document.querySelector('#recommendation li')),
    firstAnswerText: document.querySelector('#recommendation li').innerText,
    firstFigure: document.querySelector('#findings ~ img') ?
      document.querySelector('#findings ~ img').getBoundingClientRect().top + window.scrollY : null,
  };
})()"""


@pytest.mark.parametrize("name", ["findings", "one round", "quickstart"])
def test_the_first_screen_shows_the_verdict_and_the_findings(browser, reports, name, tmp_path):
    session = browser.open((reports[name] / "report.html").resolve().as_uri())
    page = browser.evaluate(session, FIRST_SCREEN)
    assert page["innerHeight"] == HEIGHT
    # nothing wider than the window: no horizontal scroll bar (a vertical one may take some width)
    assert page["scrollWidth"] <= page["clientWidth"] <= WIDTH, page
    # the answer (which configuration to deploy), the verdict and the findings' heading and headline
    # lie wholly within the first screen
    for box in ("answer", "firstAnswer", "verdict", "findingsHeading", "findingsHeadline"):
        top, bottom, left, right = page[box]
        assert 0 <= top < bottom <= HEIGHT and 0 <= left < right <= WIDTH, (box, page[box])
    answers = json.loads((reports[name] / "recommendations.json").read_text())["recommendations"]
    assert page["firstAnswerText"] == answers[0]["text"].replace("`", "")
    noise = json.loads((reports[name] / "noise.json").read_text())
    assert page["verdictText"].startswith(noise["summary"]["line"])
    findings = json.loads((reports[name] / "findings.json").read_text())
    effects = [f for f in findings if f["status"] == "effect"]
    if name == "findings":                     # the slow retry's finding, read without scrolling
        assert effects and page["firstFindingVisible"] and page["firstFinding"][1] <= HEIGHT, page
        assert page["firstFindingText"] == effects[0]["text"].replace("`", "")
    # every image is decoded: a figure per metric and, with intervals, the noise floor's
    measured = noise["measurable"]
    assert len(page["images"]) == 2 + measured, page["images"]
    assert all(image["complete"] and image["width"] > 0 for image in page["images"]), page["images"]
    # findings, then figures, then the cells' table, then the checks
    verdict, found, cells, checks = page["order"]
    assert verdict < found < page["firstFigure"] < cells < checks, page["order"]
    if measured:
        assert page["pairsOpen"] is False                      # the A/A pairs' table is collapsed
    else:
        assert page["pairsOpen"] is None                       # nothing to list without intervals
    if name == "one round":
        assert "one round per cell" in page["findingsText"] and "--rounds 3" in page["findingsText"]
        assert page["firstFindingVisible"]                    # the comparisons are listed, open
    shot = base64.b64decode(browser.send("Page.captureScreenshot", {"format": "png"}, session)["data"])
    (tmp_path / "first-screen.png").write_bytes(shot)             # kept by pytest's tmp_path for a look
    assert shot[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(shot[16:20], "big") == WIDTH and int.from_bytes(shot[20:24], "big") == HEIGHT


@pytest.fixture(scope="module")
def example_reports(tmp_path_factory, reports) -> dict[str, Path]:
    """report.html of the mesh example (every client in one panel) and of the overload example (a
    pool sweep under open-loop load, its capacity given so nothing is calibrated), small; and the
    quickstart's from `reports`. The capacity given is about twice what half a core of these machines
    serves (80 req/s), so the load overloads the target on a machine up to twice as fast: under it,
    every pool carries all and the trade-off has one value of carried throughput."""
    work = tmp_path_factory.mktemp("examples")
    made = {"quickstart": reports["quickstart"]}
    for name, overrides in (
            ("mesh-vs-library", ["--rounds", "2", "--set", "successes=5", "--set", "fault.rate in [0%, 60%]"]),
            ("overload-pool", ["--rounds", "2", "--set", "load.capacity = 150", "--set", "load.duration = 6s",
                               "--set", "load.warmup = 2s"])):
        run = work / name
        done = rbl("run", EXAMPLES / f"{name}.rbl", *overrides, "-o", run, cwd=work, timeout=600)
        assert done.returncode == 0, done.stderr
        done = rbl("report", run, "--resamples", "300", cwd=work)
        assert done.returncode == 0, done.stderr
        made[name] = run / "report"
    return made


FIGURES_AND_TABLES = """(() => {
  const box = element => { const r = element.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; };
  return {
    scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
    answer: box(document.querySelector('#recommendation h2')),
    firstAnswer: box(document.querySelector('#recommendation li')),
    firstAnswerText: document.querySelector('#recommendation li').innerText,
    figures: Array.from(document.images).map(i => ({alt: i.alt, shown: i.width, facts: JSON.parse(i.dataset.facts)})),
    tables: Array.from(document.querySelectorAll('.scroll')).map(d => [d.scrollWidth, d.clientWidth,
      d.querySelector('table') ? d.querySelector('table').id || d.querySelector('th').innerText : ''])
  };
})()"""


@pytest.mark.parametrize("name", ["quickstart", "mesh-vs-library", "overload-pool"])
def test_each_examples_report_answers_first_with_figures_that_answer(browser, example_reports, name):
    """The recommendation on the first screen; no figure has an axis with one value or text under
    10 px; no table scrolls sideways at 1280 px; the pool sweep is drawn on a log axis."""
    session = browser.open((example_reports[name] / "report.html").resolve().as_uri())
    page = browser.evaluate(session, FIGURES_AND_TABLES)
    assert page["scrollWidth"] <= page["clientWidth"] <= WIDTH, page
    for box in ("answer", "firstAnswer"):
        top, bottom, left, right = page[box]
        assert 0 <= top < bottom <= HEIGHT and 0 <= left < right <= WIDTH, (box, page[box])
    answers = json.loads((example_reports[name] / "recommendations.json").read_text())["recommendations"]
    assert page["firstAnswerText"] == answers[0]["text"].replace("`", "")
    assert page["figures"], "a report without figures"
    for figure in page["figures"]:
        facts = figure["facts"]
        one_valued = [panel for panel in facts["panels"] if panel["x_values"] < 2]
        assert facts["panels"] and not one_valued, (figure["alt"], facts)
        # a point is 1/72 inch of the figure, shown at `shown` px for its width_in inches
        smallest_px = facts["smallest_text_pt"] / 72 * figure["shown"] / facts["width_in"]
        assert smallest_px >= 10, (figure["alt"], round(smallest_px, 1), facts)
    for scroll_width, client_width, table in page["tables"]:
        assert scroll_width <= client_width, f"table {table!r} is wider than the page at {WIDTH} px"
    if name == "overload-pool":
        swept = [figure for figure in page["figures"]
                 if any(panel["x_label"].startswith("http2MaxRequests") for panel in figure["facts"]["panels"])]
        assert swept, [figure["alt"] for figure in page["figures"]]
        for figure in swept:
            assert {panel["x_scale"] for panel in figure["facts"]["panels"]} == {"log"}, figure
        assert "http2MaxRequests=" in page["firstAnswerText"], page["firstAnswerText"]     # names a limit
    if name == "mesh-vs-library":                # every client in the same panel: one y scale
        per_metric = [figure for figure in page["figures"] if figure["alt"] == "total execution time (ms)"]
        assert len(per_metric) == 1 and len(per_metric[0]["facts"]["panels"]) == 1, per_metric

"""The commands and links in README.md and docs/*.md still work.

What is read: fenced blocks marked ```sh, ```bash, ```shell or ```console. In a console block
only lines starting with `$ ` are commands, and the lines after one (up to the next command) are
its output; in the others every line is a command, and a leading `$ ` is stripped. A line ending
in a backslash continues on the next one; `#` starts a comment; a line is split into commands at
`&&`, `||`, `;` and `|`; leading `NAME=value` environment settings are dropped; `cd DIR` applies to
the commands after it on the same line (as `cd DIR && rbl ...` does). A command is an rbl command when it starts with `rbl` or `python3 -m rbl`. A comment `# exits N` says the command
exits with N; otherwise it must exit 0.

Checked for every rbl command:
- its subcommand exists in the typer app (`rbl.cli.app`), and every option it uses is an option of
  that subcommand (or of the app itself before the subcommand: `--install-completion`, ...);
- every path it names under examples/, tests/, bench/, scripts/, tools/ or editors/ exists (for
  any command, not only rbl's: `python3 bench/plan_huge.py` too).

Run for real, in-process with typer's CliRunner (NO_COLOR=1, COLUMNS=100), one document at a
time, in the order the document shows them, in a scratch directory where examples/ and tests/
point at the repository's: `rbl check`, `rbl plan`, `rbl explain`, `rbl import` (its `-o FILE` is
written in the scratch directory, so a later `rbl plan --mapping FILE` of the same document reads
it) and `rbl compile` (its `-o DIR` is redirected under tmp_path; `-o -` is kept). The exit code
must be the one the document implies; in a console block, every output line shown (other than
`...`) must be a line of the real output.

Not run, only checked as above:
- `rbl run`, `rbl report`, `rbl diff`, `rbl merge`: they start services, need a finished run
  directory or take minutes. For an `rbl run` of a spec file, though, `rbl check` runs on the same
  spec with the same overrides (`--rounds`, `--users`, `--set`: shared by check and run), so a
  bad override in a documented run command fails here;
- `rbl compile --target kubernetes`: it builds every client service (Maven, npm, go) into the
  user's cache, which is neither cheap nor free of side effects;
- any command with a placeholder in capitals (SPEC, RUN_DIR, DIR, RUN_A, FILE.json, LABEL.param,
  I/N, runs/quickstart-TIME, ...) outside a `--set` value (spec text, where capitals are enum
  values): there is no file or value to substitute that keeps the command's meaning.
  Diagnostic codes (E0203, W0501) are not placeholders.

Inline code spans that start with `rbl ` (`rbl run --dry-run`, `rbl report RUN_DIR [-o OUT]`)
get the subcommand and option checks too. Every relative link in these files must point at a file
or directory that exists, and a link to a heading of a Markdown file (`running.md#client-services`)
at a heading that file has (GitHub's anchor rules).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from .conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_BLOCKS = {"sh", "bash", "shell", "console"}
RUN_FOR_REAL = {"check", "plan", "explain", "import", "compile"}
OVERRIDES = {"--rounds", "--users", "--set"}
REPO_DIRS = ("examples/", "tests/", "bench/", "scripts/", "tools/", "editors/")
OPERATORS = {"&&", "||", ";", "|"}
PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9_])[A-Z][A-Z0-9_]*(?![A-Za-z0-9])")
DIAGNOSTIC_CODE = re.compile(r"[EW]\d{4}")
EXIT_COMMENT = re.compile(r"#.*\bexits?\s+(\d+)")


@dataclass
class Command:
    doc: str
    line: int
    words: list[str]                  # the command's words, after `rbl`
    rbl: bool
    exit_code: int = 0
    output: list[str] = field(default_factory=list)     # lines a console block shows after it
    console: bool = False

    def __str__(self):
        return f"{self.doc}:{self.line}: {'rbl ' if self.rbl else ''}{shlex.join(self.words)}"


def fenced_blocks(text: str):
    """(info string, first line number, lines) of each fenced block; indented fences count."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = re.match(r"\s*(`{3,})\s*([\w+-]*)", lines[i])
        if not opening:
            i += 1
            continue
        fence, info, start = opening.group(1), opening.group(2).lower(), i + 1
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        yield info, start + 1, lines[start:i]
        i += 1


def prose(text: str) -> str:
    """The text outside fenced blocks (fenced lines blanked, so line numbers stay)."""
    lines, inside = text.splitlines(), None
    kept = []
    for line in lines:
        fence = re.match(r"\s*(`{3,})", line)
        if inside is None and fence:
            inside = fence.group(1)
            kept.append("")
        elif inside is not None:
            if line.strip().startswith(inside):
                inside = None
            kept.append("")
        else:
            kept.append(line)
    return "\n".join(kept)


def split_commands(line: str) -> list[list[str]]:
    """One shell line -> its simple commands' words (comments dropped, split at && || ; |)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands, words = [], []
    for token in lexer:
        if token in OPERATORS:
            commands.append(words)
            words = []
        else:
            words.append(token)
    commands.append(words)
    result = []
    for words in commands:
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
            words = words[1:]                                 # NAME=value before the program
        if words:
            result.append(words)
    return result


def commands_in(doc: Path) -> list[Command]:
    """Every command of the document's shell blocks, in order."""
    name = doc.relative_to(REPO).as_posix()
    found: list[Command] = []
    for info, first, lines in fenced_blocks(doc.read_text()):
        if info not in SHELL_BLOCKS:
            continue
        console = info == "console"
        current: list[Command] = []
        pending, pending_line = "", 0
        for offset, raw in enumerate(lines):
            number = first + offset
            if console and not pending and not raw.startswith("$ "):
                for command in current:
                    command.output.append(raw.rstrip())
                continue
            text = raw[2:] if raw.startswith("$ ") and not pending else raw
            if not pending:
                pending_line = number
            if text.rstrip().endswith("\\"):
                pending += text.rstrip()[:-1] + " "
                continue
            text, pending = pending + text, ""
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            expected = EXIT_COMMENT.search(text)
            current = []
            for words in split_commands(text):
                is_rbl = words[0] == "rbl" or words[:3] in (["python3", "-m", "rbl"], ["python", "-m", "rbl"])
                if is_rbl:
                    words = words[1:] if words[0] == "rbl" else words[3:]
                command = Command(name, pending_line, words, is_rbl, console=console,
                                  exit_code=int(expected.group(1)) if expected else 0)
                current.append(command)
                found.append(command)
    return found


def inline_rbl_commands(doc: Path) -> list[Command]:
    """Inline code spans of the prose that start with `rbl `: their words, for the option checks."""
    name = doc.relative_to(REPO).as_posix()
    text = prose(doc.read_text())
    found = []
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", text):
        span = " ".join(match.group(1).split())
        if span.startswith("$ "):
            span = span[2:]
        for part in re.split(r"\s*(?:&&|\|\||;)\s*", span):   # a single | separates alternatives
            if not part.startswith("rbl "):
                continue
            words = [w.strip("[]") for w in part.split()[1:]]
            found.append(Command(name, text.count("\n", 0, match.start()) + 1, [w for w in words if w], True))
    return found


def app_command():
    from rbl.cli import app
    return typer.main.get_command(app)


def option_names(command) -> set[str]:
    names = {"--help"}
    for param in command.params:
        if param.param_type_name == "option":
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def has_placeholder(words: list[str]) -> bool:
    for previous, word in zip([""] + words, words):
        if previous == "--set" or word.startswith("--set="):
            continue
        for match in PLACEHOLDER.finditer(word):
            if not DIAGNOSTIC_CODE.fullmatch(match.group(0)):
                return True
    return False


def problems_of(command: Command, app) -> list[str]:
    """What is wrong with a command without running it: subcommand, options, repository paths."""
    problems = []
    for word in command.words:
        path = word.split("=", 1)[-1]
        if path.startswith(REPO_DIRS) and not PLACEHOLDER.search(path) and not (REPO / path).exists():
            problems.append(f"{command}: {path} does not exist")
    if not command.rbl:
        return problems
    words = list(command.words)
    top = option_names(app)
    while words and words[0].startswith("-"):
        if words[0] not in top:
            problems.append(f"{command}: rbl has no option {words[0]}")
        words = words[1:]
    if not words:
        return problems
    if words[0] not in app.commands:
        return problems + [f"{command}: rbl has no subcommand {words[0]!r}"]
    sub = app.commands[words[0]]
    known = option_names(sub)
    for word in words[1:]:
        if word.startswith("-") and word != "-" and word not in ("...", "--"):
            option = word.split("=", 1)[0]
            if option not in known:
                problems.append(f"{command}: `rbl {words[0]}` has no option {option}")
    return problems


def doc_id(doc: Path) -> str:
    return doc.relative_to(REPO).as_posix()


@pytest.fixture
def run_rbl(monkeypatch, tmp_path):
    """Run rbl in-process in a scratch directory whose examples/ and tests/ are the repository's."""
    from rbl.cli import app

    scratch = tmp_path / "cwd"
    scratch.mkdir()
    for name in ("examples", "tests"):
        (scratch / name).symlink_to(REPO / name, target_is_directory=True)
    monkeypatch.chdir(scratch)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    runner = CliRunner()

    def invoke(words: list[str], cwd: str | None = None):
        os.chdir(scratch / cwd if cwd else scratch)
        try:
            result = runner.invoke(app, words, catch_exceptions=False)
        finally:
            os.chdir(scratch)
        return result.exit_code, result.stdout + result.stderr

    return invoke


# --- the extraction itself, on a made-up document -----------------------------------------------

def test_extraction_handles_prompts_chains_continuations_comments_and_exit_codes(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```sh\n"
        "$ python3 -m pip install -e '.[test]' && rbl run examples/a.rbl --rounds 1   # try it\n"
        "rbl check x.rbl \\\n"
        "    --set 'fault.rate in [0%, 50%]'   # exits 1\n"
        "NO_COLOR=1 rbl explain E0203 | head\n"
        "cd sub && rbl check z.rbl   # exits 2, printing:\n"
        "```\n"
        "```console\n"
        "$ rbl plan y.rbl\n"
        "Size(S) = 1\n"
        "...\n"
        "```\n"
        "```rbl\nrbl check not-a-command.rbl\n```\n"
        "Inline: `rbl report RUN_DIR [-o OUT] [--metric M ...]`, not `rbl.yaml`.\n")
    commands = commands_in(doc)
    assert [str(c) for c in commands] == [
        "doc.md:2: python3 -m pip install -e '.[test]'",
        "doc.md:2: rbl run examples/a.rbl --rounds 1",
        "doc.md:3: rbl check x.rbl --set 'fault.rate in [0%, 50%]'",
        "doc.md:5: rbl explain E0203",
        "doc.md:5: head",
        "doc.md:6: cd sub",
        "doc.md:6: rbl check z.rbl",
        "doc.md:9: rbl plan y.rbl",
    ]
    assert [c.exit_code for c in commands] == [0, 0, 1, 0, 0, 2, 2, 0]
    assert commands[-1].output == ["Size(S) = 1", "..."] and commands[-1].console
    assert not has_placeholder(commands[2].words) and not has_placeholder(commands[3].words)
    inline = inline_rbl_commands(doc)
    assert [c.words for c in inline] == [["report", "RUN_DIR", "-o", "OUT", "--metric", "M", "..."]]
    assert has_placeholder(inline[0].words)


def test_a_wrong_option_subcommand_or_path_is_reported():
    app = app_command()
    bad = [Command("x.md", 1, ["run", "examples/quickstart.rbl", "--no-such-option"], True),
           Command("x.md", 2, ["frobnicate"], True),
           Command("x.md", 3, ["check", "examples/missing.rbl"], True),
           Command("x.md", 4, ["python3", "bench/missing.py"], False),
           Command("x.md", 5, ["--no-such-flag"], True)]
    problems = [p for command in bad for p in problems_of(command, app)]
    assert len(problems) == 5, problems
    assert not problems_of(Command("x.md", 6, ["compile", "examples/quickstart.rbl", "-o", "-", "-f", "jsonl"], True), app)
    assert not problems_of(Command("x.md", 7, ["--install-completion"], True), app)


def test_the_docs_show_the_commands_this_test_relies_on():
    """A broken extractor would pass every other test here: it must find what the docs really show."""
    everything = [str(c) for doc in DOCS for c in commands_in(doc)]
    readme = [s.split(": ", 1)[1] for s in everything if s.startswith("README.md:")]
    assert "python3 -m pip install -e '.[test]'" in readme and "rbl run examples/quickstart.rbl" in readme
    assert "python3 -m pytest -q" in readme
    assert "cd tests/errors" in readme and "rbl check type-out-of-range.rbl" in readme
    ran = {c.words[0] for doc in DOCS for c in commands_in(doc)
           if c.rbl and c.words and c.words[0] in RUN_FOR_REAL and not has_placeholder(c.words)}
    assert ran == RUN_FOR_REAL, f"no runnable example of {RUN_FOR_REAL - ran} in the docs"
    assert len(everything) >= 20, everything


# --- the documents ------------------------------------------------------------------------------

@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_documented_commands_exist(doc):
    app = app_command()
    problems = [p for command in commands_in(doc) + inline_rbl_commands(doc) for p in problems_of(command, app)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_cheap_documented_commands_run_as_shown(doc, run_rbl, tmp_path):
    failures = []
    cd_line, cd_dir = None, None
    for number, command in enumerate(commands_in(doc)):
        if command.words[:1] == ["cd"] and len(command.words) == 2:
            cd_line, cd_dir = command.line, command.words[1]
            continue
        cwd = cd_dir if command.line == cd_line else None
        if not command.rbl or not command.words or has_placeholder(command.words):
            continue
        words, name = list(command.words), command.words[0]
        if name == "compile":
            if "--target" in words and words[words.index("--target") + 1] == "kubernetes":
                continue
            out = [i for i, w in enumerate(words) if w in ("-o", "--output")]
            if not out:
                words += ["-o", str(tmp_path / f"compiled-{number}")]
            elif words[out[0] + 1] != "-":
                words[out[0] + 1] = str(tmp_path / f"compiled-{number}")
        elif name == "run":
            specs = [w for w in words[1:] if w.endswith(".rbl")]
            if not specs:
                continue
            words = ["check", specs[0]]
            for i, word in enumerate(command.words):
                if word in OVERRIDES:
                    words += [word, command.words[i + 1]]
                elif word.split("=", 1)[0] in OVERRIDES and "=" in word:
                    words.append(word)
        elif name not in RUN_FOR_REAL:
            continue
        code, output = run_rbl(words, cwd)
        if name == "run":
            if code != 0:
                failures.append(f"{command}: its spec and overrides fail `rbl {shlex.join(words)}` "
                                f"(exit {code})\n{output}")
            continue
        if code != command.exit_code:
            failures.append(f"{command}: exit {code}, the doc implies {command.exit_code}\n{output}")
            continue
        real = {line.rstrip() for line in output.splitlines()}
        missing = [line for line in command.output if line.strip() and line.strip() != "..." and line not in real]
        if missing:
            failures.append(f"{command}: output lines the doc shows but rbl does not print:\n"
                            + "\n".join(missing) + f"\n--- rbl printed:\n{output}")
    assert not failures, "\n\n".join(failures)


def github_anchors(markdown: Path) -> set[str]:
    """The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces -> '-'."""
    anchors, seen = set(), {}
    for line in prose(markdown.read_text()).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_relative_links_point_at_files_that_exist(doc):
    broken = []
    for match in re.finditer(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", prose(doc.read_text())):
        target = match.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):          # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(f"{target}: no such file ({file})")
        elif anchor and file.suffix == ".md" and anchor not in github_anchors(file):
            broken.append(f"{target}: {file.name} has no heading with anchor #{anchor}")
    assert not broken, f"{doc_id(doc)}:\n" + "\n".join(broken)


def test_docs_cite_no_issue_numbers_or_files_outside_the_repository():
    for doc in DOCS:
        text = doc.read_text()
        assert not re.search(r"\bissues?\s+#?\d+", text, re.I), doc
        assert "../shared" not in text and "DESIGN" not in text, doc

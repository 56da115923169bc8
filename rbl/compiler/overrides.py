"""Command-line overrides (`--rounds 1`, `--users 1,5`, `--set 'fault.rate in [0%, 50%]'`): rbl
statements parsed like the spec's own and put in place of the spec's statements before the checks,
so an override is type-checked, and located in its option, exactly as the spec's text would be.

A key that names a space setting replaces that setting; `LABEL.param` (a client's `as` label, or
`library.pattern` for every such client) replaces or adds a parameter of the client, and
`LABEL.pattern.param` (or `library.pattern.param`) a parameter of a composed client's pattern.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..lang import ast
from ..lang.diagnostics import Diagnostics, clip
from ..lang.fastparse import LazyNodes
from ..lang.frontend import parse_program
from ..lang.source import SourceFile, Span
from ..lang.types import suggest
from .workload import LOAD_SETTINGS

MAX_LISTED = 8             # client labels a help text lists
MAX_SUGGESTED = 1000       # clients whose parameters a suggestion is looked for among
_WRAP = "space{"           # an override is parsed as the body of a one-line space block


@dataclass(frozen=True)
class Override:
    """One override: the rbl statement it stands for and the option the user wrote."""

    statement: str          # e.g. `users in [1, 5]`
    option: str             # e.g. `--users 1,5`

    @property
    def source_name(self) -> str:
        return self.option.split(" ", 1)[0]       # diagnostics point at `--users:1:10`


# The space settings that are factors of Size(S) (client parameters are the third; the open-loop
# load's settings, LOAD_SETTINGS, are axes too): a size assertion that fails because one was
# overridden is the override's doing, not the spec's.
SIZE_SETTINGS = ("users", "fault.rate")


def from_options(rounds: int | None = None, users: str | None = None, sets: list[str] | tuple = ()) -> list[Override]:
    """The overrides of the command-line options, in the order they apply (--set last)."""
    found = []
    if rounds is not None:
        found.append(Override(f"rounds = {rounds}", f"--rounds {rounds}"))
    if users is not None:
        text = users.strip()
        value = text if ".." in text or text.startswith("[") else f"[{', '.join(i.strip() for i in text.split(','))}]"
        found.append(Override(f"users in {value}", f"--users {users}"))
    for text in sets:
        found.append(Override(text.strip(), f"--set {text.strip()}"))
    return found


def describe(overrides: list[Override]) -> list[str]:
    """What the plan and the manifest record: the options as written (control characters escaped
    and at most 4000 characters, as the plan schema requires of every string)."""
    def safe(text: str) -> str:
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
        return text if len(text) <= 4000 else text[:3990] + " [...]"
    return [safe(o.option) for o in overrides]


def parse_override(override: Override, diags: Diagnostics) -> ast.Bind | ast.Axis | None:
    """The override's one statement, with spans in its own one-line source; None after an error."""
    shown = SourceFile(override.source_name, override.statement)
    if "\n" in override.statement or "\r" in override.statement:
        diags.error("E0109", f"`{override.source_name}` takes one setting on one line", Span.point(shown, 1, 1),
                    "a line break", help="pass one --set per setting")
        return None
    if not override.statement:
        diags.error("E0105", f"`{override.source_name}` needs a setting", Span.point(shown, 1, 1), "empty",
                    help="for example --set rounds=1 or --set 'fault.rate in [0%, 50%]'")
        return None
    wrapped = SourceFile(override.source_name, _WRAP + override.statement + "}")
    local = Diagnostics()
    program = parse_program(wrapped, local)
    for diagnostic in local.items:
        moved = _moved(diagnostic, wrapped, shown)
        # a secondary label at the wrapper's closing `}` points at text the user never wrote
        labels = tuple(label for label in moved.labels if label.primary or label.span.col <= len(shown.text))
        diags.items.append(dataclasses.replace(moved, labels=labels))
        diags.counts[diagnostic.code] = diags.counts.get(diagnostic.code, 0) + 1
        diags.error_count += diagnostic.severity == "error"
    if program is None or local.has_errors:
        return None
    body = program.spaces[0].body if program.spaces else ()
    if len(body) != 1 or not isinstance(body[0], (ast.Bind, ast.Axis)) or program.libraries:
        diags.error("E0101", f"`{override.source_name}` takes one setting: `name = value` or `name in [...]`",
                    Span(shown, 1, 1, 1, len(override.statement) + 1), "not a setting",
                    help="for example --set successes=5 or --set 'resilience4j.retry.maxAttempts in [3, 6]'")
        return None
    return _moved(body[0], wrapped, shown)


def _moved(node, wrapped: SourceFile, shown: SourceFile):
    """node with every span moved from the wrapped text to the override as the user wrote it."""
    if isinstance(node, Span):
        if node.file is not wrapped:
            return node
        width = len(shown.text) + 1

        def column(col: int) -> int:
            return min(max(col - len(_WRAP), 1), width)
        return Span(shown, 1, column(node.col), 1, max(column(node.end_col), column(node.col) + 1))
    if isinstance(node, (tuple, LazyNodes)):         # a long list is moved value by value, as a tuple
        return tuple(_moved(item, wrapped, shown) for item in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {f.name: _moved(getattr(node, f.name), wrapped, shown) for f in dataclasses.fields(node)
                   if f.init}
        return dataclasses.replace(node, **changes)
    return node


def apply_overrides(program: ast.Program, overrides: list[Override], diags: Diagnostics,
                    space_settings) -> tuple[ast.Program, bool]:
    """The program with the overrides in place of the statements they name, and whether any of
    them changes the size. Client parameters of a `use` client cannot be overridden (its
    parameters come from the neutral value)."""
    if not program.spaces or not overrides:
        return program, False
    space = program.spaces[0]
    body = list(space.body)
    sized = False
    for override in overrides:
        statement = parse_override(override, diags)
        if statement is None:
            continue
        key = statement.key
        targets = _clients_named(body, key)
        if key.dotted in space_settings or len(key.parts) < 3 and not targets:
            _replace(body, statement, key.dotted)      # an unknown key is appended: the checks name it
            sized = sized or key.dotted in SIZE_SETTINGS or key.dotted in LOAD_SETTINGS
            continue
        sized = True
        if not targets:
            diags.error("E0209", f"`{key.dotted}` names no setting and no client", key.span, "unknown",
                        help=_unknown_key_help(key.dotted, body, space_settings))
            continue
        for index, client, param in targets:
            if client.uses:
                diags.error("E0503", f"client `{_label(client)}` is configured with `use`; "
                                     f"`{override.option}` cannot change its native parameters",
                            key.span, "a `use` client", help="override the spec's `let` in a copy of the spec")
                continue
            items = list(body[index].body)
            _replace(items, dataclasses.replace(statement, key=ast.Key(param, key.span)), ".".join(param))
            body[index] = dataclasses.replace(body[index], body=tuple(items))
    return dataclasses.replace(program, spaces=(dataclasses.replace(space, body=tuple(body)), *program.spaces[1:])), sized


def _label(client: ast.Client) -> str:
    return client.label.name if client.label else f"{client.library.name}.{client.pattern.name}"


def _clients_named(body: list, key: ast.Key) -> list[tuple[int, ast.Client, tuple[str, ...]]]:
    """The clients `key` names, each with the parameter it sets there: `LABEL.param` or
    `library.pattern.param` of a client of one pattern; `LABEL.pattern.param` or
    `library.pattern.param` of a composed client that has that pattern (its parameter `pattern.param`)."""
    found = []
    for index, item in enumerate(body):
        if not isinstance(item, ast.Client):
            continue
        names = {item.label.name} if item.label else set()
        if item.parts:
            head, pattern, param = (".".join(key.parts[:-2]), key.parts[-2], key.parts[-1]) if len(key.parts) >= 3 \
                else (None, None, None)
            if pattern in {part.name for part in item.parts} and head in names | {item.library.name}:
                found.append((index, item, (pattern, param)))
        elif ".".join(key.parts[:-1]) in names | {f"{item.library.name}.{item.pattern.name}"}:
            found.append((index, item, (key.parts[-1],)))
    return found


def _unknown_key_help(dotted: str, body: list, space_settings) -> str:
    """What a key may be, short enough to be read whole: the closest name, the clients' labels (the
    first few), and the space settings by family (`load.*`)."""
    clients = [item for item in body if isinstance(item, ast.Client)]
    labels = [clip(_label(c), 60) for c in clients[:MAX_LISTED]]
    more = f" and {len(clients) - MAX_LISTED} more" if len(clients) > MAX_LISTED else ""
    families = list(dict.fromkeys(name if "." not in name else name.split(".", 1)[0] + ".*" for name in space_settings))
    written = [f"{_label(c)}.{item.key.dotted}" for c in clients[:MAX_SUGGESTED] for item in c.settings]
    guess = suggest(dotted, [*space_settings, *written])
    lead = f"did you mean `{guess}`? " if guess else ""
    return (f"{lead}a client parameter is LABEL.param, or LABEL.pattern.param in a composed client, with LABEL "
            f"one of {', '.join(labels) or '(no client)'}{more}; space settings are {', '.join(families)}")


def _replace(items: list, statement, dotted: str) -> None:
    for i, item in enumerate(items):
        if isinstance(item, (ast.Bind, ast.Axis)) and item.key.dotted == dotted:
            items[i] = statement
            return
    items.insert(_settings_end(items), statement)


def _settings_end(items: list) -> int:
    """Where a new setting goes: after the last setting (clients and assertions keep their places)."""
    last = -1
    for i, item in enumerate(items):
        if isinstance(item, (ast.Bind, ast.Axis)):
            last = i
    return last + 1

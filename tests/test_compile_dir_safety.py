"""`rbl compile -o DIR` never writes or removes anything outside DIR (issue 15): a hostile or
damaged .rbl-compiled.json, links, hard links and special files inside DIR."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from rbl.targets.output_dir import OWN_DIRECTORIES, OWN_FILES, RECORD, safe_name, write_file

from .conftest import EXAMPLES, has_topology

QUICKSTART = EXAMPLES / "quickstart.rbl"


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def out(cli, tmp_path):
    """A directory `rbl compile` wrote, with a victim file next to it."""
    directory = tmp_path / "out"
    code, _, err = cli("compile", QUICKSTART, "-o", directory)
    assert code == 0, err
    (tmp_path / "victim.txt").write_text("secret\n")
    return directory


def add_to_record(out, entries: dict) -> None:
    record = json.loads((out / RECORD).read_text())
    record["files"].update(entries)
    (out / RECORD).write_text(json.dumps(record))


def compile_into(cli, out, *extra):
    return cli("compile", QUICKSTART, "-o", out, *extra)


# -- the record is untrusted --------------------------------------------------------------------
def test_a_record_entry_outside_the_directory_deletes_nothing(cli, out):
    victim = out.parent / "victim.txt"
    add_to_record(out, {"../victim.txt": sha(victim)})
    code, _, err = compile_into(cli, out)
    assert code == 2 and "is damaged" in err and "../victim.txt" in err and "--force" in err
    assert compile_into(cli, out, "--force")[0] == 0
    assert victim.read_text() == "secret\n"


def test_an_absolute_record_entry_deletes_nothing_even_with_force(cli, out):
    victim = out.parent / "victim.txt"
    add_to_record(out, {str(victim): sha(victim)})
    assert compile_into(cli, out, "--force")[0] == 0
    assert victim.read_text() == "secret\n"
    # and the record rbl writes afterwards is clean again
    assert all(safe_name(name) for name in json.loads((out / RECORD).read_text())["files"])


@pytest.mark.parametrize("entry", ["a/../../victim.txt", "docker/../../victim.txt", "./plan.json", "", "/",
                                   "plan.json\x00../x", "a\\..\\..\\victim.txt", "x" * 5000, "\ud800",
                                   "envoy//envoy.yaml", "docker/\x7f"])
def test_record_entries_that_are_not_plain_relative_paths_make_it_damaged(cli, out, entry):
    add_to_record(out, {entry: "0" * 64})
    code, _, err = compile_into(cli, out)
    assert code == 2 and "is damaged" in err, err
    assert compile_into(cli, out, "--force")[0] == 0


@pytest.mark.parametrize("content", ['{"files": {"plan.json": 42}}', '{"files": {"plan.json": "../x"}}',
                                     '{"files": ["plan.json"]}', '{"files": {}, "spec": []}', "[]", "42",
                                     "[" * 100_000 + "]" * 100_000, "\xff\xfe",
                                     json.dumps({"files": {"a" * 2000: "0" * 64}})], ids=str.__len__)
def test_damaged_records_are_refused_without_force_and_ignored_with_it(cli, out, content):
    (out / RECORD).write_bytes(content.encode("utf-8", "surrogateescape") if content != "\xff\xfe"
                               else b"\xff\xfe")
    code, _, err = compile_into(cli, out)
    assert code == 2 and "is damaged" in err, err
    code, _, err = compile_into(cli, out, "--force")
    assert code == 0, err


def test_a_huge_record_is_damaged_without_being_read(cli, out):
    with (out / RECORD).open("r+b") as record:
        record.truncate(64 << 20)                       # sparse: cheap to make
    code, _, err = compile_into(cli, out)
    assert code == 2 and "larger than" in err


def test_a_record_that_is_a_link_is_damaged_and_replaced_not_written_through(cli, out):
    outside = out.parent / "record.json"
    outside.write_text((out / RECORD).read_text())
    before = outside.read_text()
    (out / RECORD).unlink()
    (out / RECORD).symlink_to(outside)
    code, _, err = compile_into(cli, out)
    assert code == 2 and "is damaged" in err and "not a regular file" in err
    assert compile_into(cli, out, "--force")[0] == 0
    assert outside.read_text() == before and not (out / RECORD).is_symlink()


def test_a_record_entry_naming_a_directory_removes_nothing(cli, out):
    add_to_record(out, {"envoy": "0" * 64})
    assert compile_into(cli, out)[0] == 0
    assert (out / "envoy" / "envoy.yaml").is_file()


def test_a_recorded_file_behind_a_linked_directory_is_not_removed(cli, out):
    outside = out.parent / "outside"
    outside.mkdir()
    (outside / "x").write_text("keep\n")
    (out / "notes").symlink_to(outside)
    add_to_record(out, {"notes/x": sha(outside / "x")})
    code, _, err = compile_into(cli, out)
    assert code == 0, err
    assert (outside / "x").read_text() == "keep\n"


# -- links, hard links and special files where rbl writes -----------------------------------------
def test_a_linked_directory_is_refused_and_with_force_replaced_by_a_real_one(cli, out):
    outside = out.parent / "outside"
    outside.mkdir()
    for sub in ("envoy", "docker"):
        target = out / sub
        os.system(f"rm -rf '{target}'")
        target.symlink_to(os.path.relpath(outside, out))
        code, _, err = compile_into(cli, out)
        assert code == 2 and f"{sub} is a symbolic link" in err, err
        assert compile_into(cli, out, "--force")[0] == 0
        assert list(outside.iterdir()) == [] and target.is_dir() and not target.is_symlink()


@pytest.mark.parametrize("name", ["plan.json", "docker-compose.yaml", "envoy/envoy.yaml",
                                  "docker/target.Dockerfile", "docker/rbl/rbl/__init__.py"])
def test_a_linked_file_is_refused_and_with_force_replaced_not_written_through(cli, out, name):
    victim = out.parent / "victim.txt"
    (out / name).unlink()
    (out / name).symlink_to(victim)
    code, _, err = compile_into(cli, out)
    assert code == 2 and "is a symbolic link" in err, err
    assert compile_into(cli, out, "--force")[0] == 0
    assert victim.read_text() == "secret\n" and not (out / name).is_symlink()


def test_a_link_rbl_did_not_make_in_a_directory_it_did_not_make_is_never_followed(cli, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("secret\n")
    (out / "plan.json").symlink_to(victim)
    assert compile_into(cli, out)[0] == 2
    assert compile_into(cli, out, "--force")[0] == 0
    assert victim.read_text() == "secret\n"


@pytest.mark.parametrize("name", ["plan.json", "envoy/envoy.yaml"])
def test_a_hard_linked_file_is_refused_and_with_force_unshared(cli, out, name):
    victim = out.parent / "victim.txt"
    (out / name).unlink()
    os.link(victim, out / name)
    code, _, err = compile_into(cli, out)
    assert code == 2 and "hard link" in err, err
    assert compile_into(cli, out, "--force")[0] == 0
    assert victim.read_text() == "secret\n" and (out / name).stat().st_nlink == 1


def test_a_fifo_where_rbl_writes_is_refused_not_opened(cli, out):
    (out / "plan.json").unlink()
    os.mkfifo(out / "plan.json")                       # opening it for writing would block forever
    code, _, err = compile_into(cli, out)
    assert code == 2 and "not a regular file" in err
    assert compile_into(cli, out, "--force")[0] == 0 and (out / "plan.json").is_file()


def test_a_directory_where_rbl_writes_a_file_is_refused_even_with_force(cli, out):
    (out / "docker-compose.yaml").unlink()
    (out / "docker-compose.yaml").mkdir()
    (out / "docker-compose.yaml" / "mine.txt").write_text("data")
    code, _, err = compile_into(cli, out, "--force")
    assert code == 2 and "is a directory" in err
    assert (out / "docker-compose.yaml" / "mine.txt").read_text() == "data"


def test_the_output_directory_itself_may_be_a_link(cli, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    code, _, err = compile_into(cli, tmp_path / "link")
    assert code == 0, err
    assert (real / "plan.json").is_file() and (real / "envoy" / "envoy.yaml").is_file()
    assert compile_into(cli, tmp_path / "link")[0] == 0           # and recompiling through it works


def test_a_dangling_output_link_is_a_usage_error(cli, tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    code, _, err = compile_into(cli, tmp_path / "link")
    assert code == 2 and "symbolic link to nothing" in err
    assert not (tmp_path / "nowhere").exists()


# -- what rbl writes ----------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.rbl")))
def test_every_file_a_compile_writes_is_under_a_name_it_checks(cli, tmp_path, example, fmt):
    out = tmp_path / "out"
    target = ["--target", "istio"] if has_topology(EXAMPLES / example) else []
    code, _, err = cli("compile", EXAMPLES / example, "-o", out, "--format", fmt, *target)
    assert code == 0, err
    for path in out.rglob("*"):
        if path.is_file():
            top = path.relative_to(out).parts[0]
            assert top in OWN_FILES or top in OWN_DIRECTORIES, path
            assert not path.name.startswith(".rbl-") or path.name == RECORD, "a temporary file was left"


def test_write_file_replaces_links_and_hard_links_instead_of_writing_through(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("secret\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").symlink_to(victim)
    os.link(victim, root / "b")
    for name in ("a", "b"):
        assert write_file(root, name, b"new\n").read_bytes() == b"new\n"
    assert victim.read_text() == "secret\n" and not (root / "a").is_symlink()
    (root / "sub").symlink_to(tmp_path)
    from rbl.errors import UsageError
    with pytest.raises(UsageError, match="not a directory"):
        write_file(root, "sub/c", b"x")
    assert not (tmp_path / "c").exists()

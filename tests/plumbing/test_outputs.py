"""Untrusted tool ids never write outside the output folder or over another output."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactlab import load_policy, load_transcript, replay
from compactlab.plumbing.outputs import OutputDir, safe_stem
from helpers import SAMPLES, asst, files_under, results, tr, tu, user, write_jsonl

HOSTILE = ["../../x", "../../../etc/passwd", "/etc/passwd", "a/../../b", "nul\x00byte", "x" * 10_000, "CON", "con",
           "LPT1", "aux.txt", "Toolu_Case", "toolu_case", "a b", "a_b", "..", ".", "", "ü-ñícödé", "a:b", "a|b"]


def test_safe_stems_are_safe_and_distinct():
    stems = [safe_stem(i) for i in HOSTILE]
    for s in stems:
        assert s and len(s) <= 64 and all(c.isalnum() and c.isascii() or c in "_-" for c in s)
        assert s.lower() not in {"con", "nul", "aux", "lpt1"}
    assert len(set(stems)) == len(stems)  # ids that differ only in case: OutputDir adds a hash (below)


def test_ids_that_differ_only_in_case_get_distinct_files(tmp_path):
    od = OutputDir(tmp_path)
    a, _ = od.persisted_name("Toolu_Case", "one")
    b, _ = od.persisted_name("toolu_case", "two")
    assert a == "tool-results/Toolu_Case.txt" and a.lower() != b.lower()


def test_hostile_ids_persist_inside_the_folder_and_distinctly(tmp_path):
    msgs = [user("go")]
    for i, tid in enumerate(HOSTILE):
        msgs += [asst(tu(tid, "read_file")), results(tr(tid, chr(65 + i % 26) * 250_000))]
    msgs.append(asst("done"))
    # a duplicated id with different output must not overwrite the first
    msgs[-1:-1] = [asst(tu("../../x", "read_file")), results(tr("../../x", "Z" * 250_000))]
    t = load_transcript(str(write_jsonl(tmp_path / "t.jsonl", msgs)))
    out = tmp_path / "out"
    run = replay(t, load_policy("s08", ["summary.enabled=false", "snip.enabled=false"]), out_dir=out)
    files = run.summary.persisted_files
    assert len(files) == len(HOSTILE) + 1 == run.summary.persisted
    assert len({f["path"].lower() for f in files}) == len(files)
    written = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert [p for p in written if out not in p.parents and p.name != "t.jsonl"] == []
    for f in files:
        p = (out / f["path"]).resolve()
        assert out.resolve() in p.parents and p.stat().st_size == f["chars"]
    assert not (tmp_path / "x").exists() and not Path("/x.txt").exists()


@pytest.mark.parametrize("dry_run", [False, True])
def test_same_id_same_output_is_written_once(tmp_path, dry_run):
    od = OutputDir(tmp_path / "out", dry_run=dry_run)

    def persist(tool_id: str, text: str) -> tuple[str, bool]:  # (as RunEnv.persist does)
        rel, fresh = od.persisted_name(tool_id, text)
        if fresh:
            od.write_text(rel, text)
        return rel, fresh

    assert persist("id", "text") == ("tool-results/id.txt", True)
    assert persist("id", "te" + "xt") == ("tool-results/id.txt", False)  # (another str of the same text)
    assert persist("id", "other") == ("tool-results/id-2.txt", True)
    assert persist("id", "other") == ("tool-results/id-2.txt", False)


def test_an_output_whose_hash_matches_another_s_is_not_lost(tmp_path):
    """A name is kept by its text's length and hash; where they match, the file written makes sure:
    a collision (forged here) writes the second output under a name of its own."""
    od = OutputDir(tmp_path / "out")
    rel, _ = od.persisted_name("id", "first")
    od.write_text(rel, "first")
    od._owner["id"] = ("id", len("other"), hash("other"))  # what a collision of "first" and "other" would keep
    assert od.persisted_name("id", "other") == ("tool-results/id-2.txt", True)


def test_out_that_is_a_file_is_a_clear_error(tmp_path):
    from compactlab.errors import UsageError

    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(UsageError, match="exists and is not a folder"):
        OutputDir(f).prepare()


def test_a_rerun_replaces_the_earlier_run_whole(tmp_path):
    def run(files: dict[str, bytes]) -> None:
        out = OutputDir(tmp_path / "o")
        out.prepare()
        out.write_all(files)
        assert not (tmp_path / "o" / "calls.csv").exists() or (tmp_path / "o" / "calls.csv").read_bytes() == b"1\n"
        out.commit()

    run({"tool-results/a.txt": b"a", "tool-results/b.txt": b"b", "chart.png": b"png", "calls.csv": b"1\n"})
    run({"tool-results/a.txt": b"A", "calls.csv": b"2\n"})  # no chart, one result fewer
    assert files_under(tmp_path / "o") == {".compactlab-run": b'{"files":["calls.csv","tool-results/a.txt"],"complete":true}\n',
                                           "calls.csv": b"2\n", "tool-results/a.txt": b"A"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]  # nothing staged is left beside it


def test_a_folder_compactlab_did_not_write_is_refused_unless_forced(tmp_path):
    from compactlab.errors import UsageError

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "summary.json").write_text("my own notes")
    with pytest.raises(UsageError, match=r"--out .*mine: holds files compactlab did not write \(summary.json\)"):
        OutputDir(mine).prepare()
    assert (mine / "summary.json").read_text() == "my own notes"
    out = OutputDir(mine, force=True)
    out.prepare()
    out.write_bytes("calls.csv", b"x")
    out.commit()
    assert sorted(p.name for p in mine.iterdir()) == [".compactlab-run", "calls.csv"]
    # a file a user adds to a run folder makes it theirs again
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match=r"\(notes.txt\)"):
        OutputDir(mine).prepare()


def test_force_never_removes_an_input_or_the_working_folder(tmp_path, monkeypatch):
    from compactlab.errors import UsageError

    (tmp_path / "t.jsonl").write_text("{}")
    with pytest.raises(UsageError, match="holds the input t.jsonl|holds the input .*/t.jsonl"):
        OutputDir(tmp_path, force=True).prepare(protect=[str(tmp_path / "t.jsonl")])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="--force would remove"):
        OutputDir(".", force=True).prepare()
    assert (tmp_path / "t.jsonl").exists()


def test_calls_csv_is_what_the_csv_module_writes():
    """calls.csv is formatted a row at a time by hand: the same text as csv.writer gives."""
    import csv
    import io

    from compactlab import load_policy, load_transcript, replay
    from compactlab.engine.records import TURN_COLUMNS, PythonTurnRecord, turn_values
    from compactlab.reports import calls_csv

    import dataclasses

    t = load_transcript(str(SAMPLES / "synth-medium.jsonl"))
    odd = replay(t, load_policy("none"))
    costs = [0.0, 9.75e-05, 1e-4, 0.1 + 0.2, 5e-324, 1e16, 3.5e20, float("inf"), float("nan"), 2.5e-07, 12.0,
             2.0**46 + 0.625, 9999999999999998.0, -0.0, -1.5]
    odd = dataclasses.replace(odd, calls=[type(c)(**{**c.to_dict(), "input_cost_usd": v, "raw_tokens": 2**62 + i})
                                          for i, (c, v) in enumerate(zip(odd.calls, costs))])
    # the same records as the Python engine's class (the reference writer's) where the native one is in use
    python = dataclasses.replace(odd, calls=[PythonTurnRecord(**c.to_dict()) for c in odd.calls])
    runs = [replay(t, load_policy("s08")), replay(t, load_policy("none"), window=2000), odd,
            dataclasses.replace(odd, calls=[]), python]
    # each run shows what it is there for: an overflow ("true"), the odd figures, no call at all
    assert any(c.overflow for c in runs[1].calls) and not any(c.overflow for c in runs[0].calls)
    assert {"inf", "nan", "5e-324"} <= set(calls_csv(odd).replace("\n", ",").split(",")) and runs[3].calls == []
    for run in runs:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(TURN_COLUMNS)
        w.writerows([*v[:17], "true" if v[17] else "false", *v[18:]] for v in map(turn_values, run.calls))
        assert TURN_COLUMNS[17] == "overflow" and calls_csv(run) == buf.getvalue()
    assert calls_csv(python) == calls_csv(odd)


def test_a_file_given_in_parts_is_written_whole_without_joining_them(tmp_path):
    """A big report (results.json of 30,000 runs) is handed over in parts: every way of writing
    writes them one after the other."""
    from compactlab.plumbing.outputs import atomic_write_bytes

    out = OutputDir(tmp_path / "out")
    out.prepare()
    out.write_all({"a.json": [b"{", b'"x": 1', b"}"], "b.txt": b"plain"})
    out.commit()
    assert (tmp_path / "out" / "a.json").read_bytes() == b'{"x": 1}'
    assert (tmp_path / "out" / "b.txt").read_bytes() == b"plain"
    atomic_write_bytes(tmp_path / "d", [b"one ", b"two"])
    assert (tmp_path / "d").read_bytes() == b"one two"


def test_a_new_file_is_written_in_place_and_one_written_again_or_planted_is_replaced_whole(tmp_path, monkeypatch):
    """A run writes a file it has not written yet straight into its fresh folder (no file aside, no
    rename: that folder is put in place whole); a file written again is replaced whole; something
    planted where a file goes (a link to a file outside) is never written through: refused, as a
    name that would leave the folder is; a write that fails leaves no part of its file."""
    import os

    from compactlab.errors import UsageError
    from compactlab.plumbing import outputs

    renamed: list[str] = []
    replace = os.replace
    monkeypatch.setattr(outputs.os, "replace", lambda a, b: renamed.append(str(b)) or replace(a, b))
    outside = tmp_path / "outside.txt"
    outside.write_text("mine")
    out = OutputDir(tmp_path / "out")
    view = out.sub("one")
    out.write_text("tool-results/a.txt", "first")
    view.write_text("tool-results/a.txt", "in the view")
    assert renamed == []  # (new files: written where they go)
    stage = out._stage
    assert stage is not None and sorted(p.name for p in (stage / "tool-results").iterdir()) == ["a.txt"]
    out.write_text("tool-results/a.txt", "again")  # (written again: replaced whole)
    os.symlink(outside, stage / "tool-results" / "b.txt")  # (planted: not followed)
    with pytest.raises(UsageError, match="outside the output folder"):
        out.write_text("tool-results/b.txt", "not through the link")
    assert [Path(p).name for p in renamed] == ["a.txt"]
    with pytest.raises(UsageError, match="outside the output folder"):
        out.write_text("../escape.txt", "x")
    with pytest.raises(UsageError, match="outside the output folder"):
        out.write_text("tool-results/../../escape.txt", "x")

    def failing():
        yield b"part"
        raise OSError(28, "No space left on device")

    with pytest.raises(Exception, match="cannot write"):
        out.write_bytes("c.txt", failing())
    assert not (stage / "c.txt").exists()
    out.commit()
    assert (tmp_path / "out" / "tool-results" / "a.txt").read_text() == "again"
    assert (tmp_path / "out" / "one" / "tool-results" / "a.txt").read_text() == "in the view"
    assert outside.read_text() == "mine"
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "out" / "c.txt").exists()


def test_a_tree_is_removed_as_shutil_removes_it_and_a_link_in_it_is_never_followed(tmp_path):
    """``_remove_tree`` (a run's old folder, a failed run's staging folder) removes what
    ``shutil.rmtree(ignore_errors=True)`` removes, without importing ``shutil``: files, nested
    folders, a named pipe, links to a folder and a file outside (their targets untouched); a
    path that is a link or a file is left."""
    import os
    import shutil
    import subprocess
    import sys

    from compactlab.plumbing.outputs import _remove_tree

    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "keep.txt").write_text("kept")

    def tree(root: Path) -> Path:
        (root / "a" / "b" / "c").mkdir(parents=True)
        (root / "a" / "b" / "c" / "f.txt").write_text("x")
        (root / "a" / "g.bin").write_bytes(b"\0" * 10)
        (root / "empty").mkdir()
        os.mkfifo(root / "a" / "pipe")
        (root / "a" / "to-folder").symlink_to(outside, target_is_directory=True)
        (root / "to-file").symlink_to(outside / "deep" / "keep.txt")
        (root / "dangling").symlink_to(tmp_path / "nowhere")
        return root

    for remove in (_remove_tree, lambda p: shutil.rmtree(p, ignore_errors=True)):
        root = tree(tmp_path / "run")
        remove(root)
        assert not os.path.lexists(root)
        assert (outside / "deep" / "keep.txt").read_text() == "kept"
    link = tmp_path / "link"
    link.symlink_to(outside, target_is_directory=True)
    plain_file = tmp_path / "file.txt"
    plain_file.write_text("x")
    _remove_tree(link)
    _remove_tree(plain_file)
    _remove_tree(tmp_path / "nothing-here")
    assert link.is_symlink() and plain_file.read_text() == "x" and (outside / "deep" / "keep.txt").exists()
    # (and shutil is not imported by it: a replay that replaces its folder does not pay for it)
    code = ("import sys; from pathlib import Path; from compactlab.plumbing.outputs import _remove_tree; "
            f"_remove_tree(Path({str(tree(tmp_path / 'again'))!r})); print('shutil' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.stdout.strip() == "False" and not (tmp_path / "again").exists()


def test_where_a_folder_cannot_be_walked_by_its_descriptor_shutil_removes_the_tree(tmp_path, monkeypatch):
    """A system whose ``os.scandir`` takes no descriptor: the tree is removed by ``shutil``, a link
    in it still removed, its target untouched."""
    import os

    from compactlab.plumbing.outputs import _remove_tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    root = tmp_path / "run"
    (root / "a").mkdir(parents=True)
    (root / "a" / "f.txt").write_text("x")
    (root / "a" / "link").symlink_to(outside, target_is_directory=True)
    monkeypatch.setattr(os, "supports_fd", os.supports_fd - {os.scandir})
    _remove_tree(root)
    assert not root.exists() and (outside / "keep.txt").read_text() == "kept"

"""Every format module keeps the loader protocol (transcripts/__init__.py): a name, a description,
load, and what detection reads; stream where its lines are its messages."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from compactlab.transcripts import FORMATS, Transcript, TranscriptStream


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_module_keeps_the_protocol(name):
    module = FORMATS[name]
    assert module.NAME == name and isinstance(module.DESCRIPTION, str) and module.DESCRIPTION
    assert callable(module.load) and list(inspect.signature(module.load).parameters)[0] == "path"
    # (a store's format is found by its tables: transcripts/stores.py)
    assert hasattr(module, "sniff") or hasattr(module, "sniff_document") or module.TABLES, "detection cannot find it"
    if hasattr(module, "sniff"):
        assert module.sniff([]) == 0.0  # nothing read, nothing claimed
    for optional in ("stream", "inspect_facts"):
        assert not hasattr(module, optional) or callable(getattr(module, optional))


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_no_format_claims_what_is_not_its_own(name):
    """A line of another shape scores nothing: detection never guesses on noise."""
    module = FORMATS[name]
    noise = [{"unrelated": 1}, {"kind": "log", "text": "hello"}]
    if hasattr(module, "sniff"):
        assert module.sniff(noise) == 0.0
    if hasattr(module, "sniff_document"):
        assert module.sniff_document({"unrelated": noise}) == 0.0


def test_a_format_that_streams_gives_what_it_loads(samples):
    path = str(samples / "synth-small.jsonl")
    module = FORMATS["anthropic"]
    loaded, stream = module.load(path), module.stream(path)
    assert isinstance(loaded, Transcript) and isinstance(stream, TranscriptStream)
    streamed = [e.message for batch in stream.batches(7) for e in batch]
    assert streamed == loaded.messages


def test_an_anthropic_messages_file_is_told_by_its_first_lines_and_loads_no_other_format(samples):
    """The first format's full score is the most any scores, and the first of equal scores wins:
    such a file is detected without the fifteen other modules being imported (a replay's start-up)."""
    import subprocess
    import sys

    code = ("import sys; from compactlab.transcripts import detect_format; "
            f"print(detect_format({str(samples / 'synth-small.jsonl')!r})); "
            "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('compactlab.transcripts.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "anthropic"
    assert out[1] == str(sorted(["anthropic_messages", "messages", "model", "reader", "stores", "writer"]))


def test_detection_is_the_best_score_of_every_format(samples, tmp_path):
    """What detection says of a JSON lines file is the format of the best score among them all (the
    first of equal ones), each score from 0 to 1, whether or not the first format's alone decided."""
    from compactlab.synth import write
    from compactlab.transcripts import detect_format
    from compactlab.transcripts.reader import read_head

    data = Path(__file__).parent / "data"
    write(tmp_path / "cc.jsonl", 6, seed=1, form="claude-code")
    files = [*sorted(samples.glob("*.jsonl")), *sorted(data.rglob("*.jsonl")), tmp_path / "cc.jsonl"]
    seen = set()
    for path in files:
        objects = read_head(str(path)).objects
        scores = {n: FORMATS[n].sniff(objects) for n in FORMATS if hasattr(FORMATS[n], "sniff")}
        assert all(0.0 <= v <= 1.0 for v in scores.values()), (path, scores)
        best = max(scores, key=lambda n: scores[n])
        assert detect_format(str(path)) == best, (path, scores)
        seen.add(best)
    assert {"anthropic", "claude-code"} <= seen and len(seen) >= 4, seen  # (both ways through detection)


@pytest.mark.parametrize("suffix", ["", ".gz", ".zst"])
def test_a_files_head_is_read_a_small_piece_at_a_time(suffix, tmp_path, monkeypatch):
    """Telling a file's format reads what its first lines need, a ``HEAD_BUFFER`` at a time, not the
    1 MiB a whole file's reading asks: the same lines, the same answer."""
    import gzip
    import io

    import orjson
    import zstandard

    from compactlab.transcripts import reader

    line = orjson.dumps({"role": "user", "content": "x" * 5_000}) + b"\n"
    raw = line * 400  # 2 MB: the head's 64 lines are 320 KB of it
    path = tmp_path / f"big.jsonl{suffix}"
    path.write_bytes(gzip.compress(raw) if suffix == ".gz" else zstandard.ZstdCompressor().compress(raw)
                     if suffix == ".zst" else raw)
    asked: list[int] = []

    class Counting(io.FileIO):
        def readinto(self, b):  # type: ignore[no-untyped-def]
            asked.append(len(b))
            return super().readinto(b)

        def read(self, size=-1):  # type: ignore[no-untyped-def]
            asked.append(size)
            return super().read(size)

    monkeypatch.setattr(reader, "open_regular", lambda p, *a, **k: Counting(p, "rb"))
    head = reader.read_head(str(path))
    assert [o for o in head.objects] == [orjson.loads(line)] * 64
    if not suffix:  # (a compressed file's decompressor asks what it asks; the reading is the same)
        assert asked and max(asked) <= reader.HEAD_BUFFER and sum(asked) < len(line) * 64 + reader.HEAD_BUFFER
    asked.clear()
    assert reader.peek(str(path)) == raw[:65536] and not reader.is_document(str(path))
    if not suffix:
        assert max(asked) <= 65536

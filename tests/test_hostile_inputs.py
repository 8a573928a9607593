"""Tiny hostile files never allocate what they claim; malformed fields are bad lines, not crashes;
limits are bounded; what compactlab reads back from its own cache is checked (issue 25 §2, §5, §7)."""

from __future__ import annotations

import gzip
import os
import resource
import subprocess
import sys
import textwrap

import orjson
import pytest

from helpers import ROOT


def _jsonl(path, lines: list[dict]) -> str:
    path.write_bytes(b"".join(orjson.dumps(o) + b"\n" for o in lines))
    return str(path)


def _rollout(*items: dict) -> list[dict]:
    """A Codex rollout: a user prompt, the given response items, each stamped in order."""
    lines = [{"type": "session_meta", "payload": {"id": "s1", "cli_version": "0.1"}},
             {"type": "turn_context", "payload": {"model": "gpt-5"}},
             {"type": "response_item", "payload": {"type": "message", "role": "user",
                                                   "content": [{"type": "input_text", "text": "do it"}]}},
             *items]
    return [{**line, "timestamp": f"2026-01-01T00:00:{i:02d}Z"} for i, line in enumerate(lines)]


def _reply(text: str) -> dict:
    return {"type": "response_item", "payload": {"type": "message", "role": "assistant",
                                                 "content": [{"type": "output_text", "text": text}]}}


def _tokens(**last) -> dict:
    return {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": {"t": 1},
                                                                               "last_token_usage": last}}}


@pytest.mark.parametrize("claim", ["1000000000", "9" * 30])
def test_a_redacted_text_longer_than_a_line_is_a_bad_line_not_an_allocation(cli, tmp_path, claim):
    path = _jsonl(tmp_path / "r.jsonl", _rollout(_reply(f"[REDACTED_TEXT len={claim} sha=ab12]")))
    r = cli("inspect", path)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith(f"error: {path}:4: a redacted text of") and "longer than a line" in r.stderr
    r = cli("inspect", path, "--skip-bad-lines", "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert orjson.loads(r.stdout)["skipped_lines"] == 1


def test_redacted_texts_are_bounded_for_the_whole_file(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("COMPACTLAB_MAX_LINE_MB", "1")
    monkeypatch.setenv("COMPACTLAB_MAX_DOCUMENT_MB", "2")
    one = f"[REDACTED_TEXT len={900_000} sha=ab]"
    path = _jsonl(tmp_path / "r.jsonl", _rollout(_reply(one), _reply(one), _reply(one)))
    r = cli("inspect", path)
    assert r.exit_code == 2 and f"{path}:6:" in r.stderr and "in all" in r.stderr
    ok = _jsonl(tmp_path / "ok.jsonl", _rollout(_reply(one)))
    assert cli("inspect", ok).exit_code == 0  # a claim within the limits is sized as before


@pytest.mark.parametrize("item, message", [
    ({"type": "compacted", "payload": {"message": "", "replacement_history": ["not an item"]}},
     "replacement_history holds a string"),
    ({"type": "compacted", "payload": {"message": "", "replacement_history": {"a": 1}}},
     "replacement_history is an object"),
    ({"type": "compacted", "payload": {"message": "", "replacement_history": [{"type": "message", "content": 5}]}},
     "content is a number"),
    (_tokens(input_tokens="lots", output_tokens=1), "last_token_usage.input_tokens is \"lots\""),
    (_tokens(input_tokens=-4, output_tokens=1), "last_token_usage.input_tokens is -4"),
    ({"type": "event_msg", "payload": {"type": "token_count", "info": {"last_token_usage": [1, 2]}}},
     "last_token_usage is a list"),
])
def test_a_malformed_codex_field_is_a_bad_line_naming_it(cli, tmp_path, item, message):
    path = _jsonl(tmp_path / "r.jsonl", _rollout(_reply("hello"), item, _reply("again")))
    r = cli("inspect", path)
    assert r.exit_code == 2, r.stderr
    assert r.stderr.startswith(f"error: {path}:5: ") and message in r.stderr, r.stderr
    assert cli("inspect", path, "--skip-bad-lines").exit_code == 0


def test_a_shuffled_rollout_is_replayed_in_file_order_with_a_warning(cli, tmp_path):
    lines = _rollout(_reply("one"), _tokens(input_tokens=10, output_tokens=1), _reply("two"))
    lines.reverse()
    path = _jsonl(tmp_path / "r.jsonl", lines)
    r = cli("inspect", path)
    assert r.exit_code == 0, r.stderr
    assert "out of time order" in r.stdout + r.stderr


def test_a_token_count_that_is_no_count_is_an_input_error_in_every_format(cli, tmp_path):
    traj = tmp_path / "t.traj.json"
    traj.write_bytes(orjson.dumps({"messages": [
        {"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok", "usage": {"prompt_tokens": "abc", "completion_tokens": 3}}], "info": {}}))
    r = cli("inspect", traj)
    assert r.exit_code == 2 and "usage.prompt_tokens is \"abc\", not a token count" in r.stderr
    msgs = _jsonl(tmp_path / "m.jsonl", [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok", "usage": {"input_tokens": {"x": 1}, "output_tokens": 1}}])
    r = cli("inspect", msgs)
    assert r.exit_code == 2 and r.stderr.startswith(f"error: {msgs}:2: usage.input_tokens is")


def _openhands(*condensation_args: dict) -> list[dict]:
    events: list[dict] = [{"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}}]
    for k in range(1, 6):
        events.append({"id": k, "source": "agent", "action": "run", "args": {"command": f"ls {k}"},
                       "tool_call_metadata": {"tool_call_id": f"c{k}", "function_name": "execute_bash",
                                              "model_response": {"id": f"r{k}", "choices": [{"message": {
                                                  "role": "assistant", "content": "",
                                                  "tool_calls": [{"id": f"c{k}", "type": "function", "function": {
                                                      "name": "execute_bash", "arguments": "{}"}}]}}]}}})
    for n, args in enumerate(condensation_args):
        events.append({"id": 100 + n, "source": "agent", "action": "condensation", "args": args})
    return events


def test_an_openhands_range_of_a_trillion_ids_costs_two_numbers(tmp_path, cli):
    from compactlab.transcripts import load_transcript

    path = tmp_path / "oh.json"
    path.write_bytes(orjson.dumps(_openhands(
        {"forgotten_events_start_id": 1, "forgotten_events_end_id": 10**12, "summary": "s"},
        *({"forgotten_events_start_id": 1 + k % 5, "forgotten_events_end_id": (k + 1) * 10**7,
           "summary": "t"} for k in range(200)))))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = load_transcript(str(path))
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200_000  # KiB: no set of ids
    first = t.compactions[0]
    assert first.kept == (0,)  # the prompt's message stays; every call's message was forgotten


@pytest.mark.parametrize("args", [
    {"forgotten_events_start_id": 10**9, "forgotten_events_end_id": 10**12},  # past every event
    {"forgotten_events_start_id": 5 * 10**8, "forgotten_events_end_id": 2},  # backwards
])
def test_an_openhands_range_that_names_no_event_is_a_bad_record(tmp_path, cli, args):
    path = tmp_path / "oh.json"
    path.write_bytes(orjson.dumps(_openhands({**args, "summary": "s"})))
    r = cli("inspect", path)
    assert r.exit_code == 2 and "name no event of the log" in r.stderr and "event 6" in r.stderr
    assert cli("inspect", path, "--skip-bad-lines").exit_code == 0


@pytest.mark.parametrize("value", ["1e30", "inf", "nan", "-3", "0", "lots"])
def test_a_limit_from_the_environment_is_bounded(cli, monkeypatch, value, samples):
    monkeypatch.setenv("COMPACTLAB_MAX_LINE_MB", value)
    r = cli("inspect", samples / "synth-small.jsonl")
    assert r.exit_code == 2 and r.stderr.startswith(f"error: COMPACTLAB_MAX_LINE_MB={value}: not a size in MiB")


def test_a_gzip_bomb_line_is_refused_before_it_is_joined(tmp_path):
    """Under an address-space limit a line twice the size of what is left would not fit: the line
    is refused on its count while its pieces are read, not after they are joined."""
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as f:
        chunk = b"a" * (1 << 20)
        for _ in range(200):
            f.write(chunk)
    script = textwrap.dedent(f"""
        import os, resource, sys
        sys.path.insert(0, {str(ROOT)!r})
        os.environ["COMPACTLAB_MAX_LINE_MB"] = "160"
        from compactlab.errors import InputError
        from compactlab.transcripts.reader import iter_raw_lines
        import gc
        gc.collect()
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (240 << 20), resource.RLIM_INFINITY))
        try:
            list(iter_raw_lines({str(bomb)!r}))
        except InputError as exc:
            print("refused:", exc)
        except MemoryError:
            print("memory error")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "refused:" in out.stdout and "longer than 160 MiB" in out.stdout, out.stdout + out.stderr


# ---- §5: the cache compactlab reads back

def _cached_prices_file(cache_dir) -> list:
    return sorted((cache_dir / "prices").glob("*.json"))


@pytest.fixture
def price_cache(tmp_path):
    from compactlab.engine.cost.prices import GenaiPrices

    when = 1_775_000_000.0
    good = GenaiPrices(str(tmp_path), write=True).lookup("claude-sonnet-4-5", when)
    files = _cached_prices_file(tmp_path)
    assert len(files) == 1
    return tmp_path, files[0], good, when


@pytest.mark.parametrize("damage", ["negative", "infinite", "garbage", "not-json", "fifo", "zero-device", "huge"])
def test_a_damaged_price_cache_entry_is_ignored_with_a_warning_and_rebuilt(price_cache, damage):
    from compactlab.engine.cost.prices import GenaiPrices
    from compactlab.plumbing import cache as cache_module

    folder, entry, good, when = price_cache
    doc = orjson.loads(entry.read_bytes())
    if damage in ("negative", "infinite"):
        first = doc["prices"][0][1]
        first["input"] = -3.0 if damage == "negative" else 1e308 * 10
        entry.write_bytes(orjson.dumps(doc) if damage == "negative" else
                          orjson.dumps(doc).replace(b"null", b"1e999"))
    elif damage == "garbage":
        entry.write_bytes(orjson.dumps({**doc, "prices": [["when", {"input": 1}]]}))
    elif damage == "not-json":
        entry.write_bytes(b"\x00\x01not json")
    elif damage == "fifo":
        entry.unlink()
        os.mkfifo(entry)
    elif damage == "zero-device":
        entry.unlink()
        try:
            os.mknod(entry, 0o666 | 0o020000, os.makedev(1, 5))  # like /dev/zero, made here
        except OSError as exc:
            pytest.skip(f"cannot make a character device here: {exc}")
    else:
        entry.write_bytes(b" " * (cache_module.MAX_ENTRY_BYTES + 1))
    table = GenaiPrices(str(folder), write=True)
    prices = table.lookup("claude-sonnet-4-5", when)
    assert prices == good and prices.input >= 0
    assert len(table.problems) == 1 and "ignored" in table.problems[0] and "rebuilt" in table.problems[0]
    if damage not in ("fifo", "zero-device"):  # a regular entry is written anew; a special file is left alone
        assert GenaiPrices(str(folder), write=True).lookup("claude-sonnet-4-5", when) == good
        assert not GenaiPrices(str(folder), write=True).problems


def test_the_cache_warning_reaches_the_user(cli, tmp_path, monkeypatch, samples):
    from compactlab.engine.cost import prices as prices_module

    monkeypatch.setenv("COMPACTLAB_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(prices_module, "_DEFAULT", {})
    model = "claude-sonnet-4-5"
    prices_module.GenaiPrices(str(tmp_path), write=True).lookup(model, 1_775_000_000.0)
    for entry in _cached_prices_file(tmp_path):
        entry.unlink()
        os.mkfifo(entry)
    r = cli("replay", samples / "synth-small.jsonl", "--price-model", model)
    assert r.exit_code == 0, r.stderr
    assert "warning: cache entry" in r.stderr and "ignored (not a regular file): rebuilt" in r.stderr


def test_a_redacted_text_is_sized_without_being_built(tmp_path, monkeypatch):
    """A 300-byte rollout claiming a 200 MB text loads in a few hundred KB of memory, and a replay
    that persists that output shrinks the context as if the text were there."""
    import tracemalloc

    from compactlab import load_policy, load_transcript, replay

    monkeypatch.setenv("COMPACTLAB_MAX_LINE_MB", "256")
    claim = 200_000_000
    call = {"type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{}",
                                                   "call_id": "c1"}}
    output = {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1",
                                                     "output": f"[REDACTED_TEXT len={claim} sha=ab12]"}}
    path = _jsonl(tmp_path / "r.jsonl", _rollout(call, output, _reply("done")))
    replay(load_transcript(path), load_policy("s08"))  # (what a first replay imports and caches is not traced)
    tracemalloc.start()
    try:
        t = load_transcript(path)
        run = replay(t, load_policy("s08"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak
    assert t.entries[2].results[0].size == claim and t.entries[2].chars > claim
    last = run.calls[-1]
    assert last.raw_chars > claim > 100_000 > last.chars  # persisted: a preview of 2,000 chars stays
    assert run.summary.persisted == 1


def _under_address_space(script: str, limit_bytes: int, tmp_path) -> subprocess.CompletedProcess:
    import resource  # noqa: F401  (the child sets it)

    code = (f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit_bytes}, {limit_bytes}))\n" + script)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)


def test_a_small_document_reads_under_a_small_address_space(tmp_path):
    """(#49) read_document asked f.read(cap + 1): a GiB allocated before a byte of a 1 KB file was
    read (MemoryError under a 1 GB address space). It reads what the file holds."""
    doc = tmp_path / "small.json"
    doc.write_bytes(orjson.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    r = _under_address_space(f"from compactlab.transcripts.reader import read_document\n"
                             f"doc, sha = read_document({str(doc)!r})\nprint(len(doc['messages']))\n",
                             1024 << 20, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr[-500:]


def test_a_sparse_document_that_is_no_json_is_refused_at_its_first_part(tmp_path, cli):
    """(#49) A sparse 900 MB ``.json`` (4 KB on disk) took 3.7 GB: it is refused after 16 MiB."""
    sparse = tmp_path / "sparse.json"
    with open(sparse, "wb") as f:
        f.truncate(900 << 20)
    r = _under_address_space("import sys\nfrom compactlab.__main__ import main\n"
                             f"sys.argv = ['compactlab', 'inspect', {str(sparse)!r}, '--input-format', 'openhands']\n"
                             "main()\n", 1536 << 20, tmp_path)
    assert r.returncode == 2, r.stderr[-500:]
    assert "does not start with { or [" in r.stderr and "Traceback" not in r.stderr


def test_inspect_of_a_folder_skips_a_stray_file_that_is_no_transcript(cli, tmp_path):
    """(#49) A stray package.json stopped ``inspect DIR`` with exit 2 where replay and compare skip it."""
    from helpers import SAMPLES

    (tmp_path / "s.jsonl").write_bytes((SAMPLES / "synth-small.jsonl").read_bytes())
    (tmp_path / "package.json").write_text('{"name": "x", "version": "1.0.0"}')
    r = cli("inspect", tmp_path)
    assert r.exit_code == 0, r.output
    assert "s.jsonl" in r.stdout and "skipped 1 file(s) that are not transcripts" in r.stderr
    (tmp_path / "s.jsonl").unlink()
    r = cli("inspect", tmp_path)
    assert r.exit_code == 2 and "no file of the folder(s) is a transcript" in r.stderr

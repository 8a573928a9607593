"""Every format module keeps the loader protocol (transcripts/__init__.py): a name, a description,
load, and what detection reads; stream where its lines are its messages."""

from __future__ import annotations

import inspect

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

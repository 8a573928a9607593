"""What the engine consumes: a feed of calls, the raw baseline, and what the recording says.

A feed gives the engine, call by call, the messages since the previous call and the recorded
reply (``calls``); the raw baseline's row of each call (``baseline``, policy-independent); the
recording's metadata (model, system, usage, recorded compactions, warnings, skipped lines:
complete once the calls are exhausted); and ``close()``, which stops a reading that did not run
to the end. Three feeds:

- :class:`LoadedFeed`: a loaded :class:`~compactlab.transcripts.Transcript`; its baseline is
  computed once and kept on the transcript, shared by every run over it (compare, calibration).
- :class:`StreamFeed`: a :class:`~compactlab.transcripts.TranscriptStream` read while it is
  replayed, the baseline built alongside; no message outlives its place in the context.
- :class:`~compactlab.engine.feeds.read_ahead.ReadAheadFeed`: a big plain file read by a second
  process, which sends the messages' facts and the baseline's rows (``read_ahead.py``).

:func:`open_feed` chooses one for a file; :func:`as_feed` wraps a transcript or stream a library
caller made. The formats (``transcripts/``) know nothing of feeds or baselines.
"""

from __future__ import annotations

from ...transcripts import TranscriptStream, load_transcript, open_transcript
from .base import READ_BATCH, Call, Feed, LoadedFeed, StreamFeed, as_feed


def open_feed(path: str, input_format: str | None = None, *, skip_bad_lines: bool = False,
              stream: bool = True, only_read_ahead: bool = False, whole_if_usage: bool = False) -> Feed | None:
    """The feed of one file for one replay: read while it is replayed where its format allows and
    ``stream`` (a big plain Anthropic messages file by the read-ahead process), else loaded.
    ``only_read_ahead``: the read-ahead feed, or None without reading more than the file's head
    (a command opens its first file so, before it builds its policy, to start the reader early).
    ``whole_if_usage``: loaded if the file's first lines record usage (to calibrate on it)."""
    if stream and whole_if_usage and _head_records_usage(path):
        stream = False
    if not stream:
        return None if only_read_ahead else LoadedFeed(load_transcript(path, input_format, skip_bad_lines=skip_bad_lines))
    from . import read_ahead

    if only_read_ahead and not read_ahead.usable(path):
        return None
    source = open_transcript(path, input_format, load=not only_read_ahead, skip_bad_lines=skip_bad_lines)
    if isinstance(source, TranscriptStream) and source.format == "anthropic" and read_ahead.usable(path):
        if (ahead := read_ahead.open_feed(path, skip_bad_lines)) is not None:
            source.close()
            return ahead
    if only_read_ahead:
        if isinstance(source, TranscriptStream):
            source.close()
        return None
    assert source is not None
    return as_feed(source)


def _head_records_usage(path: str) -> bool:
    """Whether the first lines of a line-per-message file record a call's usage."""
    from ...transcripts.reader import is_document, read_head

    if is_document(path):
        return False  # (a document is loaded anyway)
    for o in read_head(path).objects:
        message = o.get("message")
        if isinstance(o.get("usage"), dict) or (isinstance(message, dict) and isinstance(message.get("usage"), dict)):
            return True
    return False


__all__ = ["READ_BATCH", "Call", "Feed", "LoadedFeed", "StreamFeed", "as_feed", "open_feed"]

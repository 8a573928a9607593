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

import os
from functools import cached_property

from ...transcripts import Transcript, load_transcript, open_transcript
from ...transcripts.reader import Head, is_document, read_head
from ..measures import probe_cache
from .base import READ_BATCH, Call, Feed, LoadedFeed, StreamFeed, as_feed


class Opening:
    """How one file is read for one replay, decided here and only here: loaded whole (``stream``
    False, or ``whole_if_usage`` and its first lines record usage, to calibrate on it), read ahead
    by a second process (a big plain Anthropic messages file), or streamed in-process. The file's
    head is parsed once, for all of these decisions and for format detection, and handed to the
    loader."""

    def __init__(self, path: str, input_format: str | None = None, *, skip_bad_lines: bool = False,
                 stream: bool = True, whole_if_usage: bool = False, probes: bool = True,
                 write_cache: bool = True) -> None:
        # (a FolderFile's mark is the caller's: what is read and reported is the plain path)
        self.path, self.input_format, self.skip_bad_lines = str.__str__(path), input_format, skip_bad_lines
        self.stream, self.whole_if_usage = stream, whole_if_usage
        #: look for the hindsight probes (a replay of a policy that never acts cannot lose one;
        #: COMPACTLAB_PROBES=0 skips them for any policy: recall is then not measured)
        self.probes = probes and os.environ.get("COMPACTLAB_PROBES", "") != "0"
        #: store a streamed file's probes in the probe cache once it is read (not in a dry run)
        self.write_cache = write_cache
        self._warnings: list[str] = []
        self._started: Feed | None = None

    @cached_property
    def head(self) -> Head | None:
        """The parsed first lines of a line-per-message file (None: a whole JSON document, or a
        session of a store, read whole)."""
        from ...transcripts.stores import in_store

        return None if in_store(self.path) or is_document(self.path) else read_head(self.path)

    @property
    def streamed(self) -> bool:
        """Whether the file is read while it is replayed."""
        if not self.stream:
            return False
        return not (self.whole_if_usage and self.head is not None and _records_usage(self.head))

    def start(self) -> bool:
        """Start the read-ahead process now if this file is read so (a command opens its first file
        before it builds its policy, so that its reading goes on meanwhile): reads no more than the
        file's head, and nothing at all where read-ahead cannot apply."""
        from . import read_ahead

        if (self._started is None and self.stream and read_ahead.usable(self.path) and self.streamed
                and self.format == "anthropic"):
            self._started = self.feed()
        return self._started is not None

    @cached_property
    def format(self) -> str | None:
        """The format of a line-per-message file, from its head (None for a document): detected
        once, and named to the loader so that it does not detect it again."""
        from ...transcripts import detect_format

        if self.head is None:
            return None
        return self.input_format or detect_format(self.path, self.head)

    def feed(self) -> Feed:
        """The feed: the one started early, or opened now."""
        if self._started is not None:
            feed, self._started = self._started, None
            return feed
        if not self.streamed:
            return self._loaded()
        key = (probe_cache.key_of(self.path, remember=self.write_cache, warnings=self._warnings)
               if self.probes and probe_cache.enabled()
               else None)
        cached = probe_cache.load(key, self._warnings) if key is not None else None
        feed = self._stream(probes=self.probes and cached is None)
        if cached is not None:  # the probes a replay of the same bytes found (a stream's, or a
            # whole document's: a format that reads only whole files is loaded here)
            feed.baseline.probes = cached
            feed.baseline.probes_indexed = True
        elif key is not None and self.write_cache:
            if isinstance(feed, StreamFeed):
                feed.probe_key = key  # (stored once the stream is read to the end)
            elif feed.baseline.probes_indexed:
                probe_cache.save(key, feed.baseline.probes)
        feed.warnings.extend(self._warnings)
        return feed

    def _loaded(self) -> Feed:
        """Loaded whole, its probes read from the cache where a replay of the same bytes stored
        them, else found and stored (``probe_cache.baseline_of``: as a corpus job's files)."""
        transcript = self._load_lazily() or load_transcript(self.path, self.format or self.input_format,
                                                            skip_bad_lines=self.skip_bad_lines, head=self.head)
        if self.probes:
            probe_cache.baseline_of(transcript, write=self.write_cache)
        return LoadedFeed(transcript, self.probes)

    def _load_lazily(self) -> Transcript | None:
        """A big plain Anthropic messages file loaded with its messages left in the file until read
        (``read_ahead.load_lazily``), or a big Claude Code session with its messages left in the
        Anthropic messages file they make (``claude_code_lazily``), where that applies."""
        from . import read_ahead

        if self.format == "claude-code":
            from . import claude_code_lazily

            return claude_code_lazily.load_lazily(self.path, self.skip_bad_lines)
        if self.format != "anthropic":
            return None
        return read_ahead.load_lazily(self.path, self.skip_bad_lines)

    def _stream(self, probes: bool) -> Feed:
        """Read while it is replayed: by the read-ahead process where it applies and has the probes
        to look for, its messages left in the file where it has none (the native core reads their
        facts in this process for less than the reader costs with its pickling), else in-process
        (a format that reads only whole files: loaded)."""
        if not probes and self.format == "anthropic":
            from . import read_ahead

            lazy = read_ahead.stream_lazily(self.path, self.skip_bad_lines)
            if lazy is not None:
                return lazy
        ahead = self._read_ahead(probes)
        if ahead is not None:
            return ahead
        if self.format == "claude-code" and (transcript := self._load_lazily()) is not None:
            return as_feed(transcript, probes)
        source = open_transcript(self.path, self.format or self.input_format, skip_bad_lines=self.skip_bad_lines,
                                 head=self.head)
        assert source is not None
        return as_feed(source, probes)

    def close(self) -> None:
        """Stop a read-ahead started early and never handed on."""
        if self._started is not None:
            self._started.close()
            self._started = None

    def _read_ahead(self, probes: bool) -> StreamFeed | None:
        """The read-ahead feed where it applies (``read_ahead.open_feed``)."""
        from . import read_ahead

        if not read_ahead.usable(self.path) or self.format != "anthropic":
            return None
        return read_ahead.open_feed(self.path, self.skip_bad_lines, probes)


def open_feed(path: str, input_format: str | None = None, *, skip_bad_lines: bool = False,
              stream: bool = True, whole_if_usage: bool = False, probes: bool = True,
              write_cache: bool = True) -> Feed:
    """The feed of one file for one replay (see :class:`Opening`)."""
    return Opening(path, input_format, skip_bad_lines=skip_bad_lines, stream=stream,
                   whole_if_usage=whole_if_usage, probes=probes, write_cache=write_cache).feed()


def _records_usage(head: Head) -> bool:
    """Whether the first lines of a line-per-message file record a call's usage."""
    for o in head.objects:
        message = o.get("message")
        if isinstance(o.get("usage"), dict) or (isinstance(message, dict) and isinstance(message.get("usage"), dict)):
            return True
    return False


__all__ = ["READ_BATCH", "Call", "Feed", "LoadedFeed", "Opening", "StreamFeed", "as_feed", "open_feed"]

"""Replays into their output folders, from the first file opened to the last folder put in place:
what ``compactlab replay`` does, as one library call (``replay_files``).

Each file is read while it is replayed unless a calibration or exact counts need it whole first,
so months of sessions never sit in memory together. Tokens are estimated by the fit to the
recorded usage wherever a transcript records enough of it (``calibrate`` None, the default), by
the policy's estimate with ``calibrate`` False. Each run writes into its own folder
(``reports/<transcript>-<policy>[-<fingerprint>]``, or ``--out``), staged and put in place whole
when the run is over (``outputs.OutputDir``); several transcripts replayed into one ``--out`` are
one run, a folder each inside it. Ctrl-C or SIGTERM keeps the runs that had finished (and their
folders) and says so in the result; any other failure removes what the unfinished run wrote and
is raised. What a user should hear on the way (a warning, a status line) goes to ``notify``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .corpus.calibration import MIN_CALLS, Calibration, by_default, calibrate as fit_calibration, usable_calls
from .engine.prices import ModelPrices, PriceTable, load_prices
from .engine.feeds import Feed, open_feed
from .plumbing.outputs import OutputDir, run_folder_name
from .engine.policy import Policy
from .plumbing.process import collector_off
from .engine.records import Run

#: how a run tells the user something: (the message, whether it is said even with --quiet)
Notify = Callable[[str, bool], None]


def quietly(message: str, always: bool) -> None:
    """A Notify that says nothing."""


@dataclass
class ReplaySettings:
    """Everything about a replay but the files: the policy, where it writes, how it measures and
    prices, and who summarises."""

    policy: Policy
    overridden: bool = False  # --set changed the policy: its default folder name says so
    out_dir: str | None = None
    dry_run: bool = False
    force: bool = False
    write_transcripts: bool = False
    keep_recorded_compactions: bool = False
    chart: bool = False
    calibrate: bool | None = None  # None: wherever the transcript records usage; True: required
    tokens: str = "estimate"  # or "anthropic": exact counts (messages.count_tokens)
    summarizer: str = "stub"
    live: Any = None  # summarizers.LiveOptions for the live summarizer or exact counts
    price_model: str | None = None
    prices: PriceTable = field(default_factory=load_prices)
    cache_ttl: str | None = None  # 5m or 1h; None: the recording's
    input_format: str | None = None
    skip_bad_lines: bool = False

    @property
    def stream(self) -> bool:
        """Whether files are read while they are replayed (a fit or exact counts need them whole)."""
        return self.calibrate is not True and self.tokens != "anthropic"


@dataclass
class Replayed:
    """The runs that finished, of how many files, and the interrupt that stopped the rest."""

    runs: list[Run]
    total: int
    interrupted: KeyboardInterrupt | None = None
    #: the one folder that holds them all (several transcripts into one --out), else None
    folder: str | None = None


def replay_files(files: list[str], settings: ReplaySettings, notify: Notify = quietly,
                 first: Feed | None = None) -> Replayed:
    """Replay each file through ``settings.policy`` into its output folder. ``first``: the first
    file's feed, opened already (a command starts the read-ahead before it builds its policy)."""
    from .engine.turns import replay
    from .reports import write_chart, write_files
    from .summarizers import build_counter, build_summarizer

    s = settings
    done = Replayed([], len(files))
    used: set[str] = set()
    shared = OutputDir(s.out_dir, s.dry_run, s.force) if s.out_dir is not None and len(files) > 1 else None
    try:
        for i, path in enumerate(files):
            feed = first if i == 0 else None
            out = None
            try:
                if feed is None:
                    feed = open_for_replay(path, s, notify)
                price = prices_for([feed], s.price_model, s.prices, notify)[0]
                calibration = calibrations_for([feed], s.calibrate, notify)[0]
                name = run_folder_name(feed.name, s.policy, s.overridden, used)
                if shared is not None:
                    out = shared.sub(name)
                else:
                    out = OutputDir(os.path.join("reports", name) if s.out_dir is None else s.out_dir, s.dry_run,
                                    s.force)
                out.prepare(protect=files)
                counter = build_counter(s.live, feed.system) if s.tokens == "anthropic" else None
                with collector_off():  # a stream is read during the run
                    run = replay(feed, s.policy, out=out, write_transcripts=s.write_transcripts,
                                 keep_recorded_compactions=s.keep_recorded_compactions, calibration=calibration,
                                 prices=price, summarizer=build_summarizer(s.summarizer, s.live), counter=counter,
                                 cache_ttl=s.cache_ttl)
                if feed.streamed:  # read now: its model, bad lines and warnings are known
                    if not isinstance(price, ModelPrices):
                        price_warnings(price, feed, notify)
                    warn_loaded(feed, notify)
                    if s.calibrate is None and usable_calls(feed) >= MIN_CALLS:
                        notify(f"warning: {feed.path}: recorded usage past the file's first lines: not calibrated "
                               "(the file was read as it was replayed); --calibrate fits it", False)
                if run.failed_summaries:
                    notify(f"warning: {feed.path}: {len(run.failed_summaries)} summar(y/ies) failed, at call(s) "
                           + ", ".join(str(f["call"]) for f in run.failed_summaries[:10])
                           + f": {run.failed_summaries[0]['error']}", False)
                write_files(run, out)
                if s.chart and (unchartable := write_chart(run, s.policy, out)):
                    notify(f"warning: {feed.path}: chart.png not drawn: {unchartable}", True)
                if shared is None:
                    out.commit()
            except BaseException:
                if out is not None:
                    out.discard()
                if feed is not None:  # a stream not read to the end: stop its reading (and reader)
                    feed.close()
                raise
            done.runs.append(run)
            del feed
    except KeyboardInterrupt as exc:  # the transcripts replayed so far are kept and reported
        if not done.runs:
            if shared is not None:
                shared.rollback()
            raise
        done.interrupted = exc
    except BaseException:
        if shared is not None:
            shared.rollback()
        raise
    if shared is not None:
        try:
            shared.commit()
        except BaseException:
            shared.rollback()
            raise
        done.folder = shared.path
    return done


def open_for_replay(path: str, settings: ReplaySettings, notify: Notify = quietly) -> Feed:
    """One file's feed: read while it is replayed (its warnings come after the run) where its
    format and the settings allow; else loaded (its warnings now)."""
    with collector_off():
        feed = open_feed(path, settings.input_format, skip_bad_lines=settings.skip_bad_lines, stream=settings.stream,
                         whole_if_usage=settings.calibrate is None)
    assert feed is not None
    if not feed.streamed:
        warn_loaded(feed, notify)
    return feed


def prices_for(sources: list, price_model: str | None, table: PriceTable, notify: Notify = quietly) -> list:
    """Per transcript or feed, what its calls are priced by: the table (each call at the model and
    time it recorded), or with ``--price-model`` that model's prices for every call. A model the
    table does not know is a warning (for a stream, once it has been read: ``price_warnings``)."""
    if price_model is not None:
        out: list[PriceTable | ModelPrices] = [price_warning(table, table.lookup(price_model), notify)] * len(sources)
    else:
        for t in sources:
            if not getattr(t, "streamed", False):
                price_warnings(table, t, notify)
        out = [table] * len(sources)
    cache_warnings(table, notify)  # (those of --price-model's lookup)
    return out


def recorded_models(source: Any) -> list[str]:
    """The models a transcript or feed recorded: its own and its calls'."""
    models = dict.fromkeys([source.model] + [u.get("model") for u in source.usage.values()])
    return [m for m in models if isinstance(m, str) and m and not m.startswith("<")]  # not <synthetic>


def price_warnings(table: PriceTable, source: Any, notify: Notify = quietly) -> None:
    for model in recorded_models(source):
        price_warning(table, table.lookup(model), notify)
    cache_warnings(table, notify)


def cache_warnings(table: PriceTable, notify: Notify = quietly) -> None:
    """The cached prices the lookups so far ignored (each rebuilt), once each."""
    for problem in table.problems():
        notify(f"warning: {problem}", False)


def price_warning(table: PriceTable, prices: ModelPrices, notify: Notify = quietly) -> ModelPrices:
    """An unknown model is a warning even with --quiet (it changes every cost)."""
    if not prices.known:
        notify(f"warning: no prices for model {prices.model!r}: priced as {table.default_model} "
               f"({table.read}); use --price-model or --prices", True)
    return prices


def calibrations_for(sources: list, calibrate: bool | None, notify: Notify = quietly) -> list[Calibration | None]:
    """Per loaded transcript or feed, the calibration its runs use: the fit to its recorded usage
    (``calibrate`` True: required, an error without usage; None: where it records the usage of
    enough calls, else a warning where it records some), or None (the policy's estimate)."""
    out: list[Calibration | None] = []
    for t in sources:
        if calibrate is False or getattr(t, "streamed", False):
            out.append(None)
            continue
        transcript = getattr(t, "transcript", t)  # a loaded feed's
        cal: Calibration | None
        if calibrate:
            cal, why = fit_calibration(transcript), None
        else:
            cal, why = by_default(transcript)
        if why:
            notify(f"warning: {t.path}: {why}", False)
        if cal is not None:
            notify(f"{t.path}: calibrated: {cal.overhead_tokens:,} overhead tokens + chars / {cal.chars_per_token} "
                   f"(mape {cal.mape:.3f} over {cal.calls} calls)", False)
        out.append(cal)
    return out


def warn_loaded(source: Any, notify: Notify = quietly) -> None:
    """The bad lines skipped and the warnings of a transcript or feed."""
    if source.skipped_lines:
        notify(f"warning: {source.path}: skipped {source.skipped_lines} bad line(s)", False)
    for w in source.warnings:
        notify(f"warning: {source.path}: {w}", False)

"""Token calibration from recorded usage (SPEC §5).

Recorded usage gives the true prompt tokens of every call (input + cache writes + cache reads).
The fit ``tokens ≈ overhead + chars / chars_per_token`` is made on the contexts the recording
actually sent: the raw history, restarted at each recorded compaction from its summary (what
``replay -p none --keep-recorded-compactions`` reproduces). ``overhead`` stands for the system
prompt and tool definitions that the transcript does not contain. The fit minimises the squared
relative error (weighted least squares, weights 1/y²), which is what MAPE measures.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..errors import InputError
from ..engine.sizing import Calibration, TokenEstimator
from ..transcripts import Transcript


#: the fewest calls with recorded usage a calibration is fitted on (fewer: the policy's estimate)
MIN_CALLS = 5
#: a fit outside these is no tokenizer's (a broken recording): the policy's estimate is used
MIN_CHARS_PER_TOKEN, MAX_CHARS_PER_TOKEN, MAX_MAPE = 0.5, 20.0, 0.5


def prompt_tokens(usage: dict[str, int]) -> int:
    if "prompt_tokens" in usage:  # OpenAI-style
        return int(usage["prompt_tokens"])
    return int(usage.get("input_tokens", 0) + usage.get("cache_creation_input_tokens", 0)
               + usage.get("cache_read_input_tokens", 0))


def fit(chars: list[int], tokens: list[int]) -> Calibration:
    """Weighted least squares of tokens = a + b * chars, a >= 0, b > 0."""
    pairs = [(x, y) for x, y in zip(chars, tokens) if y > 0]
    if not pairs:
        raise ValueError("no call with recorded prompt tokens")
    if len(pairs) == 1 or len({x for x, _ in pairs}) == 1:
        x, y = pairs[0]
        a, b = 0.0, y / max(x, 1)
    else:
        w = [1 / (y * y) for _, y in pairs]
        sw = sum(w)
        sx = sum(wi * x for wi, (x, _) in zip(w, pairs))
        sy = sum(wi * y for wi, (_, y) in zip(w, pairs))
        sxx = sum(wi * x * x for wi, (x, _) in zip(w, pairs))
        sxy = sum(wi * x * y for wi, (x, y) in zip(w, pairs))
        b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx)
        a = (sy - b * sx) / sw
        if a < 0 or b <= 0:  # fall back to a line through the origin
            a = 0.0
            b = sum(wi * x * y for wi, (x, y) in zip(w, pairs)) / sum(wi * x * x for wi, (x, _) in zip(w, pairs))
    overhead = round(a)
    cpt = 1 / b
    est = TokenEstimator(cpt, overhead)
    mape = sum(abs(est.tokens(x) - y) / y for x, y in pairs) / len(pairs)
    return Calibration(overhead_tokens=overhead, chars_per_token=round(cpt, 4), mape=round(mape, 4), calls=len(pairs))


def sent_chars(transcript: Transcript) -> list[int]:
    """Chars of the context the recording sent at each call (recorded compactions applied): with
    none, the raw baseline's (the whole history at each call, computed once for every run); else
    a replay of no compaction that keeps them."""
    from ..engine.feeds import as_feed
    from ..engine.measures.baseline import baseline_for
    from ..engine.policy import load_policy
    from ..engine.loop import replay

    if not transcript.compactions:  # (the probes not asked for: a run that wants them has them already)
        return list(baseline_for(transcript, probes=False).chars)
    # (its chars only: no probe is looked for, as overview's replay of the recording)
    run = replay(as_feed(transcript, probes=False), load_policy("none"), keep_recorded_compactions=True)
    return [c.chars for c in run.calls]


def recorded_tokens(transcript: Transcript) -> list[int]:
    """Recorded prompt tokens per call (0 where the call has no usage)."""
    return [prompt_tokens(transcript.usage[p]) if p in transcript.usage else 0 for p in transcript.call_positions]


def usable_calls(transcript: Any) -> int:
    """Calls whose recorded usage gives their prompt tokens."""
    return sum(1 for u in transcript.usage.values() if prompt_tokens(u) > 0)


@lru_cache(maxsize=1)
def _priors() -> dict[str, dict[str, Any]]:
    from importlib.resources import files

    from ..plumbing import package_toml

    return package_toml.loads(files("compactlab").joinpath("data/priors.toml").read_text("utf-8"))["formats"]


def prior_for(fmt: str) -> Calibration | None:
    """The token-estimate prior of a format (``data/priors.toml``: one fit of every recorded call
    of the shared recordings of that format, ``scripts/measure_priors.py``), or None."""
    row = _priors().get(fmt)
    if row is None:
        return None
    return Calibration(overhead_tokens=int(row["overhead_tokens"]), chars_per_token=float(row["chars_per_token"]),
                       mape=float(row["mape"]), calls=int(row["calls"]),
                       source=f"prior for {fmt} ({row['calls']} calls of {row['recordings']} shared recordings)")


def short(transcript: Transcript, sent: list[int] | None = None) -> tuple[Calibration | None, str]:
    """For a transcript with fewer than ``MIN_CALLS`` calls with usage (never fitted whole: a fit of
    two parameters to 1 to 4 calls says nothing): its format's prior for the characters a token
    holds (else the policy's 4), with the one thing so few calls do tell, the overhead the
    transcript does not hold (system prompt, tools), fitted to them: the median of each recorded
    call's prompt less its context at the prior's ratio. And what to say of it."""
    n = usable_calls(transcript)
    fmt = transcript.source_format
    prior = prior_for(fmt)
    cpt = prior.chars_per_token if prior is not None else DEFAULT_CHARS_PER_TOKEN
    chars = sent_chars(transcript) if sent is None else sent
    gaps = sorted(y - x / cpt for x, y in zip(chars, recorded_tokens(transcript)) if y > 0)
    overhead = max(0, round((gaps[(len(gaps) - 1) // 2] + gaps[len(gaps) // 2]) / 2)) if gaps else \
        (prior.overhead_tokens if prior is not None else 0)
    est = TokenEstimator(cpt, overhead)
    pairs = [(x, y) for x, y in zip(chars, recorded_tokens(transcript)) if y > 0]
    mape = round(sum(abs(est.tokens(x) - y) / y for x, y in pairs) / len(pairs), 4) if pairs else None
    ratio = f"the {fmt} prior's chars / {cpt}" if prior is not None else f"chars / {cpt} (no prior for {fmt})"
    cal = Calibration(overhead_tokens=overhead, chars_per_token=cpt, mape=mape, calls=len(pairs),
                      source=(f"prior for {fmt} ({prior.calls} calls of shared recordings, mape {prior.mape:.2f})"
                              if prior is not None
                              else f"default ratio (no prior for {fmt})") + f", its overhead fitted to {len(pairs)} call(s)")
    return cal, (f"only {n} call(s) with recorded usage (calibration needs {MIN_CALLS}): tokens by {ratio} and an "
                 f"overhead of {overhead:,} fitted to them (an estimate)")


#: the characters a token holds where a short recording's format has no prior (the policy's default)
DEFAULT_CHARS_PER_TOKEN = 4.0


def by_default(transcript: Transcript, sent: list[int] | None = None) -> tuple[Calibration | None, str | None]:
    """The calibration a run uses unless told otherwise: the fit where the transcript records the
    usage of at least ``MIN_CALLS`` calls; with fewer (one or more), its format's prior; else
    none. And what to say of it (a warning). ``sent``: the chars of the contexts it sent, when
    the caller has them (``sent_chars``)."""
    n = usable_calls(transcript)
    if n == 0:
        return None, None
    if transcript.metadata.get("acompact"):
        return None, "a compaction summarizer's call: not calibrated (calibrate on its main session)"
    if n < MIN_CALLS:
        return short(transcript, sent)
    cal = calibrate(transcript, sent)
    if not (MIN_CHARS_PER_TOKEN <= cal.chars_per_token <= MAX_CHARS_PER_TOKEN) or (cal.mape or 0) > MAX_MAPE:
        return None, (f"the fit to the recorded usage is unusable ({cal.overhead_tokens:,} + chars / "
                      f"{cal.chars_per_token}, mape {cal.mape}): tokens are the policy's estimate")
    return cal, None


def calibrate(transcript: Transcript, sent: list[int] | None = None) -> Calibration:
    """The fit of ``transcript``'s recorded usage to the contexts it sent (``sent``: their chars,
    when the caller has them from ``sent_chars``: a replay spared)."""
    if not transcript.usage:
        raise InputError(f"{transcript.path}: no recorded usage to calibrate on",
                         hint="--calibrate needs a transcript with per-call usage (Claude Code, API responses)")
    if transcript.metadata.get("acompact"):
        raise InputError(f"{transcript.path}: a Claude Code compaction summarizer call is not self-contained; "
                         "calibrate on its main session instead")
    return fit(sent_chars(transcript) if sent is None else sent, recorded_tokens(transcript))


#: the characters a token that real text and JSON take: a fit outside is suspect (#47 §5)
PLAUSIBLE_CHARS_PER_TOKEN = (2.0, 6.0)


def implausible(cal: Calibration) -> str | None:
    """Why a fit's characters a token is not to be trusted, with its likely cause (None: plausible)."""
    lo, hi = PLAUSIBLE_CHARS_PER_TOKEN
    if cal.source != "recorded usage" or lo <= cal.chars_per_token <= hi:
        return None
    cause = ("its recorded usage counts more than the messages it holds (content the recording left out, or usage "
             "summed over calls)") if cal.chars_per_token < lo else (
        "it holds text the model was not sent, or its usage leaves out part of the prompt")
    return (f"the fit to its recorded usage is {cal.chars_per_token} characters a token, outside {lo:g}–{hi:g}: "
            f"{cause}; its token figures are suspect")

"""check: compare replays with a committed baseline, for CI (SPEC §9).

The baseline is JSON with a schema version and one record per (transcript, policy name): the
transcript's content hash, the policy's fingerprint, the token estimate the run used (its
calibration) and the metrics. A changed policy under the same name is what check exists for: it is
compared, and the fingerprint change is shown. A changed transcript is a stale record: never
compared silently (a failure unless allowed). A changed calibration (another fit, or calibrated
where the baseline was not) fails: the metrics were measured with another estimate.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import orjson

from .. import metrics
from ..errors import InputError, UsageError, cannot_write
from ..plain import dataclass
from ..plumbing.files import read_regular
from ..plumbing.outputs import atomic_write_bytes

SCHEMA = 1
#: what a record keeps of a run beside its metrics and their parts (metrics.METRICS, metrics.PARTS)
CONTEXT = ["calls", "peak_tokens", "reactive", "manual", "violations_inherited"]
DEFAULT_TOLERANCE = 0.01


def stored() -> list[str]:
    """What a baseline record keeps of a run: its calls, every metric, the parts they are made of,
    and what else it did (``CONTEXT``)."""
    return list(dict.fromkeys([CONTEXT[0], *metrics.METRICS, *metrics.PARTS, *CONTEXT[1:]]))


def value_of(summary: Mapping[str, Any], key: str) -> Any:
    """A stored value of a run's summary: its own, or a metric it does not hold from its parts as
    the outputs give it (``Metric.shown``)."""
    if key in summary:
        return summary[key]
    return metrics.METRICS[key].shown(summary)


class BaselineError(UsageError):
    """The baseline file is missing or malformed (exit 2)."""


@dataclass
class Change:
    metric: str
    old: float
    new: float

    def __str__(self) -> str:
        fmt = (lambda v: f"{v:,.4f}") if isinstance(self.new, float) else (lambda v: f"{v:,}")
        return f"{self.metric} {fmt(self.old)} → {fmt(self.new)}"


@dataclass
class CheckResult:
    transcript: str  # the baseline key: the path relative to the baseline file's folder
    policy: str
    status: str  # pass | fail | stale | missing
    ok: bool = True  # False fails the check (exit 1)
    failures: list[Change] = field(default_factory=list)
    improvements: list[Change] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    fingerprint: str = ""
    old_fingerprint: str | None = None
    calibration_changed: bool = False
    #: every stored metric as in the baseline (a changed policy that did nothing here says so)
    identical: bool = False
    #: the policy name of the baseline record this was matched to by fingerprint (a renamed
    #: policy file), else None
    renamed_from: str | None = None
    #: the transcript's path as a person reads it (relative to the current folder), for the table
    shown: str = ""

    @property
    def fingerprint_changed(self) -> bool:
        return self.old_fingerprint is not None and self.old_fingerprint != self.fingerprint

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failures"] = [asdict(c) for c in self.failures]
        d["improvements"] = [asdict(c) for c in self.improvements]
        d["fingerprint_changed"] = self.fingerprint_changed
        return d


def parse_tolerances(items: list[str] | tuple[str, ...]) -> dict[str, float]:
    """``0.02`` sets every compared metric; ``cost_usd=0.05`` one of them."""
    tol = dict.fromkeys(metrics.COMPARED, DEFAULT_TOLERANCE)
    for item in items:
        key, sep, value = item.rpartition("=")
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"--tolerance {item!r}: expected a number or METRIC=NUMBER") from None
        if not math.isfinite(number):
            raise UsageError(f"--tolerance {item!r}: must be a finite number")
        if number < 0:
            raise UsageError(f"--tolerance {item!r}: must not be negative")
        if not sep:
            tol = dict.fromkeys(metrics.COMPARED, number)
        elif key in metrics.COMPARED:
            tol[key] = number
        else:
            raise UsageError(f"--tolerance {item!r}: unknown metric {key!r} (known: {', '.join(metrics.COMPARED)})")
    return tol


def transcript_key(path: str, baseline: str) -> str:
    rel = os.path.relpath(os.path.abspath(path), os.path.dirname(os.path.abspath(baseline)))
    return Path(rel).as_posix()


def _number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def records_digest(records: list[Any]) -> str:
    """The SHA-256 of a baseline's records as compactlab writes them (keys sorted): a baseline
    whose records were changed by hand no longer matches the digest written with them."""
    import hashlib

    return hashlib.sha256(orjson.dumps(records, option=orjson.OPT_SORT_KEYS)).hexdigest()


def load_baseline(path: str, notes: list[str] | None = None) -> dict[tuple[str, str], dict]:
    """The records of the baseline at ``path``; a baseline whose records no longer match the digest
    compactlab wrote with them (edited by hand, or tampered with) is said in ``notes``."""
    if not os.path.lexists(path):
        raise BaselineError(f"{path}: no baseline file", hint="run the same command with --update-baseline to "
                                                                "write it from these sessions, then commit it")
    try:
        raw = read_regular(path, "baseline")
    except InputError as exc:
        raise BaselineError(exc.message) from None
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BaselineError(f"{path}: malformed baseline: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("records"), list):
        raise BaselineError(f"{path}: malformed baseline: expected {{\"schema\": {SCHEMA}, \"records\": [...]}}")
    out: dict[tuple[str, str], dict] = {}
    for i, rec in enumerate(doc["records"]):
        ok = (isinstance(rec, dict) and isinstance(rec.get("transcript"), str) and isinstance(rec.get("policy"), str)
              and isinstance(rec.get("metrics"), dict) and all(_number(rec["metrics"].get(k)) for k in metrics.COMPARED))
        if not ok:
            raise BaselineError(f"{path}: malformed baseline: record {i} needs transcript, policy and numeric "
                                f"metrics {', '.join(metrics.COMPARED)}")
        bad = [k for k in stored() if k in rec["metrics"] and not _number(rec["metrics"][k])]
        if bad:
            raise BaselineError(f"{path}: malformed baseline: record {i}: {bad[0]} is not a number")
        if (rec["transcript"], rec["policy"]) in out:
            raise BaselineError(f"{path}: malformed baseline: record {i} repeats {rec['transcript']} × {rec['policy']}")
        out[(rec["transcript"], rec["policy"])] = rec
    if notes is not None and "digest" in doc and doc["digest"] != records_digest(doc["records"]):
        notes.append(f"{path}: its records were changed since compactlab wrote them (they no longer match their "
                     "digest): checked against as they are now; --update-baseline writes it anew")
    return out


def record_for(key: str, summary: dict[str, Any], content_hash: str) -> dict[str, Any]:
    return {"transcript": key, "policy": summary["policy"], "content_hash": content_hash,
            "fingerprint": summary["fingerprint"], "calibration": summary.get("calibration"),
            "metrics": {k: value_of(summary, k) for k in stored()}}


def _estimate(calibration: Any) -> tuple:
    """What of a calibration decides the tokens: the policy's own estimate (a record without one is
    from before calibration was recorded), or the ratio and overhead it gave, whatever the words
    its source is said in (a baseline written before a rewording of them still passes)."""
    if not isinstance(calibration, dict) or calibration.get("source") == "policy":
        return ("policy",)
    return (calibration.get("chars_per_token"), calibration.get("overhead_tokens"))


def describe_calibration(calibration: Any) -> str:
    if not isinstance(calibration, dict) or calibration.get("source") != "recorded usage":
        return "not calibrated"
    return (f"{calibration.get('overhead_tokens', 0):,} + chars / {calibration.get('chars_per_token')} "
            f"(mape {calibration.get('mape')})")


def find_record(records: dict[tuple[str, str], dict], key: str, summary: dict[str, Any]) -> tuple[dict | None, str | None]:
    """The baseline record of (transcript, policy name); where there is none, the transcript's
    record of a policy with the same fingerprint (its file was renamed), and that policy's name."""
    old = records.get((key, summary["policy"]))
    if old is not None:
        return old, None
    for (transcript, policy), record in records.items():
        if transcript == key and record.get("fingerprint") == summary["fingerprint"]:
            return record, policy
    return None, None


def compare_record(key: str, summary: dict[str, Any], content_hash: str, old: dict | None,
                   tolerance: dict[str, float], allow_stale: bool = False) -> CheckResult:
    res = CheckResult(key, summary["policy"], "pass", fingerprint=summary["fingerprint"])
    introduced = summary["violations_introduced"]
    accepted = old["metrics"].get("violations_introduced", 0) if old is not None else 0
    if introduced > accepted:
        res.reasons.append(f"{introduced} introduced violation(s)" + (f" (baseline: {accepted})" if accepted else ""))
    elif introduced:
        # known and accepted when the baseline was written (e.g. seed 000's manual-compaction orphan)
        res.reasons.append(f"{introduced} introduced violation(s), as in the baseline")
    new_violations = introduced > accepted
    if old is None:
        res.status, res.ok = "missing", False
        res.reasons.append("not in the baseline (add it with --update-baseline)")
        return res
    res.old_fingerprint = old.get("fingerprint")
    if old.get("content_hash") != content_hash:
        res.status = "stale"
        res.reasons.append("the transcript changed since the baseline was made: not compared"
                           + ("" if allow_stale else " (--allow-stale to accept)"))
        res.ok = allow_stale and not new_violations
        return res
    if _estimate(old.get("calibration")) != _estimate(summary.get("calibration")):
        res.calibration_changed = True
        res.reasons.append(f"calibration changed: {describe_calibration(old.get('calibration'))} → "
                           f"{describe_calibration(summary.get('calibration'))} (--update-baseline to accept it)")
    m = old["metrics"]
    if summary["overflows"] > m.get("overflows", 0):
        res.failures.append(Change("overflows", m.get("overflows", 0), summary["overflows"]))
    for metric, (kind, worse) in metrics.COMPARED.items():
        before, now = m[metric], value_of(summary, metric)
        delta = (now - before) if worse == "up" else (before - now)  # > 0: worse
        scale = abs(before) if kind == "relative" else 1.0
        limit = tolerance[metric] * scale
        if delta > limit + 1e-12:
            res.failures.append(Change(metric, before, now))
        elif delta < -1e-12:
            res.improvements.append(Change(metric, before, now))
    if res.failures or new_violations or res.calibration_changed:
        res.status, res.ok = "fail", False
    res.identical = all(value_of(summary, key) == m[key] for key in stored() if key in m)
    return res


def write_baseline(path: str, records: list[dict[str, Any]]) -> None:
    """Merge ``records`` into the baseline at ``path`` (created if absent), atomically. A baseline
    that cannot be read whole is an error and is left as it is: its other records are never
    dropped. A symlink is followed: the file it points to is updated."""
    existing: dict[tuple[str, str], dict] = {}
    if os.path.lexists(path):
        try:
            existing = load_baseline(path)
        except BaselineError as exc:
            raise BaselineError(f"{exc.message}; not updated",
                                hint="fix the file (a merge conflict?) or remove it to start a new baseline") from None
        path = os.path.realpath(path)
    for rec in records:
        existing[(rec["transcript"], rec["policy"])] = rec
    records = [existing[k] for k in sorted(existing)]
    doc = {"schema": SCHEMA, "digest": records_digest(records), "records": records}
    try:
        atomic_write_bytes(Path(path), orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    except OSError as exc:
        raise cannot_write(f"{path}: cannot write baseline", exc) from None

"""Measure the token-estimate priors of short recordings (#29 §4) from ../shared/transcripts.

For each format, every recorded call's prompt tokens over all the shared recordings of that
format (a compaction summarizer's call excepted) are fitted at once, as one calibration fits one
transcript's: tokens = overhead + chars / chars_per_token (weighted least squares). Prints the
table that compactlab/data/priors.toml holds. Usage: python scripts/measure_priors.py [SHARED]
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from pathlib import Path

from compactlab import load_transcript
from compactlab.corpus.calibration import fit, recorded_tokens, sent_chars

root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared") / "transcripts"
pooled: dict[str, tuple[list[int], list[int], list[str]]] = defaultdict(lambda: ([], [], []))
for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json", ".traj")):
    try:
        t = load_transcript(str(path))
    except Exception:
        continue  # not a transcript compactlab reads (a truth file, a README)
    if not t.usage or t.metadata.get("acompact"):
        continue
    chars, tokens, names = pooled[t.format]
    chars += sent_chars(t)
    tokens += recorded_tokens(t)
    names.append(os.path.relpath(path, root))
for fmt, (chars, tokens, names) in sorted(pooled.items()):
    cal = fit(chars, tokens)
    print(f'[formats.{fmt}]\noverhead_tokens = {cal.overhead_tokens}\nchars_per_token = {cal.chars_per_token}\n'
          f'mape = {cal.mape}\ncalls = {cal.calls}\nrecordings = {len(names)}\n')

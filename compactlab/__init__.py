"""compactlab: replay recorded agent transcripts through context-compaction policies.

Library first: everything the CLI does is a plain call.

    >>> from compactlab import load_transcript, load_policy, replay
    >>> run = replay(load_transcript("session.jsonl"), load_policy("s08"))
    >>> run.summary.reduction
"""

from .errors import CompactlabError, InputError, PolicyError, UsageError
from .policy import Policy, load_policy, preset_names
from .records import Run, RunSummary, TurnRecord
from .replay import replay
from .sizing import TokenEstimator
from .summarizers import StubSummarizer
from .transcripts import Transcript, load_transcript

__version__ = "0.1.0"

__all__ = [
    "CompactlabError",
    "InputError",
    "Policy",
    "PolicyError",
    "Run",
    "RunSummary",
    "StubSummarizer",
    "TokenEstimator",
    "Transcript",
    "TurnRecord",
    "UsageError",
    "__version__",
    "load_policy",
    "load_transcript",
    "preset_names",
    "replay",
]

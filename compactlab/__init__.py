"""compactlab: replay recorded agent transcripts through context-compaction policies.

Library first: everything the CLI does is a plain call.

    >>> from compactlab import load_transcript, load_policy, replay
    >>> run = replay(load_transcript("session.jsonl"), load_policy("s08"))
    >>> run.summary.reduction
"""

from importlib import import_module as _import_module  # (importlib is there already: nothing to load)

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first use: a CLI start stays fast)
_EXPORTS = {
    "CompactlabError": "errors",
    "InputError": "errors",
    "PolicyError": "errors",
    "UsageError": "errors",
    "Policy": "engine.policy",
    "load_policy": "engine.policy",
    "build_policy": "engine.policy",
    "preset_names": "engine.policy",
    "Run": "engine.records",
    "RunSummary": "engine.records",
    "TurnRecord": "engine.records",
    "replay": "jobs.replay",
    "ReplayOptions": "engine.loop",
    "ReplayOutput": "engine.loop",
    "TokenEstimator": "engine.sizing",
    "StubSummarizer": "summarizers",
    "Transcript": "transcripts",
    "TranscriptStream": "transcripts",
    "load_transcript": "transcripts",
    "open_transcript": "transcripts",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        value = getattr(_import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'compactlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

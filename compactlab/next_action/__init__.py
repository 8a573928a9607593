"""Next-action agreement (issue #30): would the agent still have acted the same on the compacted
context? A sampled, paired, cached check with a live model.

For each policy, calls where its context differs from no compaction's are sampled
(``sampling``); for each, a model is asked twice (``requests``, ``models``): on the context the
policy sent, and on the context the agent saw (the control: no policy, the compactions the
recording made replayed), both with the recorded system prompt and the tools known at that call.
Each reply's first action is compared with the action the agent recorded next (``actions``). Agreement on the policy's context, on the control, and their paired difference with
an interval (``stats``) say how much of the agent's behaviour the policy kept; the control says how
much of the recorded behaviour the model reproduces at all (a different model, or the same one at
another time, acts differently on the very same context).

``plan.py`` replays and samples and prices the requests before anything is sent, and ``ask`` sends
what the cache does not answer; ``tally.py`` makes the per-policy figures.
"""

from __future__ import annotations

from .plan import Plan, Sample, StratumFacts, ask, plan
from .tally import TEMPERATURE, Agreement, PolicyAgreement, at_chance, tally

__all__ = ["Agreement", "Plan", "PolicyAgreement", "Sample", "StratumFacts", "TEMPERATURE", "ask", "at_chance",
           "plan", "tally"]

"""Cost in its own room (#44 §4): what a call costs and how it is known.

- ``prices.py``: the price table (a user's ``prices.toml`` and ``--prices``, the corrections,
  genai-prices), a model's prices at a time, its provider's stand-in, its context window;
- ``cache_rules.py``: each provider's prompt cache (what a call reads, in what steps, how long);
- ``pricing.py``: the cache-aware cost model, a run priced call by call, the recorded cost.
"""

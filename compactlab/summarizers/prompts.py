"""Summary prompts, by name. The seeds' texts are kept verbatim."""

from __future__ import annotations

PROMPTS: dict[str, str] = {
    # seed 000 (s08) summarize_history
    "s08": (
        "Summarize this coding-agent conversation so work can continue.\n"
        "Preserve: 1. current goal, 2. key findings/decisions, 3. files read/changed, "
        "4. remaining work, 5. user constraints.\nBe compact but concrete.\n\n"
    ),
    # seed 002 (s06) auto_compact; the seed elides the rest of this sentence
    "s06": "Summarize this conversation for continuity...",
    # seed 003 (s06-article) SUMMARY_SYSTEM
    "s06-article": (
        "Summarize this conversation for continuity. Include: "
        "1) What was accomplished, 2) Current state, 3) Key decisions made. "
        "Be concise but preserve critical details."
    ),
}

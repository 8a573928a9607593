"""Where a harness auto-compacts on a model's window, by its version: the rules a harness's preset
compacts by on each of that harness's own recordings, on the recording's window (``summary.trigger_rule``),
and that ``inspect --compactions`` holds the recorded compactions to (``audit.py``). One definition
for both, so a replay of a harness's preset and the audit of the same session name one trigger.

- ``claude-code``: the window less a reserve for the reply (20,000 tokens on 2.1.x; 32,000 on 2.0.x
  and 1.x, an estimate: a 2.0.76 session compacted at 155,979) less a 13,000-token buffer: 167,000 of
  200,000, 967,000 of the 1M-context window's 1,000,000. ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (or
  ``autoCompactWindow``) sets the window it is taken of, where under the model's (Claude Code
  clamps it to the model's: 367,000 of a 400,000 setting on a 1M model, still 167,000 on 200,000).
- ``qwen-code``: 70% of the window (``contextPercentageThreshold``'s default) up to 0.16; from 0.17
  on, max(70% of it, it less 33,000) (QwenLM/qwen-code#4345: "feat(core)!: redesign auto-compaction
  thresholds with three-tier ladder", merged 2026-05; 0.17.1's ``/context`` shows it,
  QwenLM/qwen-code#4945; a breaking change, so 0.17.0 is taken to have it too).
- ``goose``: 80% of the window (``GOOSE_AUTO_COMPACT_THRESHOLD``'s default).
- ``pi``: the window less ``compaction.reserveTokens`` (16,384 by default, DEFAULT_COMPACTION_SETTINGS;
  shouldCompact: the context past it): 183,616 of 200,000.
- ``codex``: 90% of the model's context window (codex-rs ``auto_compact_token_limit``: context_window
  x 9 / 10), or ``model_auto_compact_token_limit`` where lower (the lesser of the two). A rollout
  records the window as Codex lets a prompt fill it, 95% of the model's (``model_context_window``:
  context_window x ``effective_context_window_percent`` / 100), so the model's is taken back from
  it: 272,000 of a recorded 258,400, whose limit is 244,800.
- ``opencode``: the window less the reply's reserve, min(the model's max output, 32,000: its
  OUTPUT_TOKEN_MAX; taken as 32,000), less ``compaction.reserved`` (none by default here: the
  source has subtracted one only since session/overflow.ts, min(20,000, max output)): 168,000 of
  200,000. (Where models.dev gives a model an input limit, OpenCode takes that instead: not read here.)

The settings that move these (``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``, ``contextPercentageThreshold``,
...) are read where the harnesses' settings are (``corpus/harness_settings.py``); these are the
defaults.
"""

from __future__ import annotations

from functools import lru_cache

#: the harnesses whose own trigger a preset may follow (``summary.trigger_rule``), each with the format
#: of its own recordings: the rule is taken of the window of those, by their version (another's
#: window is not the one that harness would run on: ``PRESET_WINDOW`` stands for it)
RECORDED_BY = {"claude-code": "claude-code", "qwen-code": "qwen", "goose": "goose", "pi": "pi", "opencode": "opencode",
               "codex": "codex"}
RULES = tuple(RECORDED_BY)
TITLES = {"claude-code": "Claude Code", "qwen-code": "Qwen Code", "goose": "goose", "pi": "Pi", "opencode": "OpenCode",
          "codex": "Codex CLI"}
#: the window each rule is taken of where the recording is not its harness's own (another harness's
#: window is not the one it would run on): the one its preset's figures are written for (Codex's:
#: ``preset_window``)
PRESET_WINDOW = 200_000
#: Codex CLI: the share of the model's window a prompt may fill (``effective_context_window_percent``),
#: the share of it its limit is, and the window its rollouts record of the gpt-5.x-codex models' 272,000
CODEX_EFFECTIVE, CODEX_LIMIT_SHARE, CODEX_RECORDED = 95, (9, 10), 258_400
#: the setting that caps each rule's trigger (``summary.trigger_cap``: the lesser of it and the rule's)
CAP_SETTINGS = {"codex": "model_auto_compact_token_limit"}
#: the setting that sets the window each rule is taken of, where under the model's
#: (``summary.trigger_window``)
WINDOW_SETTINGS = {"claude-code": "CLAUDE_CODE_AUTO_COMPACT_WINDOW"}
#: the setting that sets each rule's share of the window (``summary.trigger_share``)
SHARE_SETTINGS = {"claude-code": "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
                  "qwen-code": "model.chatCompression.contextPercentageThreshold",
                  "goose": "GOOSE_AUTO_COMPACT_THRESHOLD"}
#: the setting that sets each rule's reserve, tokens the window is left short by
#: (``summary.trigger_reserve``), and its default
RESERVE_SETTINGS = {"pi": ("compaction.reserveTokens", 16_384), "opencode": ("compaction.reserved", 0)}
#: OpenCode's reserve for the reply (OUTPUT_TOKEN_MAX: the model's max output where less, not read here)
OPENCODE_OUTPUT = 32_000

#: Claude Code's reserve for the reply, by version (the first whose prefix matches), and its buffer
CLAUDE_RESERVE = (("2.0.", 32_000, "2.0.x (estimate: a 2.0.76 session compacted at 155,979)"),
                  ("1.", 32_000, "1.x (as 2.0.x: an estimate)"),
                  ("", 20_000, "2.1.x"))
CLAUDE_BUFFER = 13_000
#: goose's threshold and Qwen Code's (to 0.16) are shares of the model's window, by default these
GOOSE_DEFAULT, QWEN_CODE_DEFAULT = 0.8, 0.7
#: the first Qwen Code version that compacts at max(70% of the window, the window less 33,000
#: tokens: its 20,000-token summary reserve and a 13,000 buffer)
QWEN_CODE_LADDER_SINCE = (0, 17)
QWEN_CODE_RESERVE = 33_000
#: the failed compressions in a row after which Qwen Code 0.17 and later stop trying (0.16: one)
QWEN_CODE_LADDER_FAILURES = 3


def version_parts(version: str | None) -> tuple[int, ...] | None:
    """A harness's version as numbers (``"0.17.1"``, ``"v0.17.0-preview.2"``: its leading dotted
    numbers), or None where it has none."""
    if not isinstance(version, str):
        return None
    parts = []
    for piece in version.strip().removeprefix("v").split("."):
        digits = piece[:len(piece) - len(piece.lstrip("0123456789"))]
        if not digits:
            break
        parts.append(int(digits))
        if len(digits) < len(piece):
            break
    return tuple(parts) if len(parts) >= 2 else None


def qwen_code_ladder(version: str | None) -> bool:
    """Whether Qwen Code ``version`` compacts by the rule of 0.17 and later (``QWEN_CODE_LADDER_SINCE``)."""
    parts = version_parts(version)
    return parts is not None and parts[:2] >= QWEN_CODE_LADDER_SINCE


def qwen_code_ladder_trigger(window: int) -> int:
    """Where Qwen Code 0.17 and later auto-compact on a ``window``-token model: max(70% of it, it
    less 33,000) (the proportional branch, as 0.16's 70%, for a window under 110,000)."""
    return max(round(window * QWEN_CODE_DEFAULT), window - QWEN_CODE_RESERVE)


def claude_code_reserve(version: str | None) -> tuple[int, str]:
    """Claude Code ``version``'s reserve for the reply, and the versions it is said of."""
    return next((r, w) for prefix, r, w in CLAUDE_RESERVE if (version or "").startswith(prefix))


def preset_window(rule: str) -> int:
    """The window harness ``rule`` is taken of on a recording not its harness's own: ``PRESET_WINDOW``;
    Codex's, the 258,400 its rollouts record of its preset's models."""
    return CODEX_RECORDED if rule == "codex" else PRESET_WINDOW


def codex_limit(window: int) -> tuple[int, int]:
    """Codex CLI's default auto-compact limit where its rollout records ``window`` (the 95% of the
    model's context window a prompt may fill), and that context window: the smallest whose 95% is
    ``window`` (Codex cuts it to a token), 9/10 of it (codex-rs: ``context_window * 9 / 10``)."""
    context = -(-window * 100 // CODEX_EFFECTIVE)
    num, den = CODEX_LIMIT_SHARE
    return context * num // den, context


def harness_failures(rule: str, version: str | None) -> int | None:
    """The failed compressions in a row after which harness ``rule``, at ``version``, stops trying,
    where its version sets it (Qwen Code 0.17 and later: 3); None: the policy's ``max_failures``."""
    return QWEN_CODE_LADDER_FAILURES if rule == "qwen-code" and qwen_code_ladder(version) else None


def claude_code_lowered(window: int, share: float) -> int:
    """``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE``'s trigger on a ``window``-token model (``share``: the
    percentage / 100): its percentage of the window, cut to a token (as 83% of 200,000 is 166,000)."""
    return int(window * round(share * 100, 6) / 100)


def harness_trigger(rule: str, version: str | None, window: int, share: float = 0.0,
                    reserve: int = 0, cap: int = 0, window_set: int = 0) -> tuple[int, str]:
    """Where harness ``rule`` (``RULES``), at ``version`` (None: not recorded), auto-compacts on a
    ``window``-token model, and why in words (the version's rule, with its figures): by default, or
    with its setting's ``share`` of the window (``SHARE_SETTINGS``; 0: not set) or ``reserve``
    (``RESERVE_SETTINGS``, Pi's and OpenCode's; 0: not set) or ``cap`` (``CAP_SETTINGS``, Codex's
    limit, which only lowers its 90%; 0: not set); ``window_set``: the window a setting gives
    (``WINDOW_SETTINGS``, Claude Code's; 0: not set), taken where under ``window``. Claude Code's
    share only lowers its default (a higher one it ignores); goose's and Qwen Code's (to 0.16)
    replace theirs; Qwen Code 0.17 and later ignore theirs."""
    if rule in RESERVE_SETTINGS:
        return _reserved(rule, window, reserve)
    if rule == "claude-code":
        set_by = ""
        if window_set and window_set < window:
            window, set_by = window_set, f" (the window from {WINDOW_SETTINGS[rule]}, under the model's {window:,})"
        reserve, which = claude_code_reserve(version)
        at = window - reserve - CLAUDE_BUFFER
        words = f"{which}'s default: {window:,} - {reserve:,} - {CLAUDE_BUFFER:,} = {at:,}{set_by}"
        if share:
            pct, lowered = round(share * 100, 6), claude_code_lowered(window, share)
            if lowered < at:
                return lowered, f"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct:g}: {pct:g}% of {window:,} = {lowered:,}"
            words += f"; CLAUDE_AUTOCOMPACT_PCT_OVERRIDE={pct:g} would raise it, which Claude Code ignores"
        return at, words
    if rule == "qwen-code":
        if qwen_code_ladder(version):
            at = qwen_code_ladder_trigger(window)
            return at, (f"Qwen Code {version}'s rule: max(70% of {window:,}, {window:,} less {QWEN_CODE_RESERVE:,}) "
                        f"= {at:,} (QwenLM/qwen-code#4345)" + (f"; contextPercentageThreshold {share:g} is ignored by "
                                                               "it" if share else ""))
        return _share(rule, window, share, QWEN_CODE_DEFAULT)
    if rule == "goose":
        return _share(rule, window, share, GOOSE_DEFAULT)
    if rule == "codex":
        return _codex(window, cap)
    raise ValueError(f"no trigger rule {rule!r} (one of {', '.join(RULES)})")


@lru_cache(maxsize=256)
def trigger_at(rule: str, version: str | None, window: int, share: float = 0.0, reserve: int = 0, cap: int = 0,
               window_set: int = 0) -> int:
    """``harness_trigger``'s figure alone, remembered: a run's summary asks its trigger at every call
    (its words, and five Python calls, at each were 24,000 instructions a call)."""
    return harness_trigger(rule, version, window, share, reserve, cap, window_set)[0]


def _codex(window: int, cap: int) -> tuple[int, str]:
    """Codex's: 90% of the model's window, taken back from the ``window`` its rollout records, or
    ``cap`` (``model_auto_compact_token_limit``; 0: not set) where lower."""
    at, context = codex_limit(window)
    words = (f"Codex's default: 90% of the model's {context:,} (the {window:,} a rollout records is the "
             f"{CODEX_EFFECTIVE}% of it a prompt may fill) = {at:,}")
    if not cap:
        return at, words
    if cap < at:
        return cap, f"model_auto_compact_token_limit={cap:,} (under {words})"
    return at, f"{words}; model_auto_compact_token_limit={cap:,} is over it, which Codex lowers to it"


def _reserved(rule: str, window: int, reserve: int) -> tuple[int, str]:
    """Pi's and OpenCode's: the window less the setting's reserve (``reserve``; 0: its default), and
    OpenCode's less its reply's too."""
    setting, default = RESERVE_SETTINGS[rule]
    kept = reserve or default
    said = f"{setting} {kept:,}" if reserve else f"{TITLES[rule]}'s default {setting} {kept:,}"
    if rule == "pi":
        at, words = window - kept, f"{window:,} - {kept:,} ({said})"
    elif kept:
        at = window - OPENCODE_OUTPUT - kept
        words = f"{window:,} - {OPENCODE_OUTPUT:,} (the reply's reserve) - {kept:,} ({said})"
    else:
        at = window - OPENCODE_OUTPUT
        words = f"{window:,} - {OPENCODE_OUTPUT:,} (the reply's reserve; no compaction.reserved)"
    if at < 0:  # (a reserve of the whole window: past it at every check, as the harness compacts then)
        return 0, f"{words} is under 0: 0, every check"
    return at, f"{words} = {at:,}"


def _share(rule: str, window: int, share: float, default: float) -> tuple[int, str]:
    at = round(window * (share or default))
    if share:
        return at, f"{SHARE_SETTINGS[rule]} {share:g}: {share:g} of {window:,} = {at:,}"
    return at, f"{rule}'s default: {default:g} of {window:,} = {at:,}"

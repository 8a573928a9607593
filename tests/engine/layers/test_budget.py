from __future__ import annotations

from compactlab.engine.layers import RunEnv, budget
from compactlab.plumbing.outputs import OutputDir
from compactlab.engine.policy import BudgetConfig
from compactlab.summarizers import StubSummarizer
from helpers import asst, context, results, tr, tu, user


def batch(sizes: list[int]) -> list[dict]:
    ids = [f"id{i}" for i in range(len(sizes))]
    return [user("go"), asst(*[tu(t, "read_file") for t in ids]),
            results(*[tr(t, chr(97 + i) * s) for i, (t, s) in enumerate(zip(ids, sizes))])]


def test_under_budget_is_untouched():
    ctx = context(batch([100_000, 100_000]))
    out, stats = budget(ctx, BudgetConfig(), RunEnv(summarizer=StubSummarizer()))
    assert out is ctx and stats.persisted == 0


def test_largest_first_until_under_budget(tmp_path):
    env = RunEnv(summarizer=StubSummarizer(), out=OutputDir(tmp_path))
    ctx = context(batch([60_000, 90_000, 70_000, 20_000]))  # 240,000
    out, stats = budget(ctx, BudgetConfig(), env)
    env.out.commit()
    assert stats.persisted == 1 and stats.persisted_chars == 90_000  # 240k - 90k + note < 200k
    block = out.messages[-1]["content"][1]
    assert block["content"].startswith("<persisted-output>\nFull output: tool-results/id1.txt\nPreview:\n" + "b" * 2000)
    assert (tmp_path / "tool-results" / "id1.txt").read_text() == "b" * 90_000
    assert env.ledger.persisted_files == [{"path": "tool-results/id1.txt", "chars": 90_000}]
    assert out.chars < ctx.chars and stats.lowest_changed == 2


def test_small_results_are_not_persisted_even_over_budget():
    ctx = context(batch([29_000] * 8))  # 232,000 but each under the 30,000 threshold
    out, stats = budget(ctx, BudgetConfig(), RunEnv(summarizer=StubSummarizer()))
    assert out is ctx and stats.persisted == 0


def test_only_the_last_message_counts():
    msgs = batch([150_000, 150_000]) + [asst("done"), user("next")]
    ctx = context(msgs)
    out, stats = budget(ctx, BudgetConfig(), RunEnv(summarizer=StubSummarizer()))
    assert out is ctx


def test_list_form_content_is_persisted_as_joined_text(tmp_path):
    msgs = [user("go"), asst(tu("L", "bash")),
            results(tr("L", [{"type": "text", "text": "p" * 120_000}, {"type": "text", "text": "q" * 100_000}]))]
    env = RunEnv(summarizer=StubSummarizer(), out=OutputDir(tmp_path))
    out, stats = budget(context(msgs), BudgetConfig(), env)
    env.out.commit()
    assert stats.persisted == 1
    assert (tmp_path / "tool-results" / "L.txt").read_text() == "p" * 120_000 + "\n" + "q" * 100_000


def test_a_result_whose_note_would_not_be_smaller_is_kept_exactly_at_the_edge(tmp_path):
    """The note (its text, the preview, room for the path) must be smaller than the result it
    replaces: at ``size == note + preview + MAX_PATH`` the result stays, one character more and it
    is persisted (budget.py's edge, met deterministically rather than by Hypothesis's luck)."""
    from compactlab.engine.layers.budget import MAX_PATH, NOTE

    config = BudgetConfig(max_chars=1, persist_threshold=100, preview_chars=50)
    edge = len(NOTE) + 50 + MAX_PATH  # (the preview: the first 50 characters of a one-line result)
    for size, persisted in ((edge - 1, 0), (edge, 0), (edge + 1, 1)):
        env = RunEnv(summarizer=StubSummarizer(), out=OutputDir(tmp_path / str(size)))
        ctx = context(batch([size]))
        out, stats = budget(ctx, config, env)
        assert stats.persisted == persisted, size
        assert (out is ctx) == (not persisted) and (not persisted or out.chars < ctx.chars)

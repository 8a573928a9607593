"""Where prices come from: genai-prices (offline), the corrections over it, a user's --prices file
over both; prices by the call's date and long-context tiers."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from compactlab.errors import UsageError
from compactlab.engine.cost.prices import GenaiPrices, PriceTable, TomlPrices, _package_file, load_prices
from helpers import SAMPLES


def at(iso: str) -> float:
    return datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp()


def test_anthropic_models_come_from_genai_prices_with_their_1_hour_writes():
    table = load_prices()
    assert "genai-prices" in table.read
    opus = table.lookup("claude-opus-4-6")
    assert opus.known and "genai-prices" in opus.read
    assert (opus.input, opus.output, opus.cache_write_5m, opus.cache_write_1h, opus.cache_read) == \
        pytest.approx((5.0, 25.0, 6.25, 10.0, 0.5))
    haiku = table.lookup("claude-haiku-4-5-20251001")  # a dated name
    assert (haiku.input, haiku.cache_write_1h) == pytest.approx((1.0, 2.0))


def test_a_call_over_a_long_context_tier_is_billed_wholly_at_the_tier():
    sonnet = load_prices().lookup("claude-sonnet-4-5")
    assert sonnet.tiers and sonnet.tiers[0][0] == 200_000
    assert sonnet.input_cost(0, 200_000) == pytest.approx(200_000 * 3.75 / 1e6)
    assert sonnet.input_cost(0, 200_001) == pytest.approx(200_001 * sonnet.tiers[0][1].cache_write_5m / 1e6)
    assert sonnet.tiers[0][1].cache_write_5m > sonnet.cache_write_5m
    # a run's summary calls are tiered by their mean size, not by their total
    assert sonnet.summary_cost(300_000, 0, calls=3) == pytest.approx(300_000 * 3.0 / 1e6)


def test_deepseek_is_priced_at_what_deepseek_billed_on_the_calls_date():
    table = load_prices()
    v32 = table.lookup("deepseek-chat", at("2026-04-10T12:00:00"))
    assert (v32.input, v32.cache_read, v32.output) == pytest.approx((0.28, 0.028, 0.42))
    assert "corrections" in v32.read
    assert table.lookup("deepseek/deepseek-chat", at("2026-04-10T12:00:00")).input == pytest.approx(0.28)  # litellm name
    assert table.lookup("deepseek-reasoner", at("2026-04-10T12:00:00")).output == pytest.approx(0.42)
    v31 = table.lookup("deepseek-chat", at("2025-09-10T12:00:00"))
    assert (v31.input, v31.output) == pytest.approx((0.56, 1.68))
    before = table.lookup("deepseek-chat", at("2025-06-01T12:00:00"))  # genai-prices' own, with off-peak
    assert "genai-prices" in before.read and before.input == pytest.approx(0.27)
    assert table.lookup("deepseek-chat", at("2025-06-01T20:00:00")).input < before.input


def test_an_unknown_model_is_priced_by_its_provider_never_by_another(cli):
    """(#43 §5) A model the price data lacks gets its provider's stand-in, marked an estimate (an
    OpenAI or Gemini model never Anthropic's prices and cache-write premium); a model of no
    provider known here is unpriced, and said so."""
    table = load_prices()
    for model, stand_in in (("gpt-9-turbo", "gpt-5"), ("azure/gpt-9", "gpt-5"), ("gemini-9-ultra", "gemini-2.5-pro"),
                            ("together_ai/deepseek-ai/DeepSeek-V9", "deepseek-chat"),
                            ("claude-opus-9", "claude-sonnet-4-5")):
        unknown, known = table.lookup(model), table.lookup(stand_in)
        assert not unknown.known and unknown.priced_as == stand_in and unknown.model == model, model
        assert (unknown.input, unknown.cache_write_5m, unknown.cache_read) == (known.input, known.cache_write_5m,
                                                                              known.cache_read), model
    assert table.lookup("gpt-9-turbo").cache_write_5m == table.lookup("gpt-9-turbo").input  # (no write premium)
    unpriced = table.lookup("my-local-llama")
    assert not unpriced.known and unpriced.priced_as == "" and unpriced.input == unpriced.output == 0.0
    # (each run says which of the three its costs rest on: summary.json's priced_by, replay's "priced by")
    read = table.lookup("claude-sonnet-4-5").read
    assert table.lookup("claude-sonnet-4-5").priced_by() == f"claude-sonnet-4-5's in {read}"
    assert table.lookup("gpt-9-turbo").priced_by() == (f"gpt-5's in {table.lookup('gpt-5').read}, standing in for "
                                                       "gpt-9-turbo, which no table knows (an estimate)")
    assert unpriced.priced_by() == "none: no table knows my-local-llama nor its provider (every cost 0)"
    for model, said in (("gpt-9-turbo", "gpt-5's in"), ("claude-sonnet-4-5", "claude-sonnet-4-5's in")):
        r = cli("replay", SAMPLES / "synth-small.jsonl", "--price-model", model, "--dry-run")
        assert r.exit_code == 0, r.output
        row = next(line for line in r.stdout.splitlines() if line.startswith("priced by"))
        assert said in row and ("an estimate" in row) == (model == "gpt-9-turbo"), row


def test_a_prices_file_goes_in_front_and_may_date_its_rows(tmp_path):
    own = tmp_path / "prices.toml"
    own.write_text('read = "2026-01-01"\ndefault_model = "house"\n'
                   '[models."house"]\ninput = 1.0\noutput = 2.0\n'
                   '[[models."claude-opus-4-6"]]\ninput = 4.0\noutput = 20.0\n'
                   '[[models."claude-opus-4-6"]]\nsince = 2026-06-01\ninput = 2.0\noutput = 10.0\n')
    table = load_prices(str(own))
    assert table.default_model == "house" and str(own) in table.read and "genai-prices" in table.read
    assert table.lookup("claude-opus-4-6", at("2026-03-01T00:00:00")).input == 4.0
    late = table.lookup("claude-opus-4-6", at("2026-07-01T00:00:00"))
    assert (late.input, late.cache_write_5m, late.cache_write_1h, late.cache_read) == pytest.approx((2.0, 2.5, 4.0, 0.2))
    assert table.lookup("claude-haiku-4-5").input == pytest.approx(1.0)  # still found below it
    assert table.lookup("nobody-knows").input == 1.0  # the file's default model


@pytest.mark.parametrize("text,message", [
    ('[models."m"]\ninput = "cheap"\noutput = 1.0\n', "models.m.input = cheap: must be a price"),
    # (#56 §6) every price read is checked: a negative, NaN or infinite one made every cost null
    ('[models."m"]\ninput = 1.0\noutput = 1.0\ncache_read = -100\n', "models.m.cache_read = -100: must be a price"),
    ('[models."m"]\ninput = 1.0\noutput = 1.0\ncache_write_5m = nan\n', "models.m.cache_write_5m = nan: must be"),
    ('[models."m"]\ninput = 1.0\noutput = inf\n', "models.m.output = inf: must be a price"),
    ('[models."m"]\ninput = 1.0\noutput = 1.0\nsince = "soon"\n', "since must be an ISO date"),
    ('default_model = "x"\n[models."m"]\ninput = 1.0\noutput = 1.0\n', "default_model 'x' has no prices"),
    ("models = 3\n", "not a usable price table"),
    ("[[[", "not a usable price table"),
])
def test_a_bad_prices_file_is_a_usage_error(tmp_path, text, message):
    own = tmp_path / "prices.toml"
    own.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_prices(str(own))


def test_a_mini_swe_agent_runs_usage_at_deepseeks_prices_is_its_bill(shared_transcripts, cli):
    """The run recorded what it was billed (info.model_stats.instance_cost); each call's usage,
    model and time priced by the table give the same figure."""
    import orjson

    found = sorted((shared_transcripts / "openai").glob("mini-swe-agent__deepseek*.traj.json"))
    if not found:
        pytest.skip("no mini-swe-agent DeepSeek run in ../shared/transcripts/openai")
    r = cli("replay", found[0], "-p", "none", "--dry-run", "--format", "json", "-q")
    assert r.exit_code == 0, r.output
    s = orjson.loads(r.stdout)["runs"][0]["summary"]
    assert s["price_model"].startswith("deepseek") and s["billed_cost_usd"] > 0
    assert s["recorded_cost_usd"] == pytest.approx(s["billed_cost_usd"], rel=0.01)
    assert s["recorded_input_cost_usd"] < s["recorded_cost_usd"]
    assert s["cache_expired_calls"] is not None  # each call's time is known


def test_what_genai_prices_says_of_a_model_is_kept_in_the_cache_folder(tmp_path):
    """A later process reads a model's prices from the cache, without importing genai-prices (it
    takes longer than a small replay); the cached record gives the same prices at any date and
    time of day; a read-only cache (--dry-run) writes nothing."""
    from compactlab.engine.cost.prices import GenaiPrices

    first = GenaiPrices(str(tmp_path), write=True)
    times = [at("2026-04-10T12:00:00"), at("2025-06-01T20:00:00"), at("2025-06-01T10:00:00"), at("2026-06-01T00:00:00")]
    models = ["claude-opus-4-6", "deepseek-chat", "claude-sonnet-4-5", "gpt-4o", "nobody-knows"]
    want = {(m, t): first.lookup(m, t) for m in models for t in times}
    assert first._library is not None and (tmp_path / "prices").is_dir()
    again = GenaiPrices(str(tmp_path), write=True)
    assert {(m, t): again.lookup(m, t) for m in models for t in times} == want
    assert again._library is None and again.read.startswith("genai-prices ")
    assert want[("nobody-knows", times[0])] is None
    assert want[("deepseek-chat", times[1])].input < want[("deepseek-chat", times[2])].input  # off-peak
    dry = tmp_path / "dry"
    GenaiPrices(str(dry), write=False).lookup("claude-opus-4-6", times[0])
    assert not dry.exists()


def test_a_run_looking_a_model_up_at_each_calls_time_gets_what_a_fresh_table_says():
    """A run looks its model up at every call's own time: the name's match and the time's price
    are kept between look-ups (the model once, the time only where a condition asks), and every
    answer is the one a table that has looked nothing up gives: across the off-peak hours' edges
    and the dated price changes, for an exact, a dated, a provider-prefixed and a prefix-matched
    name."""
    names = ("deepseek-chat", "deepseek/deepseek-chat", "deepseek-reasoner", "claude-sonnet-4-5-20250929",
             "claude-sonnet-4-5", "claude-opus-4-1-latest", "gpt-4o-mini-2024-07-18")
    start = at("2025-06-01T00:00:00")
    times = [start + k * 900.0 for k in range(2 * 96)]  # every quarter of an hour over two days
    times += [at("2025-06-01T00:30:00") + d for d in (-0.001, 0.0, 0.001)]  # an off-peak edge
    times += [at("2025-06-01T16:30:00") + d for d in (-0.001, 0.0, 0.001)]
    times += [at(day) + d for day in ("2025-09-05T00:00:00", "2026-01-01T00:00:00") for d in (-1.0, 0.0, 1.0)]
    kept = load_prices()

    def fresh() -> PriceTable:  # (its own sources: nothing looked up, nothing matched)
        return PriceTable([TomlPrices(_package_file("data/price_corrections.toml"), "compactlab corrections"),
                           GenaiPrices(kept.sources[-1].cache_dir)], kept.default_model)

    for name in names:
        for when in times:
            assert kept.lookup(name, when) == fresh().lookup(name, when), (name, when)
    assert load_prices().lookup("deepseek-chat", at("2025-06-01T12:00:00")) != \
        load_prices().lookup("deepseek-chat", at("2025-06-01T20:00:00"))  # (the sweep crosses a price)


def test_a_model_said_to_be_priced_the_same_at_every_time_is_and_one_that_is_not_is_not(tmp_path):
    """``PriceTable.timeless``, which lets a run look a model up once rather than at each call's
    time, against the look-ups themselves across dated rows, off-peak hours and price changes: a
    model said to be timeless gets the same prices at every time; a model said not to be gets other
    prices at some time (or none: a dated row's model before its date is another source's). The
    user's dated rows, the corrections' and genai-prices' conditions, a stand-in and an unpriced
    model all say so. And a run's look-ups at the times it asks (``_Prices.times_asked``: the
    session's start for a timeless model) give each call the prices of its own time."""
    from compactlab.engine.cost.pricing import _Prices, prices_looked_up

    own = tmp_path / "prices.toml"
    own.write_text('[models."house"]\ninput = 1.0\noutput = 2.0\n'
                   '[[models."dated"]]\nsince = 2025-06-01\ninput = 4.0\noutput = 20.0\n'
                   '[[models."moved"]]\ninput = 4.0\noutput = 20.0\n'
                   '[[models."moved"]]\nsince = 2025-09-01\ninput = 2.0\noutput = 10.0\n')
    table = load_prices(str(own))
    times = [at("2025-01-01T00:00:00") + k * 3600.0 * 7 for k in range(2000)]  # (hours of the day, two seasons)
    names = ["house", "dated", "moved", "deepseek-chat", "deepseek-reasoner", "claude-sonnet-4-5", "gpt-4o-mini",
             "claude-unknown-9", "nobody-knows", None]
    said = {name: table.timeless(name) for name in names}
    assert said == {"house": True, "dated": False, "moved": False, "deepseek-chat": False, "deepseek-reasoner": False,
                    "claude-sonnet-4-5": True, "gpt-4o-mini": True, "claude-unknown-9": True, "nobody-knows": True,
                    None: True}
    for name in names:
        seen = {table.lookup(name, t) for t in times}
        assert (len(seen) == 1) == said[name], name
    prices = _Prices(table, "moved", times[0])
    models = [names[k % len(names)] for k in range(len(times))]
    asked = prices.times_asked(models, times)
    assert asked is not None and sum(t is None for t in asked) == sum(said[m or "moved"] for m in models) > 0
    assert prices_looked_up(prices, models, asked, len(times)) == prices_looked_up(_Prices(table, "moved", times[0]),
                                                                                  models, times, len(times))
    assert _Prices(table, "house", None).times_asked(None, times) is None  # (no model named: the run's, timeless)
    assert _Prices(table.lookup("house"), None, None).times_asked(models, times) is times  # (one price for all)

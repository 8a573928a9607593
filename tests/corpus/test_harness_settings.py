"""#57 §3-§4: the settings each harness lets you change, as tune searches them, as they are printed
to paste, and as the harness (or the framework's own objects) reads them back."""

from __future__ import annotations

import json
import tomllib
from itertools import product
from pathlib import Path

import pytest

from compactlab.corpus.harness_settings import (HARNESSES, TABLE, harness, of_preset, parse_setting, paste,
                                                setting_of)
from compactlab.corpus.tune import parse_space
from compactlab.engine.policy import load_policy, value_at

SAMPLES = Path(__file__).resolve().parents[2] / "sample_transcripts"


def _points(name: str) -> list[dict]:
    """The first, a middle and the last value of every knob, in every combination."""
    knobs = harness(name).knobs
    picks = [sorted({k.values[0], k.values[len(k.values) // 2], k.values[-1]}) for k in knobs]
    return [{k.key: v for k, v in zip(knobs, combo)} for combo in product(*picks)]


@pytest.mark.parametrize("name", HARNESSES)
def test_every_point_searched_is_pasted_in_the_harness_form_and_reads_back_to_itself(name):
    h = harness(name)
    params = parse_space(h.space(), h.preset, [])  # (the space is one the preset takes)
    assert [p.key for p in params] == [k.key for k in h.knobs]
    for values in _points(name):
        lines = paste(name, values)
        assert parse_setting(name, lines) == values, (name, values, lines)
        load_policy(h.preset, [f"{k}={v}" for k, v in values.items()])  # (and the preset takes it)


def test_the_forms_parse_as_the_harness_reads_them():
    cc = paste("claude-code", {"summary.trigger_share": 0.75})
    assert cc[0] == "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=75"
    assert json.loads(cc[1].partition(": ")[2]) == {"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "75"}}
    codex = paste("codex", {"summary.trigger_cap": 180_000})
    assert codex[0] == "~/.codex/config.toml:"
    assert tomllib.loads("\n".join(codex[1:])) == {"model_auto_compact_token_limit": 180_000}
    gemini = paste("gemini-cli", {"summary.trigger": int(1_048_576 * 0.35)})
    assert json.loads(gemini[0].partition(": ")[2]) == {"model": {"compressionThreshold": 0.35}}
    oc = paste("opencode", {"summary.trigger_reserve": 20_000})  # (the current source's default)
    assert json.loads(oc[0].partition(": ")[2]) == {"compaction": {"reserved": 20_000}}
    # the preset's default is not the current OpenCode's: its setting is printed, not "no setting"
    assert paste("opencode", {"summary.trigger_reserve": 0}) == ['opencode.json: {"compaction": {"reserved": 0}}']
    # Pi's and OpenCode's reserves are taken off each session's window, by their rules
    pi = paste("pi", {"summary.trigger_reserve": 30_000})
    assert json.loads(pi[0].partition(": ")[2]) == {"compaction": {"reserveTokens": 30_000}}
    assert harness("pi").knobs[0].shown(0) == 16_384  # (the preset's base: Pi's default)
    for name, base in (("pi", 183_616), ("opencode", 168_000)):
        policy = load_policy(name)
        assert (policy.summary.trigger_rule, policy.summary.trigger_reserve, policy.summary.trigger) == (name, 0, base)
    # goose's threshold and Qwen Code's are shares of each session's window, the default's share its preset's trigger
    assert paste("goose", {"summary.trigger_share": 0.6}) == ["export GOOSE_AUTO_COMPACT_THRESHOLD=0.6"]
    assert paste("goose", None) == ["export GOOSE_AUTO_COMPACT_THRESHOLD=0.0"]  # (goose's own switch off)
    qwen = paste("qwen-code", {"summary.trigger_share": 0.5})
    assert qwen[0].startswith("~/.qwen/settings.json: ")
    assert json.loads(qwen[0].partition(": ")[2]) == {"model": {"chatCompression": {"contextPercentageThreshold": 0.5}}}
    # (0 turns each off: goose's check_if_compaction_needed, Qwen Code's chatCompressionService)
    assert json.loads(paste("qwen-code", None)[0].partition(": ")[2]) == {
        "model": {"chatCompression": {"contextPercentageThreshold": 0}}}
    from compactlab.engine.layers.harness_triggers import harness_trigger

    for name, default in (("goose", 0.8), ("qwen-code", 0.7)):
        knob = harness(name).knobs[0]
        assert knob.read(str(default)) == default in knob.values and load_policy(name).summary.trigger_share == 0
        assert harness_trigger(name, None, 200_000, default)[0] == load_policy(name).summary.trigger
    api = paste("anthropic-api", {"micro.trigger_tokens": 60_000, "micro.keep_recent": 4, "micro.clear_at_least": 5_000})
    edit = json.loads(api[0].partition("): ")[2])["context_management"]["edits"][0]
    assert edit == {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 60_000},
                    "keep": {"type": "tool_uses", "value": 4}, "clear_at_least": {"type": "input_tokens", "value": 5_000}}


def test_no_value_a_harness_ignores_is_searched():
    """Claude Code's override can only lower the default (83.5%); Codex takes the lesser of the
    limit and 90% of the window; Strands clamps summary_ratio to 0.1-0.8."""
    cc = harness("claude-code").knobs[0]
    assert max(cc.values) < 0.835 and {cc.shown(v) for v in cc.values} == set(range(40, 84))
    assert max(harness("codex").knobs[0].values) == 244_800
    ratio = harness("strands-summarizing").knobs[0]
    assert min(ratio.values) >= 0.1 and max(ratio.values) <= 0.8


def _run(lines: list[str], **names):
    """The snippet's last line, evaluated after its imports, with ``names`` given (the user's model)."""
    scope = dict(names)
    exec("\n".join(lines[:-1]), scope)  # (the imports)
    return eval(lines[-1], scope)


def test_the_framework_snippets_build_the_real_objects_with_the_values_printed():
    pytest.importorskip("langchain")
    pytest.importorskip("strands")
    from langchain.agents.middleware import ContextEditingMiddleware, SummarizationMiddleware
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from strands.agent.conversation_manager import (NullConversationManager, SlidingWindowConversationManager,
                                                    SummarizingConversationManager)

    model = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 200_000})
    mw = _run(paste("langchain", {"custom.settings.trigger_fraction": 0.65, "custom.settings.keep_messages": 12}),
              model=model)
    assert isinstance(mw, SummarizationMiddleware) and mw.trigger == ("fraction", 0.65) and mw.keep == ("messages", 12)
    ce = _run(paste("langchain-clear-tool-uses", {"custom.settings.trigger": 60_000, "custom.settings.keep": 2}))
    assert isinstance(ce, ContextEditingMiddleware) and (ce.edits[0].trigger, ce.edits[0].keep) == (60_000, 2)
    sw = _run(paste("strands", {"custom.settings.window_size": 25}))
    assert isinstance(sw, SlidingWindowConversationManager) and sw.window_size == 25
    sm = _run(paste("strands-summarizing", {"custom.settings.summary_ratio": 0.45,
                                            "custom.settings.preserve_recent_messages": 6}))
    assert isinstance(sm, SummarizingConversationManager) and (sm.summary_ratio, sm.preserve_recent_messages) == (0.45, 6)
    assert isinstance(_run(paste("strands", None)), NullConversationManager)


def test_the_frameworks_presets_take_their_settings_as_the_objects_do():
    """What the preset's step builds from its settings is what the snippet builds (the same
    arguments), so the replay of the printed values is the replay of the printed objects."""
    pytest.importorskip("langchain")
    from compactlab.frameworks.langchain import SummarizationSettings, _keep, _trigger

    s = SummarizationSettings(trigger_fraction=0.65, keep_messages=12)
    assert _trigger(s) == [("fraction", 0.65)] and _keep(s) == ("messages", 12)


def test_the_setting_of_a_preset_as_compare_prints_it():
    assert setting_of(load_policy("s08")) is None
    assert setting_of(load_policy("claude-code")) == ("Claude Code", [])  # (its default: nothing to set)
    # a feature a program turns on has no compaction as its own default: its default is still written
    # out (the middleware to add, the request's context_management); Strands' own default manager is
    # the sliding window of 40, so that preset has nothing to set
    for name in ("langchain-summarization", "langchain-clear-tool-uses", "strands-summarizing",
                 "anthropic-clear-tool-uses"):
        assert len(setting_of(load_policy(name))[1]) >= 1, name
    assert setting_of(load_policy("strands-sliding-window"))[1] == []
    title, lines = setting_of(load_policy("claude-code", ["summary.trigger_share=0.6"]))
    assert lines[0] == "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60"
    _, off = setting_of(load_policy("claude-code", ["summary.enabled=false"]))
    assert off[0] == "export DISABLE_AUTO_COMPACT=1"
    _, odd = setting_of(load_policy("claude-code", ["summary.trigger_share=0.61728"]))
    assert odd[0] == "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=62" and "takes no setting that is 0.61728" in odd[-1]
    # (one trigger on every session, whatever its window, is no setting of Claude Code's; nor is a layer it lacks)
    assert setting_of(load_policy("claude-code", ["summary.trigger=120000"])) is None
    assert setting_of(load_policy("claude-code", ["snip.enabled=true"])) is None
    # (90% is over the default of a 200,000-token window, which Claude Code keeps there, and under that of 1,000,000:
    # a setting it takes, not searched)
    _, above = setting_of(load_policy("claude-code", ["summary.trigger_share=0.9"]))
    assert above[0] == "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=90" and len(above) == 2
    # (Codex takes the lesser of its limit and 90% of the window: 260,000 is lowered to 244,800 of 272,000 and
    # lowers 360,000 of 400,000, a setting it takes, not searched on these; one trigger on every session is none)
    _, codex_above = setting_of(load_policy("codex", ["summary.trigger_cap=260000"]))
    assert codex_above == ["~/.codex/config.toml:", "model_auto_compact_token_limit = 260000"]
    assert setting_of(load_policy("codex", ["summary.trigger=200000"])) is None
    assert of_preset("strands-summarizing") is TABLE["strands-summarizing"]
    assert value_at(load_policy("langchain-summarization"), None, "custom.settings.keep_messages") == 20


def test_a_harness_without_an_off_switch_never_suggests_no_compaction():
    """Where no compaction is best, Claude Code gets the line that turns it off; Codex, which has
    none, gets the best setting it takes, and the recommendation says why."""
    import optuna

    from compactlab.corpus.tune import tune as search

    def evaluate(policies):
        out = []
        for p in policies:
            off = not p.summary.enabled
            t = 0 if off else p.summary.trigger
            out.append({"cost": 0.0 if off else -0.2 + t / 2_000_000, "recall": 1.0, "retention": 1.0, "reduction": 0.0,
                        "violations": 0, "overflows": 0, "cost_usd": 10.0 if off else 12 - t / 200_000,
                        "raw_cost_usd": 10.0, "probes": 10})
        return out

    def study():
        return optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=0))

    for name in ("claude-code", "codex"):
        h = harness(name)
        params = parse_space(h.space(), h.preset, [])
        result = search(params, ["cost", "recall"], h.preset, [], study, 8, evaluate, batch=4, harness=name)
        if name == "claude-code":
            assert result.chosen is result.reference and result.paste[0] == "export DISABLE_AUTO_COMPACT=1"
        else:
            assert result.chosen is not result.reference and result.chosen is not None
            assert "No compaction is not a candidate: Codex CLI has no setting" in result.recommendation
            assert result.nothing_to_set or result.paste  # (the base, its default: nothing to set; or a point's lines)
            assert not any(line.startswith("none") for line in result.paste)


def _front_replays_to_its_figures(cli, tmp_path, name: str, *samples: str) -> None:
    """tune --harness NAME on two samples: the setting printed, read back as the harness reads it
    and replayed by compare on the preset, gives the figures tune printed for it."""
    files = [SAMPLES / f"{sample}.jsonl" for sample in samples or ("synth-medium", "synth-long")]
    r = cli("tune", *files, "--harness", name, "--trials", "4", "--out", tmp_path / "t", "-q", "--format", "json")
    assert r.exit_code == 0, r.stderr
    front = json.loads((tmp_path / "t" / "front.json").read_text())
    assert front["harness"] == name and front["front"], front
    h = harness(name)
    row = front["front"][0]
    values = {k.key: row[k.key] for k in h.knobs}
    printed = paste(name, values)
    assert parse_setting(name, printed) == values
    doc = json.loads(cli("compare", *files, "-p", h.preset, *[a for k, v in values.items() for a in ("--set", f"{k}={v}")],
                         "--format", "json", "--out", tmp_path / "c", "-q", "--charts", "none").stdout)
    ours = next(e for e in doc["verdict"]["entries"] if e["policy"] == h.preset)
    assert ours["cost_saving"] == pytest.approx(row["cost_saving"], abs=1e-6)
    assert ours["recall"] == pytest.approx(row["recall"], abs=1e-6)
    said = json.loads(r.stdout)
    assert said["setting"] == front["setting"]


def test_tune_harness_codex_prints_config_toml_whose_replay_gives_the_figures(cli, tmp_path):
    _front_replays_to_its_figures(cli, tmp_path, "codex")


@pytest.mark.parametrize("name, samples", [("goose", ()), ("qwen-code", ("synth-small", "synth-medium"))])
def test_tune_harness_goose_and_qwen_code_print_a_threshold_whose_replay_gives_the_figures(cli, tmp_path, name, samples):
    # (Qwen Code's rule keeps the newest 30% of the history: on synth-long every point overflows the window)
    _front_replays_to_its_figures(cli, tmp_path, name, *samples)


def test_tune_harness_qwen_code_with_no_path_searches_qwen_codes_home(cli, tmp_path, monkeypatch):
    """Qwen Code's sessions are found and read as ``qwen`` (``home_of``): --harness qwen-code with no
    path tunes the sessions of that home, where a framework's has none."""
    from compactlab.corpus.harness_settings import home_of

    assert (home_of("qwen-code"), home_of("goose"), home_of("langchain")) == ("qwen", "goose", "langchain")
    chats = tmp_path / ".qwen" / "projects" / "-home-u-app" / "chats"
    chats.mkdir(parents=True)
    data = Path(__file__).resolve().parents[1] / "transcripts" / "data" / "qwen"
    (chats / "4b2d8f1e.jsonl").write_bytes((data / "built-compression.jsonl").read_bytes())
    monkeypatch.setenv("HOME", str(tmp_path))
    r = cli("tune", "--harness", "qwen-code", "--trials", "2", "--out", tmp_path / "t", "-q")
    assert r.exit_code == 0, r.stderr
    front = json.loads((tmp_path / "t" / "front.json").read_text())
    assert front["harness"] == "qwen-code" and front["nothing_to_set"] and front["base_scores"], front
    r = cli("tune", "--harness", "qwen", "--trials", "2", "--out", tmp_path / "q", "-q")  # (its home's name)
    assert r.exit_code == 0 and json.loads((tmp_path / "q" / "front.json").read_text())["harness"] == "qwen-code"
    r = cli("tune", "--harness", "langchain", "--out", tmp_path / "l")
    assert r.exit_code == 2 and "a framework's runs have no home" in r.stderr, r.stderr
    # a session whose project (the folder its records name) sets its own threshold: said
    project = tmp_path / "app"
    (project / ".qwen").mkdir(parents=True)
    (project / ".qwen" / "settings.json").write_text(json.dumps({"model": {"chatCompression": {
        "contextPercentageThreshold": 0.5}}}))
    (chats / "4b2d8f1e.jsonl").write_bytes((data / "built-compression.jsonl").read_bytes().replace(
        b'"cwd":"/home/u/app"', b'"cwd":' + json.dumps(str(project)).encode()))
    r = cli("tune", "--harness", "qwen-code", "--trials", "2", "--out", tmp_path / "p", "-q")
    assert r.exit_code == 0, r.stderr
    assert (f"warning: sessions started in {project} ran with its project's own setting, "
            "model.chatCompression.contextPercentageThreshold = 0.5 (~/app/.qwen/settings.json): that share of each "
            "session's window (100,000 of 200,000), not yours") in r.stderr, r.stderr  # (a project under the home
    # folder, named from ~)
    r = cli("replay", chats / "4b2d8f1e.jsonl", "-p", "qwen-code", "--out", tmp_path / "r")  # (its records name its folder)
    assert r.exit_code == 0 and (f"note: sessions started in {project} ran with its project's own setting, "
                                 "model.chatCompression.contextPercentageThreshold = 0.5") in r.stderr, r.stderr
    assert "-p qwen-code --set summary.trigger_share=0.5 replays theirs" in r.stderr


def _read_as_tunes_base(cli, tmp_path, monkeypatch, name: str, folder: str, doc: dict, said: str,
                        override: str, what: str) -> tuple[Path, list[Path]]:
    """A harness's settings file written at ``~/FOLDER/settings.json``: ``current`` reads it (the
    preset's ``override``, said as ``what``), tune --harness starts from it and a replay of the preset
    names it with the --set that replays it. The file and the sample files replayed."""
    from compactlab.corpus.harness_settings import current, settings_for

    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / folder).mkdir()
    settings = tmp_path / folder / "settings.json"
    settings.write_text(json.dumps(doc))
    words = f"{said} (~/{folder}/settings.json): {what}"
    assert current(name, settings_for()) == ([override], words)
    files = [SAMPLES / "synth-small.jsonl", SAMPLES / "synth-medium.jsonl"]
    r = cli("tune", *files, "--harness", name, "--trials", "2", "--out", tmp_path / "t", "-q")
    assert r.exit_code == 0, r.stderr
    assert json.loads((tmp_path / "t" / "front.json").read_text())["current"] == words
    r = cli("replay", files[0], "-p", name, "--out", tmp_path / "r")
    assert r.exit_code == 0 and f"-p {name} --set {override} replays yours" in r.stderr, r.stderr
    return settings, files


def test_qwen_codes_setting_is_read_from_its_settings_file(cli, tmp_path, monkeypatch):
    """``~/.qwen/settings.json``'s model.chatCompression.contextPercentageThreshold is tune
    --harness qwen-code's base and a replay of -p qwen-code says so; the default's share is no
    setting to replay; a file that is no JSON object, or a share outside 0-1, is a one-line error."""
    from compactlab.corpus.harness_settings import Setting, current

    settings, files = _read_as_tunes_base(cli, tmp_path, monkeypatch, "qwen-code", ".qwen", {
        "model": {"chatCompression": {"contextPercentageThreshold": 0.45}}},
        "model.chatCompression.contextPercentageThreshold = 0.45", "summary.trigger_share=0.45",
        "that share of each session's window (90,000 of 200,000)")
    key = "model.chatCompression.contextPercentageThreshold"
    assert current("qwen-code", {key: Setting("0.7", "x")}) == ([], f"{key} = 0.7 (x): the default")
    assert current("qwen-code", {}) is None
    settings.write_text("[1, 2]")
    r = cli("tune", *files, "--harness", "qwen-code", "--trials", "2", "--out", tmp_path / "e", "-q")
    assert r.exit_code == 2 and "settings.json: not a settings file compactlab can read" in r.stderr, r.stderr
    # (another harness's settings are read alone: Qwen Code's broken file is not Claude Code's error)
    assert cli("replay", files[0], "-p", "claude-code", "--out", tmp_path / "cc", "-q").exit_code == 0
    settings.write_text(json.dumps({"model": {"chatCompression": {"contextPercentageThreshold": 7}}}))
    r = cli("tune", *files, "--harness", "qwen-code", "--trials", "2", "--out", tmp_path / "e", "-q")
    assert r.exit_code == 2 and "=7 (~/.qwen/settings.json): not a number of at most 1" in r.stderr, r.stderr


def test_a_session_of_qwen_code_0_17_or_later_is_compacted_as_its_version_does(cli, tmp_path):
    """Qwen Code 0.17 and later (QwenLM/qwen-code#4345) compact at max(70% of the window, the window
    less 33,000), stop after 3 failures in a row and ignore contextPercentageThreshold: the qwen-code
    preset compacts each session as its recorded version does (summary.trigger_rule), the audit's
    threshold, so a replay or compare says nothing of the version; tune --harness qwen-code warns
    that the setting it prints does not change them."""
    from compactlab.engine.layers.harness_triggers import qwen_code_ladder, qwen_code_ladder_trigger, version_parts
    from compactlab.synth import write
    from compactlab.transcripts import recorded_version

    versions = ["0.17.0", "0.17.1", "v0.19.0", "1.0.0", "0.17.0-preview.1", "0.16.9", "0.8.1", "0.17", "", "x", None,
                "0", "0.x"]
    assert [qwen_code_ladder(v) for v in versions] == [True] * 5 + [False, False, True] + [False] * 5
    assert version_parts("0.17.0-preview.1") == (0, 17, 0) and version_parts("2.1.3") == (2, 1, 3)
    # (the ladder's figures as Qwen Code's /context shows them: QwenLM/qwen-code#4345's check at
    # 131,072 and #4945's at 60,000; a window under 110,000 is the preset's 70%)
    assert [qwen_code_ladder_trigger(w) for w in (200_000, 131_072, 60_000)] == [167_000, 98_072, 42_000]

    data = (Path(__file__).resolve().parents[1] / "transcripts" / "data" / "qwen" /
            "built-compression.jsonl").read_bytes()
    new, old, claude = tmp_path / "new.jsonl", tmp_path / "old.jsonl", tmp_path / "claude.jsonl"
    new.write_bytes(data)  # (its records say 0.19.0)
    old.write_bytes(data.replace(b'"version":"0.19.0"', b'"version":"0.16.2"'))
    write(claude, 3, form="claude-code")  # (its records say Claude Code's 2.1.0: not Qwen Code's)
    assert [recorded_version(str(f)) for f in (new, old, claude)] == [
        ("qwen", "0.19.0"), ("qwen", "0.16.2"), ("claude-code", "2.1.0")]
    assert recorded_version(str(SAMPLES / "synth-small.jsonl")) is None
    assert recorded_version(str(tmp_path / "missing.jsonl")) is None

    # (one answer: the preset compacts as each version does, on the session's window, 1,000,000 here: the
    # threshold inspect --compactions holds its compression to, and 0.17's breaker of 3 failures in a row; so a
    # replay and a compare say nothing of the version, and compare's default names the preset as the session's own)
    from compactlab import load_policy, load_transcript, replay
    from compactlab.audit import audit, settings_for
    from compactlab.engine.context import Context
    from compactlab.engine.layers.base import CallFacts, RunEnv
    from compactlab.engine.layers.summary import Breaker, failures_allowed, summary
    from compactlab.errors import SummarizerError
    from compactlab.summarizers import StubSummarizer

    class Failing(StubSummarizer):
        def summarize(self, request):
            raise SummarizerError("overloaded")

    for f, at, failures in ((new, 967_000, 3), (old, 700_000, 1)):
        t = load_transcript(str(f))
        run = replay(t, load_policy("qwen-code"))
        [row] = audit(t, settings_for([], env={}, home=str(tmp_path / "nohome")))["compactions"]
        assert run.summary.summary_trigger == row["threshold"] == at, (f, run.summary.summary_trigger_source, row)
        env = RunEnv(StubSummarizer(), harness_version=recorded_version(str(f))[1], window=1_000_000,
                     recorded_format="qwen")
        assert failures_allowed(load_policy("qwen-code").summary, env) == failures
        assert failures_allowed(load_policy("qwen-code", ["summary.max_failures=5"]).summary, env) == 5
        # (the layer's breaker opens after that many failed compressions in a row)
        env.summarizer, tries = Failing(), 0
        while not env.state_of(Breaker).open and tries < 5:
            env.now = CallFacts(tries, None, True, 2_000_000)  # (the recorded context: past any trigger)
            tries += summary(Context(list(t.entries)), load_policy("qwen-code").summary, env)[1].summary_failures
        assert tries == failures
        env.recorded_format = "claude-code"  # (another harness's recording: the policy's own breaker)
        assert failures_allowed(load_policy("qwen-code").summary, env) == 1
    for args in ((new, "-p", "qwen-code"), (old, "-p", "qwen-code"), (claude, "-p", "qwen-code"), (new, "-p", "s08")):
        r = cli("replay", *args, "--out", tmp_path / "n", "--force")
        assert r.exit_code == 0 and "recorded by Qwen Code" not in r.stderr, (args, r.stderr)
    for f in (new, old):
        r = cli("compare", f, "--out", tmp_path / "d", "--force")
        assert r.exit_code == 0 and "comparing qwen-code too: Qwen Code's own compaction, which recorded" in r.stderr
    r = cli("tune", new, old, "--harness", "qwen-code", "--trials", "2", "--out", tmp_path / "t", "-q")
    assert r.exit_code == 0 and ("warning: 1 of the 2 session(s) were recorded by Qwen Code 0.17 or later (0.19.0), "
                                 "which ignores model.chatCompression.contextPercentageThreshold "
                                 "(QwenLM/qwen-code#4345): the setting tune prints does not change those versions"
                                 ) in r.stderr, r.stderr
    # (one answer with compare's verdict, below: no compaction is no candidate where 0.17 recorded any)
    no_off = "No compaction is not a candidate: Qwen Code 0.17 and later ignore contextPercentageThreshold"
    assert no_off in r.stdout, r.stdout
    r = cli("tune", old, "--harness", "qwen-code", "--trials", "2", "--out", tmp_path / "o", "-q")
    assert r.exit_code == 0 and "recorded by Qwen Code" not in r.stderr and no_off not in r.stdout, r.stderr
    # compare's verdict reads the harness as the sessions ran it: 0.17's has no line that turns it off
    from types import SimpleNamespace

    from compactlab.reports.compare_report import setting_for, sessions_harness

    def results(*paths):
        return [SimpleNamespace(transcript=str(p), summary=SimpleNamespace(format="qwen", recorded_format=None),
                                policy="none") for p in paths]

    assert sessions_harness(results(old)).off == harness("qwen-code").off != ()
    assert setting_for(results(old), "none", "none", []) == ["Qwen Code", *harness("qwen-code").off]
    for paths in ((new,), (old, new)):
        h = sessions_harness(results(*paths))
        assert h.off == () and "Qwen Code 0.17 and later ignore contextPercentageThreshold" in h.no_off, paths
        assert setting_for(results(*paths), "none", "none", []) == []


def test_tune_harness_langchain_prints_a_constructor_whose_replay_gives_the_figures(cli, tmp_path):
    pytest.importorskip("langchain")
    # (LangChain's own code copies the whole history at every call: synth-long's 2.7 MB took 5 s)
    _front_replays_to_its_figures(cli, tmp_path, "langchain", "synth-small", "synth-medium")


def test_tune_harness_errors(cli, tmp_path):
    r = cli("tune", "--harness", "langchain", "--out", tmp_path / "t")
    assert r.exit_code == 2 and "give their paths" in r.stderr, r.stderr
    r = cli("tune", SAMPLES / "synth-medium.jsonl", "--harness", "cline", "--out", tmp_path / "t")
    assert r.exit_code == 2 and "knows no settings of it" in r.stderr, r.stderr


def test_compares_verdict_prints_the_harness_setting_of_the_policy_it_names(cli, tmp_path):
    files = [SAMPLES / "synth-medium.jsonl"]
    r = cli("compare", *files, "-p", "claude-code", "--set", "summary.trigger_share=0.6", "--out", tmp_path / "c",
            "--charts", "none", "-q")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((tmp_path / "c" / "results.json").read_text()) if (tmp_path / "c" / "results.json").exists() \
        else None
    assert "claude-code is the Claude Code setting:" in r.stdout, r.stdout
    assert "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60" in r.stdout
    assert "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60" in (tmp_path / "c" / "report.md").read_text()
    assert "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60" in (tmp_path / "c" / "report.html").read_text()
    j = json.loads(cli("compare", *files, "-p", "claude-code", "--set", "summary.trigger_share=0.6", "--out", tmp_path / "d",
                       "--charts", "none", "-q", "--format", "json").stdout)
    assert j["verdict"]["recommended"] == "claude-code"
    assert j["verdict"]["setting"][:2] == ["Claude Code", "export CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60"]
    assert doc is None or "harness_settings" not in json.dumps(doc)


def test_tune_harness_starts_from_your_current_setting_read_where_the_harness_keeps_it(cli, tmp_path, monkeypatch):
    """The base is your setting, not the default: CLAUDE_AUTOCOMPACT_PCT_OVERRIDE from the
    environment, Codex's limit from ~/.codex/config.toml; one the harness ignores is its default."""
    from compactlab.corpus.harness_settings import Setting, current

    files = [SAMPLES / "synth-medium.jsonl", SAMPLES / "synth-long.jsonl"]
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "60")
    r = cli("tune", *files, "--harness", "claude-code", "--trials", "2", "--out", tmp_path / "t", "-q")
    assert r.exit_code == 0, r.stderr
    front = json.loads((tmp_path / "t" / "front.json").read_text())
    assert front["current"] == ("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60 (the environment): 60% of each session's window "
                                "(120,000 of 200,000)")
    assert "claude-code as it is: your current setting, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60" in front["recommendation"]
    assert "\n base                               60 " in r.stdout, r.stdout
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text("model_auto_compact_token_limit = 200000\n")
    r = cli("tune", *files, "--harness", "codex", "--trials", "2", "--out", tmp_path / "c", "-q")
    assert r.exit_code == 0, r.stderr
    assert json.loads((tmp_path / "c" / "front.json").read_text())["current"] == (
        "model_auto_compact_token_limit = 200000 (~/.codex/config.toml): the lesser of it and 90% of each session's "
        "window (200,000 of the gpt-5.x-codex models' 272,000)")
    assert current("claude-code", {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": Setting("90", "x")}) == (
        ["summary.trigger_share=0.9"], "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=90 (x): 90% of each session's window, where "
                                       "under Claude Code's default (not of 200,000, whose 167,000 it keeps)")
    assert current("claude-code", {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": Setting("100", "x")}) == (
        [], "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=100 (x): above the default, which Claude Code keeps")
    assert current("claude-code", {"DISABLE_AUTO_COMPACT": Setting("1", "x")})[0] == ["summary.enabled=false"]
    assert current("codex", {"model_auto_compact_token_limit": Setting("300000", "x")}) == (
        ["summary.trigger_cap=300000"], "model_auto_compact_token_limit = 300000 (x): the lesser of it and 90% of each "
                                        "session's window (244,800 of the gpt-5.x-codex models' 272,000)")
    assert current("langchain", {}) is None and current("claude-code", {}) is None


def _project_session(tmp_path, pct: str = "60") -> tuple[Path, str]:
    """A Claude Code session started in a project whose .claude/settings.json sets the override."""
    from helpers import ClaudeCodeSession

    project = tmp_path / "app"
    (project / ".claude").mkdir(parents=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": pct}}))
    s = ClaudeCodeSession().user("go", cwd=str(project))
    for k in range(3):
        s.assistant(f"m{k}", {"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": "ls"}},
                    input_tokens=1000 * (k + 1), cwd=str(project)).result(f"t{k}", "x" * 400, cwd=str(project))
    return project, s.write(tmp_path / "s.jsonl")


def test_tune_harness_says_which_sessions_ran_with_their_projects_own_setting(cli, tmp_path, monkeypatch):
    """A project's .claude/settings.json overrides ~/.claude/settings.json for the sessions started
    in it (the audit reads it so): tune, which starts from and prints the user-level setting, says
    so for those sessions, and only where the project's setting differs from yours."""
    from compactlab.corpus.harness_settings import set_in_projects

    project, path = _project_session(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", raising=False)
    r = cli("tune", path, "--harness", "claude-code", "--trials", "2", "--out", tmp_path / "t", "-q")
    assert r.exit_code == 0, r.stderr
    theirs = (f"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60 ({project / '.claude' / 'settings.json'}): 60% of each session's "
              "window (120,000 of 200,000)")
    assert (f"warning: sessions started in {project} ran with its project's own setting, {theirs}, not yours"
            in r.stderr), r.stderr
    home = tmp_path / "home"
    assert set_in_projects("claude-code", [str(project)], env={}, home=str(home)) == [
        (str(project), theirs, ["summary.trigger_share=0.6"])]
    assert set_in_projects("claude-code", [str(project)], env={"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "60"},
                           home=str(home)) == []  # (the environment's wins over both: the same as yours)
    assert set_in_projects("codex", [str(project)], env={}, home=str(home)) == []  # (Codex keeps none there)
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "60"}}))
    r = cli("tune", path, "--harness", "claude-code", "--trials", "2", "--out", tmp_path / "u", "-q")
    assert r.exit_code == 0 and "started in" not in r.stderr, r.stderr


def test_a_replay_of_the_harness_preset_says_which_sessions_ran_with_their_projects_own_setting(cli, tmp_path,
                                                                                             monkeypatch):
    """replay, compare and check of -p claude-code (the default) on a session started in a project
    that sets its own override say so, and the --set options they print replay it; another preset,
    or the preset set otherwise, says nothing of it."""
    project, path = _project_session(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", raising=False)
    note = (f"note: sessions started in {project} ran with its project's own setting, CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=60 "
            f"({project / '.claude' / 'settings.json'}): 60% of each session's window (120,000 of 200,000); -p "
            "claude-code --set summary.trigger_share=0.6 replays theirs")
    r = cli("replay", path, "-p", "claude-code", "--out", tmp_path / "r")
    assert r.exit_code == 0 and note in r.stderr, r.stderr
    r = cli("compare", path, "-p", "claude-code", "-p", "s08", "--out", tmp_path / "c", "--charts", "none")
    assert r.exit_code == 0 and r.stderr.count(note) == 1, r.stderr
    r = cli("check", path, "-p", "claude-code", "--baseline", tmp_path / "b.json", "--update-baseline")
    assert r.exit_code == 0 and note in r.stderr, r.stderr
    for other in (("-p", "s08"), ("-p", "claude-code", "--set", "summary.trigger_share=0.6")):
        r = cli("replay", path, *other, "--out", tmp_path / "o", "--force")
        assert r.exit_code == 0 and "started in" not in r.stderr, r.stderr


def test_compares_verdict_says_a_preset_at_its_harness_default_has_nothing_to_set(cli, tmp_path):
    """The verdict printed "claude-code is the Claude Code setting:" and, as the line to paste, "no
    setting: Claude Code's default". It now says the preset is the default, in every form."""
    files = [SAMPLES / "synth-medium.jsonl"]
    r = cli("compare", *files, "-p", "claude-code", "--out", tmp_path / "c", "--charts", "none", "-q")
    assert r.exit_code == 0, r.stderr
    said = "claude-code is Claude Code's default: there is nothing to set."
    assert said in r.stdout and "no setting" not in r.stdout and "setting:" not in r.stdout, r.stdout
    md = (tmp_path / "c" / "report.md").read_text()
    assert said in md and "```\n```" not in md
    page = (tmp_path / "c" / "report.html").read_text()
    assert "is Claude Code&#x27;s default: there is nothing to set." in page and "<pre></pre>" not in page
    j = json.loads(cli("compare", *files, "-p", "claude-code", "--out", tmp_path / "d", "--charts", "none", "-q",
                       "--format", "json").stdout)
    assert j["verdict"]["recommended"] == "claude-code" and j["verdict"]["setting"] == ["Claude Code"]


def test_a_harness_preset_run_as_its_default_says_when_you_set_that_harness_otherwise(cli, tmp_path, monkeypatch):
    """tune's base is your current setting (``~/.claude/settings.json``); ``compare -p claude-code``
    ran Claude Code's default and said nothing of it, so "claude-code" meant two things. Every job
    that runs a harness's preset as it is now says, once, what you set and the --set that replays it."""
    from helpers import SAMPLES

    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text('{"env": {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "70"}}')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", raising=False)
    monkeypatch.delenv("DISABLE_AUTO_COMPACT", raising=False)
    session = SAMPLES / "synth-small.jsonl"
    note = ("note: claude-code is Claude Code's default, and you set CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=70 "
            "(~/.claude/settings.json): 70% of each session's window (140,000 of 200,000); -p claude-code --set "
            "summary.trigger_share=0.7 replays yours (tune --harness claude-code starts from it)")
    for args in (("replay", session, "-p", "claude-code", "--dry-run"),
                 ("compare", session, "-p", "claude-code", "-p", "s08", "--dry-run"),
                 ("check", session, "-p", "claude-code", "--baseline", tmp_path / "b.json", "--update-baseline"),
                 ("next-action", session, "-p", "claude-code", "--dry-run")):
        r = cli(*args)
        assert r.exit_code == 0 and r.stderr.count(note) == 1, (args[0], r.stderr)
    shown = cli("policies", "show", "claude-code").stdout  # (the preset shown says it too, as a comment)
    assert ("# You set CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=70 (~/.claude/settings.json): 70% of each session's window "
            "(140,000 of 200,000): -p claude-code --set summary.trigger_share=0.7 replays yours.") in shown
    import tomllib

    assert tomllib.loads(shown)["summary"]["trigger_share"] == 0  # (still the preset, a policy file to read)
    mine = cli("replay", session, "-p", "claude-code", "--set", "summary.trigger_share=0.7", "--dry-run")
    assert "note: claude-code is" not in mine.stderr  # (yours, replayed: nothing to say)
    assert "note:" not in cli("replay", session, "-p", "s08", "--dry-run").stderr
    # (95% is above the default on 200,000, which Claude Code keeps there; of 1,000,000 it lowers 967,000 to 950,000)
    monkeypatch.setenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "95")
    assert ("95% of each session's window, where under Claude Code's default (not of 200,000, whose 167,000 it "
            "keeps)") in cli("replay", session, "-p", "claude-code", "--dry-run").stderr
    monkeypatch.setenv("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "100")  # (the whole window: never under the default)
    assert "note: claude-code is" not in cli("replay", session, "-p", "claude-code", "--dry-run").stderr


def test_telling_a_policy_of_no_harness_apart_loads_no_framework_preset():
    """Whether a policy is a harness's setting (compare asks it of every policy of its grid) loaded
    every harness's preset, a framework's too: its step imported pydantic, 0.1 s of a compare of s08.
    A policy with no step of its own is held only to the presets that have none."""
    import subprocess
    import sys

    code = ("import sys; from compactlab import load_policy; from compactlab.corpus.harness_settings import of_policy; "
            "assert of_policy(load_policy('s08')) is None; print('pydantic' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stdout + done.stderr


def test_gemini_clis_setting_is_read_from_its_settings_file(cli, tmp_path, monkeypatch):
    """``~/.gemini/settings.json``'s model.compressionThreshold is tune --harness gemini-cli's base
    and a replay of -p gemini-cli says so, with the --set that replays it; the default's share is no
    setting; 0 is no off switch (Gemini CLI then compresses at every call: chatCompressionService),
    and a share outside 0-1 is a one-line error."""
    from compactlab.corpus.harness_settings import Setting, current, share_threshold

    settings, files = _read_as_tunes_base(cli, tmp_path, monkeypatch, "gemini-cli", ".gemini", {
        "model": {"compressionThreshold": 0.25}, "ui": {"theme": "x"}}, "model.compressionThreshold = 0.25",
        "summary.trigger=262144", "262,144 tokens")
    # (the searched point and the read setting are one trigger: the knob reads 0.25 as current does)
    assert harness("gemini-cli").knobs[0].read(0.25) == 262_144 in harness("gemini-cli").knobs[0].values
    key = "model.compressionThreshold"
    assert current("gemini-cli", {key: Setting("0.5", "x")}) == ([], f"{key} = 0.5 (x): the default")
    assert current("gemini-cli", {key: Setting("0", "x")})[0] == ["summary.trigger=0"]
    assert share_threshold("gemini-cli", 1_048_576, {})[0] == 524_288
    settings.write_text(json.dumps({"model": {"compressionThreshold": 1.5}}))
    r = cli("tune", *files, "--harness", "gemini-cli", "--trials", "2", "--out", tmp_path / "e", "-q")
    assert r.exit_code == 2 and "=1.5 (~/.gemini/settings.json): not a number from 0 to 1" in r.stderr, r.stderr
    assert cli("replay", files[0], "-p", "qwen-code", "--out", tmp_path / "q", "-q").exit_code == 0  # (not Qwen's)


def test_the_settings_read_are_those_of_the_presets_a_run_looks_at():
    """``jobs.base.SETTINGS_READ`` spares a replay of any other policy the harnesses' table: it
    must name every harness preset whose settings ``current`` reads, and no other."""
    from compactlab.corpus.harness_settings import TABLE, Setting, current
    from compactlab.jobs.base import SETTINGS_READ

    every = {k: Setting("100000" if k.startswith("model_") else "50" if k.startswith("CLAUDE") else "0.5", "a test")
             for k in ("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "model_auto_compact_token_limit",
                       "GOOSE_AUTO_COMPACT_THRESHOLD", "model.chatCompression.contextPercentageThreshold",
                       "model.compressionThreshold")}
    every.update({k: Setting("30000", "a test") for k in ("compaction.reserveTokens", "compaction.reserved")})
    read = {h.preset for h in TABLE.values() if current(h.name, every) is not None}
    assert read == set(SETTINGS_READ)


@pytest.mark.parametrize("text, value", [
    ('{"a": 1, // one\n "b": [1, 2,], }', {"a": 1, "b": [1, 2]}),
    ('{"s": "x//y /* z */ \\" ,}", /* c, */ "t": 2}', {"s": 'x//y /* z */ " ,}', "t": 2}),
    ("[] // the end", []),
])
def test_json_with_comments_reads_as_opencode_reads_it(text, value):
    """OpenCode's configs are JSON with comments and trailing commas (jsonc-parser): each left out,
    never inside a string."""
    from compactlab.corpus.harness_settings import jsonc_to_json

    assert json.loads(jsonc_to_json(text)) == value
    with pytest.raises(ValueError):
        json.loads(jsonc_to_json('{"a": "open'))

from __future__ import annotations

import dataclasses
import subprocess
import sys

import orjson
import pytest

from compactlab.errors import PolicyError
from compactlab.engine.policy import Policy, _raw_policy, build_policy, load_policy, preset_names


def test_presets_exist():
    assert {"none", "s06", "s06-article", "s08", "s08-readme", "s20"} <= set(preset_names())


def test_seed_constants():
    s08 = load_policy("s08")
    assert (s08.budget.max_chars, s08.budget.persist_threshold, s08.budget.preview_chars) == (200_000, 30_000, 2_000)
    assert (s08.snip.max_messages, s08.snip.keep_head, s08.snip.pair_safe) == (50, 3, True)
    assert (s08.micro.keep_recent, s08.micro.min_chars) == (3, 120)
    assert (s08.summary.trigger, s08.summary.unit, s08.summary.input_chars, s08.summary.input_from) == (50_000, "chars", 80_000, "head")
    # the seed's 200,000 is its model's window: 0, the model's (200,000 for a Claude model, tested in test_window)
    assert (s08.reactive.window_tokens, s08.reactive.keep_tail, s08.reactive.max_retries) == (0, 5, 1)
    assert s08.manual.mode == "before_results" and s08.order == ["budget", "snip", "micro"]
    readme = load_policy("s08-readme")
    assert readme.snip.pair_safe is False and readme.snip.placeholder == "[snipped {n} messages from conversation middle]"
    s06 = load_policy("s06")
    assert s06.order == ["micro"] and s06.micro.placeholder == "[Previous: used {tool_name}]" and s06.micro.min_chars == 100
    assert (s06.summary.trigger, s06.summary.unit, s06.summary.ack) == (50_000, "tokens", "Understood. Continuing.")
    art = load_policy("s06-article")
    assert art.micro.preserve_tools == ["read_file"] and art.micro.only_consumed and art.summary.input_from == "tail"
    assert art.manual.mode == "after_results" and art.summary.ack == ""
    s20 = load_policy("s20")
    assert s20.manual.mode == "replace_results" and s20.manual.message == "[Compacted. Continue with summarized context.]"
    none = load_policy("none")
    assert none.order == [] and not any(getattr(none, k).enabled for k in ("budget", "snip", "micro", "summary", "reactive", "manual"))


@pytest.mark.parametrize("overrides,message", [
    (["snip.keep_head=50"], "snip: keep_head (50) must be smaller than max_messages (50)"),
    (["snip.bogus=1"], "snip.bogus: unknown key"),
    (["bogus.x=1"], "bogus: unknown key"),
    (["micro.keep_recent=lots"], "micro.keep_recent: Input should be a valid integer"),
    (["summary.unit=bytes"], "summary.unit: Input should be 'chars', 'tokens' or 'messages'"),
    (["summary.template=no placeholder"], "summary: template must contain {summary}"),
    (["budget.preview_chars=40000"], "budget: preview_chars must be smaller than persist_threshold"),
    (["order=[\"snip\",\"snip\"]"], "order lists a layer twice"),
    (["order=[\"summary\"]"], "order.0: Input should be"),
    (["manual.mode=replace_results"], "manual: mode 'replace_results' needs a message"),
    (["snip.max_messages=-1"], "snip.max_messages: Input should be greater than or equal to 2"),
    (["size.chars_per_token=0"], "size.chars_per_token: Input should be greater than or equal to 0.1"),
    (["size.chars_per_token=1e-320"], "size.chars_per_token: Input should be greater than or equal to 0.1"),
    (["size.chars_per_token=nan"], "size.chars_per_token: Input should be less than or equal to 100"),
    (["summary.trigger=100000000000000000000000"], "summary.trigger: Input should be less than or equal to 1000000000000"),
    (["size.overhead_tokens=9223372036854775807"], "size.overhead_tokens: Input should be less than or equal to 1000000000000"),
    (["reactive.max_retries=1000000"], "reactive.max_retries: Input should be less than or equal to 10"),
    (["summary.prompt=\"s8\""], "summary.prompt: 's8' is neither a built-in prompt (s08, s06, s06-article, claude-code, codex) nor a file"),
    (["manual.tool=\"\""], "manual.tool: String should have at least 1 character"),
    (["summary.trigger=0"], "summary.trigger: Input should be greater than or equal to 1"),
])
def test_errors_name_the_key(overrides, message):
    with pytest.raises(PolicyError) as exc:
        load_policy("s08", overrides)
    assert message in str(exc.value)


@pytest.mark.parametrize("ref, overrides, hint", [
    ("s08", ["summary.trigerr=1"], "did you mean summary.trigger or summary.trigger_rule or summary.trigger_share? (compactlab policies show "
                                   "s08 lists every key)"),
    ("s08", ["sumary.trigger=1"], "did you mean summary? (compactlab policies show s08 lists every key)"),
    ("claude-code", ["micro.keep_recnt=2"], "did you mean micro.keep_recent? (compactlab policies show claude-code"),
    ("s08", ["summary.zzzzz=1"], "compactlab policies show s08 lists every key"),  # (nothing spelt like it)
])
def test_an_unknown_key_is_told_the_keys_spelt_like_it(ref, overrides, hint):
    with pytest.raises(PolicyError) as exc:
        load_policy(ref, overrides)
    assert exc.value.hint is not None and exc.value.hint.startswith(hint), exc.value.hint


def test_a_trigger_given_is_one_trigger_for_every_recording_and_a_rule_never_hides_one(tmp_path):
    """A harness's preset follows its rule (summary.trigger_rule); a trigger given (--set, or a file
    that extends the preset) turns the rule and its share off, for one trigger on every recording; a
    file that sets both a rule and another trigger, or a share without a rule, is a one-line error
    (the trigger would not be read)."""
    base = load_policy("claude-code")
    assert (base.summary.trigger_rule, base.summary.trigger_share, base.summary.trigger) == ("claude-code", 0.0, 167_000)
    shared = load_policy("claude-code", ["summary.trigger_share=0.6"])
    assert (shared.summary.trigger_rule, shared.summary.trigger_share) == ("claude-code", 0.6)
    for one in (load_policy("claude-code", ["summary.trigger=120000"]), load_policy("goose", [("summary.trigger", 120_000)])):
        assert (one.summary.trigger_rule, one.summary.trigger_share, one.summary.trigger) == ("", 0.0, 120_000)
    assert load_policy("claude-code").summary.trigger_rule == "claude-code"  # (the preset itself unchanged)
    child = tmp_path / "child.toml"
    child.write_text('extends = "qwen-code"\n[summary]\ntrigger = 100000\n')
    assert load_policy(str(child)).summary.trigger_rule == ""
    both = tmp_path / "both.toml"
    both.write_text('extends = "s08"\n[summary]\nunit = "tokens"\ntrigger = 100000\ntrigger_rule = "goose"\n')
    with pytest.raises(PolicyError, match=r"trigger \(100000\) is not read while trigger_rule gives the trigger "
                                          r"\(goose's 160,000 of 200,000\)"):
        load_policy(str(both))
    for share in (["summary.trigger_share=0.5"], ["summary.trigger_share=0.6", "summary.trigger=120000"]):
        with pytest.raises(PolicyError, match="trigger_share is a share of the window for the rule of a harness that takes one"):
            load_policy("s08" if len(share) == 1 else "claude-code", share)
    with pytest.raises(PolicyError, match="trigger_rule .* gives a trigger in tokens"):
        load_policy("s08", ["summary.trigger=160000", "summary.trigger_rule=goose"])
    # Pi's and OpenCode's rules take a reserve off each window, not a share; the others, a share
    reserved = load_policy("pi", ["summary.trigger_reserve=30000"])
    assert (reserved.summary.trigger_rule, reserved.summary.trigger_reserve) == ("pi", 30_000)
    one = load_policy("opencode", ["summary.trigger=150000"])
    assert (one.summary.trigger_rule, one.summary.trigger_reserve, one.summary.trigger) == ("", 0, 150_000)
    with pytest.raises(PolicyError, match="trigger_share is a share of the window for the rule of a harness that takes one"):
        load_policy("pi", ["summary.trigger_share=0.5"])
    with pytest.raises(PolicyError, match=r"trigger_reserve is taken off the window by the rule of a harness that takes "
                                          r"one \(trigger_rule pi, opencode\)"):
        load_policy("claude-code", ["summary.trigger_reserve=20000"])
    with pytest.raises(PolicyError, match="trigger_reserve is taken off the window"):  # (one trigger: no reserve read)
        load_policy("pi", ["summary.trigger_reserve=30000", "summary.trigger=150000"])


def test_an_unknown_key_of_a_policy_file_names_the_file(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text("[summary]\ntriger = 5\n")
    with pytest.raises(PolicyError) as exc:
        load_policy(str(path))
    assert exc.value.hint == f"did you mean summary.trigger or summary.trigger_cap or summary.trigger_rule? (compactlab policies show {path} " \
                             "lists every key)"


def test_set_parsing_and_fingerprint():
    base = load_policy("s08")
    p = load_policy("s08", ["summary.trigger=40000", "micro.preserve_tools=[\"read_file\"]", "snip.placeholder=cut {n}"])
    assert p.summary.trigger == 40000 and p.micro.preserve_tools == ["read_file"] and p.snip.placeholder == "cut {n}"
    assert p.fingerprint != base.fingerprint and len(p.fingerprint) == 12
    assert load_policy("s08", ["summary.trigger=50000"]).fingerprint == base.fingerprint
    assert load_policy("s08", ["description=\"other words\""]).fingerprint == base.fingerprint
    with pytest.raises(PolicyError, match="expected KEY=VALUE"):
        load_policy("s08", ["summary.trigger"])


def test_toml_file_with_extends(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('extends = "s08"\ndescription = "tighter"\n[summary]\ntrigger = 30000\n')
    p = load_policy(str(f))
    assert p.name == "mine" and p.summary.trigger == 30000 and p.snip.max_messages == 50
    bad = tmp_path / "bad.toml"
    bad.write_text("[summary\n")
    with pytest.raises(PolicyError, match="invalid TOML"):
        load_policy(str(bad))
    with pytest.raises(PolicyError, match="no such policy file"):
        load_policy(str(tmp_path / "missing.toml"))
    with pytest.raises(PolicyError, match="unknown policy 'nope'") as exc:
        load_policy("nope")
    assert exc.value.hint.startswith("did you mean none? presets: ")
    with pytest.raises(PolicyError) as exc:
        load_policy("zzzz")
    assert exc.value.hint.startswith("presets: ")  # (nothing spelt like it)
    for typed, meant in (("s8", "s08"), ("claude", "claude-code"), ("opencod", "opencode")):
        with pytest.raises(PolicyError) as exc:
            load_policy(typed)
        assert exc.value.hint.startswith(f"did you mean {meant}"), exc.value.hint  # (the likest first)


def test_defaults_are_seed000():
    assert Policy().fingerprint == load_policy("s08").fingerprint


@pytest.mark.parametrize("name", preset_names())
def test_trusted_presets_build_what_validation_builds(name):
    """Presets skip pydantic at run time; this is what makes that safe."""
    data, preset = _raw_policy(name)
    assert preset
    trusted, validated = build_policy(data, name, trusted=True), build_policy(data, name)
    assert trusted == validated
    assert orjson.dumps(trusted.resolved()) == orjson.dumps(validated.resolved())  # 4 == 4.0, but not in JSON
    assert trusted.resolved() == dataclasses.asdict(trusted)



@pytest.mark.parametrize("ref", ["py:compactlab.bench:identity_step", "py:steps/my step.py:keep", "py:mod:",
                                 "py:x", "cmd:python3 step.py", "cmd:./run --flag  x", "py:ünï:cödé", "py:a:b:c",
                                 "py:", "py:  "])
def test_your_own_step_alone_builds_what_validation_builds(ref):
    """Your own step named alone (-p py:… or cmd:…) skips pydantic too (its table is made here, the
    step's name a string in its place): the same policy as validation builds, or the same error (a
    step that names none, one that is not there)."""
    from compactlab.errors import PolicyError

    def built(**how):
        try:
            policy = build_policy(data, ref, **how) if how else load_policy(ref)
        except PolicyError as exc:
            return str(exc)
        return orjson.dumps(dataclasses.asdict(policy)), policy.fingerprint

    data, trusted = _raw_policy(ref)
    assert trusted
    validated = built(trusted=False)
    assert built() == validated
    if ref.strip() != "py:":  # (else an error the trusted build leaves to validation: a ValueError)
        assert built(trusted=True) == validated
    if ref.startswith("py:compactlab"):
        assert isinstance(validated, tuple)
    elif ref.strip() == "py:":
        assert "names no step" in validated


VALUES = ["0", "1", "2", "-1", "3.5", "0.25", "true", "false", "head", "tokens", "messages", "turns", "after_results",
          "replace_results", '""', '"[x] {summary}"', '["a"]', "inf", "nan", "1e400", "60000", "x"]


@pytest.mark.parametrize("preset", ["s08", "claude-code", "openhands"])
def test_plain_overrides_of_a_preset_build_what_validation_builds(preset):
    """An override of exactly a key's type and bounds skips pydantic; anything else goes through
    it. Either way: the policy validation gives, or the error it gives, for every key and value."""
    from compactlab.errors import PolicyError
    from compactlab.engine.policy import SECTIONS, _plainly_valid, apply_overrides, parse_override

    fast = 0
    for section, kind in SECTIONS.items():
        for key in [f.name for f in dataclasses.fields(kind)] + ["no_such_key"]:
            for value in VALUES:
                item = f"{section}.{key}={value}"
                data = apply_overrides(_raw_policy(preset)[0], [item])
                try:
                    validated = build_policy(data, f"{preset} with --set")
                except PolicyError as exc:
                    with pytest.raises(PolicyError) as got:
                        load_policy(preset, [item])
                    assert str(got.value) == str(exc), item
                    continue
                built = load_policy(preset, [item])
                assert built == validated, item
                assert orjson.dumps(built.resolved()) == orjson.dumps(validated.resolved()), item
                fast += _plainly_valid(*parse_override(item))
    assert fast > 100  # the fast path is taken where it can be
    assert not _plainly_valid(*parse_override("size.chars_per_token=4"))  # pydantic makes it 4.0


def test_user_policies_are_validated(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('extends = "s08"\n[snip]\nmax_messages = "many"\n')
    assert _raw_policy(str(f))[1] is False
    with pytest.raises(PolicyError, match="snip.max_messages: Input should be a valid integer"):
        load_policy(str(f))


def test_a_preset_replay_does_not_import_pydantic():
    code = ("import sys; from compactlab.engine.policy import load_policy; p = load_policy('claude-code'); "
            "assert p.micro.keep_recent == 5; print('pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_alias_and_key_together_is_an_error():
    assert load_policy("s08", ['micro.exclude_tools=["Read"]']).micro.preserve_tools == ["Read"]
    with pytest.raises(PolicyError, match="give preserve_tools or exclude_tools, not both"):
        load_policy("s08", ['micro.exclude_tools=["Read"]', 'micro.preserve_tools=["Bash"]'])


def test_policies_cross_process_boundaries():
    """compare sends policies to Dask workers: they pickle and compare equal on the other side."""
    import pickle

    for policy in (load_policy("s08"), load_policy("claude-code", ["micro.keep_recent=2"])):
        again = pickle.loads(pickle.dumps(policy))
        assert again == policy and again.fingerprint == policy.fingerprint


def test_a_policy_from_a_dict_goes_through_build_policy():
    p = build_policy({"snip": {"max_messages": 30}, "order": ["snip", "micro"]}, "mine")
    assert p.snip.max_messages == 30 and p.order == ["snip", "micro"] and p.budget == Policy().budget
    with pytest.raises(TypeError, match=r"Policy\(snip=...\) takes a SnipConfig; build_policy\(\) builds one"):
        Policy(snip={"max_messages": 30})


def test_every_key_is_documented():
    from compactlab.engine.policy import SECTIONS

    seen = 0
    for kind in [Policy, *SECTIONS.values()]:
        for f in dataclasses.fields(kind):
            if f.name in SECTIONS or f.name in ("name", "description", "brief"):
                continue  # a table, or the policy's own label
            assert f.metadata.get("doc"), f"{kind.__name__}.{f.name} has no doc"
            seen += 1
    assert seen > 40


def test_values_pass_as_data_and_build_what_the_same_set_text_builds():
    """(#26 §7) tune and sweeps hand load_policy (key, value) pairs: no TOML text read back."""
    from compactlab.engine.policy import parse_override

    assert parse_override(("summary.trigger", 30000)) == (["summary", "trigger"], 30000)
    assert parse_override(("micro.keep_recent", "7")) == (["micro", "keep_recent"], "7")  # a string stays one
    as_data = load_policy("s08", [("summary.trigger", 30000), ("micro.keep_recent", 4)])
    as_text = load_policy("s08", ["summary.trigger=30000", "micro.keep_recent=4"])
    assert as_data.fingerprint == as_text.fingerprint and as_data.summary.trigger == 30000


def test_every_sections_equality_compares_all_its_keys():
    """A section's equality is over every key of its own class: one that compared its base's keys
    (``enabled`` alone) would take two presets that differ for the same (#60: ``Section`` compares
    for every table, by each one's own fields)."""
    from dataclasses import fields, replace

    from compactlab.engine.policy import SECTIONS

    for name, kind in SECTIONS.items():
        base, told = kind(), 0
        assert base == kind(), name
        for f in fields(kind):
            value = getattr(base, f.name)
            other = (not value if isinstance(value, bool) else value + 1 if isinstance(value, (int, float))
                     else value + "x" if isinstance(value, str) else None)
            if other is None or f.name == "enabled":
                continue
            try:
                changed = replace(base, **{f.name: other})
            except ValueError:  # (a cross-key rule of __post_init__)
                continue
            assert changed != base, f"{name}.{f.name}: a changed key compares equal"
            told += 1
        assert told or not [f for f in fields(kind) if f.name != "enabled"], name


def test_a_table_is_set_once_and_frozen_after_whatever_makes_it():
    """(#60) ``Section`` freezes every table itself (dataclass generates no frozen methods for
    them): a key cannot be set or deleted once the table is made, however it was made: by its
    class, by ``replace``, by pickle (the workers'), by copy; mypy reads the tables as frozen."""
    import copy
    import pickle
    from dataclasses import FrozenInstanceError, replace

    from compactlab.engine.policy import SizeConfig

    p = load_policy("s08")
    for made in (p, replace(p, name="other"), pickle.loads(pickle.dumps(p)), copy.deepcopy(p)):
        with pytest.raises(FrozenInstanceError):
            made.name = "changed"  # type: ignore[misc]
        with pytest.raises(FrozenInstanceError):
            made.size.chars_per_token = 1.0  # type: ignore[misc]
        with pytest.raises(FrozenInstanceError):
            del made.summary
    assert pickle.loads(pickle.dumps(p)) == p and copy.deepcopy(p) == p and replace(p, name="other") != p
    assert repr(SizeConfig()) == "SizeConfig(chars_per_token=4.0, overhead_tokens=0)"
    assert hash(SizeConfig(chars_per_token=3.0)) == hash(SizeConfig(chars_per_token=3.0)) != hash(SizeConfig())

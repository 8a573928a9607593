"""The central types are written out as classes a type checker and an editor see (#26 §3); these
tests hold the written-out forms equal to the registries they mirror."""

from __future__ import annotations

from dataclasses import fields
from typing import get_args

from compactlab.engine.layers import REGISTRY
from compactlab.engine.layers.base import LayerStats
from compactlab.engine.policy import CHEAP_LAYERS, SECTIONS, CheapLayer, Policy
from compactlab.engine.records import COUNTERS, TURN_COUNTERS, RUN_COUNTERS, RunSummary, PythonTurnRecord


def test_policy_has_a_table_for_every_section_and_orders_every_cheap_layer():
    names = [f.name for f in fields(Policy)]
    assert names == ["name", "description", "brief", "order", *SECTIONS]
    for f in fields(Policy):
        if f.name in SECTIONS:
            assert f.type in (SECTIONS[f.name], SECTIONS[f.name].__name__), f.name
            assert isinstance(getattr(Policy(), f.name), SECTIONS[f.name])
    assert get_args(CheapLayer) == CHEAP_LAYERS == tuple(n for n, layer in REGISTRY.items() if layer.cheap)
    assert Policy().order == list(CHEAP_LAYERS)


def test_layer_stats_has_every_counter_and_adds_each_one():
    names = [f.name for f in fields(LayerStats)]
    assert names == [stat for stat, _, _ in COUNTERS] + ["lowest_changed"]
    total, one = LayerStats(), LayerStats(lowest_changed=7)
    for k, name in enumerate(names[:-1], 1):
        setattr(one, name, k)
    total.add(one)
    total.add(one)
    assert [getattr(total, n) for n in names[:-1]] == [2 * k for k in range(1, len(names))]
    assert total.lowest_changed == 7
    total.add(LayerStats(lowest_changed=3))
    assert total.lowest_changed == 3


def test_the_records_take_every_counter_they_name():
    turn = {f.name for f in fields(PythonTurnRecord)}
    run = {f.name for f in fields(RunSummary)}
    assert all(column in turn for _, column in TURN_COUNTERS)
    assert all(key in run for _, key in RUN_COUNTERS)


def test_the_engine_builds_turn_records_in_field_order():
    """engine.Turns._record builds a TurnRecord positionally: the counters stand after ``tokens`` in
    records.TURN_COUNTERS' order, then the rest in this order."""
    columns = [f.name for f in fields(PythonTurnRecord)]
    at = columns.index("tokens") + 1
    assert columns[:at] == ["call", "message_index", "raw_messages", "raw_chars", "raw_tokens", "messages", "chars",
                            "tokens"]
    assert columns[at:at + len(TURN_COUNTERS)] == [column for _, column in TURN_COUNTERS]
    assert [stat for stat, _ in TURN_COUNTERS] == ["persisted", "persisted_chars", "snipped", "micro_compacted",
                                                   "summaries", "summary_input_chars", "summary_output_chars",
                                                   "reactive", "manual"]
    assert columns[at + len(TURN_COUNTERS):] == [
        "overflow", "violations_introduced", "violations_inherited", "cache_read_tokens", "cache_write_tokens",
        "input_cost_usd", "refs", "refs_retained", "probes", "probes_kept", "probes_recoverable"]

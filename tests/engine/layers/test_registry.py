"""The one registry of layers: each registers once, with its config beside it; a Policy's tables
and the cheap-layer order come from it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from compactlab.engine.layers import CHEAP, LAYERS, REGISTRY, register
from compactlab.engine.policy import CHEAP_LAYERS, SECTIONS, Policy, build_policy


def test_a_name_registers_once():
    with pytest.raises(ValueError, match="layer 'snip' is registered twice"):
        register("snip", object)(lambda context, config, env: (context, None))
    assert REGISTRY["snip"].run is LAYERS["snip"]  # the first registration stands


def test_each_config_lives_beside_its_layer_and_every_layer_takes_context_config_env():
    for name, layer in REGISTRY.items():
        assert layer.config.__module__ == layer.run.__module__ == f"compactlab.engine.layers.{name}"
        assert list(inspect.signature(layer.run).parameters) == ["context", "config", "env"], name


def test_a_policy_has_a_table_for_every_registered_layer():
    names = [f.name for f in dataclasses.fields(Policy)]
    assert names == ["name", "description", "brief", "order", *REGISTRY, "size"]
    assert list(SECTIONS) == [*REGISTRY, "size"]
    assert CHEAP_LAYERS == tuple(CHEAP) == tuple(n for n, layer in REGISTRY.items() if layer.cheap)
    policy = Policy()
    for name, layer in REGISTRY.items():
        assert getattr(policy, name) == layer.config()  # each table's defaults are its layer's


def test_order_takes_only_cheap_layers():
    from compactlab.errors import PolicyError

    assert build_policy({"order": ["micro", "budget"]}, "t").order == ["micro", "budget"]
    with pytest.raises(PolicyError, match="order.0"):
        build_policy({"order": ["reactive"]}, "t")


def test_the_counters_are_defined_once_and_flow_by_name():
    from compactlab.engine.layers import LayerStats
    from compactlab.engine.records import COUNTERS, RUN_COUNTERS, TURN_COUNTERS, RunSummary, PythonTurnRecord

    stats_fields = [f.name for f in dataclasses.fields(LayerStats)]
    assert stats_fields == [stat for stat, _, _ in COUNTERS] + ["lowest_changed"]
    turn_fields = {f.name for f in dataclasses.fields(PythonTurnRecord)}
    run_fields = {f.name for f in dataclasses.fields(RunSummary)}
    assert all(column in turn_fields for _, column in TURN_COUNTERS)
    assert all(key in run_fields for _, key in RUN_COUNTERS)
    a = LayerStats(**{stat: i + 1 for i, (stat, _, _) in enumerate(COUNTERS)}, lowest_changed=7)
    b = LayerStats(**{stat: 10 * (i + 1) for i, (stat, _, _) in enumerate(COUNTERS)}, lowest_changed=3)
    a.add(b)
    assert [getattr(a, stat) for stat, _, _ in COUNTERS] == [11 * (i + 1) for i in range(len(COUNTERS))]
    assert a.lowest_changed == 3
    untouched = LayerStats(snipped=2)
    untouched.add(LayerStats(snipped=5))  # changed nothing, failed nothing: nothing to add
    assert untouched.snipped == 2

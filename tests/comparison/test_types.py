"""The comparison's result types are frozen, slotted values, and its enums spell the
values the API maps to the proto."""

import dataclasses

import pytest

from evald_server import comparison

TYPES = [
    comparison.DeltaInterval,
    comparison.MetricComparison,
    comparison.PairedSamples,
    comparison.TaskComparison,
    comparison.UnmatchedTask,
    comparison.RunComparison,
    comparison.ModelPair,
    comparison.TaskRef,
]


@pytest.mark.parametrize("cls", TYPES, ids=[t.__name__ for t in TYPES])
def test_a_comparison_type_is_a_frozen_slotted_value(cls: type) -> None:
    fields = dataclasses.fields(cls)
    value = cls(**{f.name: None for f in fields})
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, fields[0].name, 1)
    assert not hasattr(value, "__dict__")


def test_the_enums_spell_the_api_values() -> None:
    assert [p.value for p in comparison.TaskPairing] == ["model_id", "model_position", "explicit"]
    assert [t.value for t in comparison.PairedTest] == ["mcnemar_exact", "permutation"]

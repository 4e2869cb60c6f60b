"""Which task is compared with which: the model pairing rules in order, their refusals
naming the field, and tasks matched by dataset name and version (pure functions)."""

import pytest

from evald_server.comparison import ModelPair, TaskPairing, TaskRef, match_tasks, pair_models
from evald_server.domain import InvalidArgument


@pytest.mark.parametrize(
    ("baseline", "candidate", "rule", "mapping"),
    [
        (["a", "b"], ["a", "b"], TaskPairing.MODEL_ID, {"a": "a", "b": "b"}),
        (["a", "b"], ["b"], TaskPairing.MODEL_ID, {"b": "b"}),  # a subset
        (["b"], ["a", "b"], TaskPairing.MODEL_ID, {"b": "b"}),
        (["a"], ["a"], TaskPairing.MODEL_ID, {"a": "a"}),
        (["a", "b"], ["c", "d"], TaskPairing.MODEL_POSITION, {"a": "c", "b": "d"}),
        (["a", "b"], ["a", "c"], TaskPairing.MODEL_POSITION, {"a": "a", "b": "c"}),
    ],
)
def test_models_pair_by_id_then_by_position(
    baseline: list[str], candidate: list[str], rule: TaskPairing, mapping: dict[str, str]
) -> None:
    assert pair_models(baseline, candidate) == (rule, mapping)


def test_models_that_pair_by_neither_rule_must_be_named() -> None:
    with pytest.raises(InvalidArgument) as caught:
        pair_models(["a", "b"], ["c"])
    error = caught.value
    assert [v.field for v in error.field_violations] == ["model_pairs"]
    assert error.metadata == {"field": "model_pairs"}
    assert "(a, b) and the candidate's (c) cannot be paired" in error.message


def test_explicit_pairs_win_over_the_other_rules() -> None:
    pairs = [ModelPair("a", "b"), ModelPair("b", "a")]
    assert pair_models(["a", "b"], ["a", "b"], pairs) == (
        TaskPairing.EXPLICIT,
        {"a": "b", "b": "a"},
    )


@pytest.mark.parametrize(
    ("pairs", "field", "said"),
    [
        ([ModelPair("x", "a")], "model_pairs[0].baseline_model_id", "not a model of the baseline"),
        (
            [ModelPair("a", "a"), ModelPair("b", "x")],
            "model_pairs[1].candidate_model_id",
            "'x' is not a model of the candidate run",
        ),
        ([ModelPair("a", "a"), ModelPair("a", "b")], "model_pairs[1]", "at most one pair"),
        ([ModelPair("a", "a"), ModelPair("b", "a")], "model_pairs[1]", "at most one pair"),
    ],
)
def test_explicit_pairs_are_checked_naming_the_pair(
    pairs: list[ModelPair], field: str, said: str
) -> None:
    with pytest.raises(InvalidArgument) as caught:
        pair_models(["a", "b"], ["a", "b"], pairs)
    assert [v.field for v in caught.value.field_violations] == [field]
    assert caught.value.metadata == {"field": field}
    assert said in caught.value.message


def _task(task_id: str, model: str, dataset: str, version: str = "1.0.0") -> TaskRef:
    return TaskRef(task_id, model, dataset, version)


def test_tasks_match_by_paired_model_dataset_and_version() -> None:
    baseline = [
        _task("b1", "a", "colours"),
        _task("b2", "a", "capitals"),
        _task("b3", "b", "colours"),  # its model has no pair
        _task("b4", "a", "shapes", "1.0.0"),
    ]
    candidate = [
        _task("c1", "x", "capitals"),
        _task("c2", "x", "colours"),
        _task("c3", "x", "shapes", "2.0.0"),  # another version
        _task("c4", "y", "colours"),
    ]
    matched, baseline_only, candidate_only = match_tasks(baseline, candidate, {"a": "x"})
    assert [(b.task_id, c.task_id) for b, c in matched] == [("b1", "c2"), ("b2", "c1")]
    assert [t.task_id for t in baseline_only] == ["b3", "b4"]
    assert [t.task_id for t in candidate_only] == ["c3", "c4"]

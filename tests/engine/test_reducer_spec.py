"""The run spec's reducers checked on their own (k against the repeat, names twice, the
list's bound) and against the datasets' task types; their names and stored form."""

import pytest

from evald_server.domain import InvalidArgument, TaskType
from evald_server.engine import DatasetRef, ReducerSpec, RunSpec, task_type_problems
from evald_server.engine._reducer_spec import MAX_REDUCERS, reducer_problems
from evald_server.scoring import Reducer

AT, HAT, MAJORITY, MEAN = Reducer.PASS_AT_K, Reducer.PASS_HAT_K, Reducer.MAJORITY, Reducer.MEAN


def test_names_and_stored_form() -> None:
    assert [r.name for r in (ReducerSpec(AT, 5), ReducerSpec(HAT, 3))] == ["pass@5", "pass^3"]
    assert [r.name for r in (ReducerSpec(MAJORITY), ReducerSpec(MEAN))] == ["majority", "mean"]
    assert ReducerSpec(AT, 5).to_json() == {"kind": "pass@k", "k": 5}
    assert ReducerSpec(MEAN).to_json() == {"kind": "mean"}
    for spec in (ReducerSpec(AT, 5), ReducerSpec(MEAN)):
        assert ReducerSpec.from_json(spec.to_json()) == spec
    assert ReducerSpec(HAT, 2).asked() == (HAT, 2)


@pytest.mark.parametrize(
    ("reducers", "repeat", "expected"),
    [
        ([ReducerSpec(AT, 1), ReducerSpec(AT, 4), ReducerSpec(HAT, 4)], 4, []),
        ([ReducerSpec(MAJORITY), ReducerSpec(MEAN)], 1, []),
        ([ReducerSpec(AT, 5)], 4, [("reducers[0].k", "more than the run's repeat (4)")]),
        ([ReducerSpec(HAT, None)], 4, [("reducers[0].k", "needs k")]),
        ([ReducerSpec(AT, 0)], 4, [("reducers[0].k", "at least 1, got 0")]),
        ([ReducerSpec(AT, True)], 4, [("reducers[0].k", "at least 1")]),  # type: ignore[arg-type]
        ([ReducerSpec(MEAN, 2)], 4, [("reducers[0].k", "takes no k, got 2")]),
        ([ReducerSpec(MEAN), ReducerSpec(MEAN)], 4, [("reducers[1]", "mean is listed twice")]),
        (
            [ReducerSpec(AT, 2), ReducerSpec(HAT, 2), ReducerSpec(AT, 2)],
            4,
            [("reducers[2]", "pass@2 is listed twice")],
        ),
        ([ReducerSpec("best")], 4, [("reducers[0].kind", "must be set")]),  # type: ignore[arg-type]
        # An entry refused for its k is not also counted as a name seen.
        (
            [ReducerSpec(AT, 0), ReducerSpec(AT, 0)],
            4,
            [("reducers[0].k", "at least 1"), ("reducers[1].k", "at least 1")],
        ),
        (
            [ReducerSpec(AT, 5), ReducerSpec(AT, 5)],
            4,
            [("reducers[0].k", "more than"), ("reducers[1].k", "more than")],
        ),
        (
            [ReducerSpec(MEAN, 2), ReducerSpec(MEAN, 2)],
            4,
            [("reducers[0].k", "takes no k"), ("reducers[1].k", "takes no k")],
        ),
    ],
)
def test_reducer_problems(
    reducers: list[ReducerSpec], repeat: int, expected: list[tuple[str, str]]
) -> None:
    problems = reducer_problems(reducers, repeat)
    assert [field for field, _ in problems] == [field for field, _ in expected]
    for (_, what), (_, words) in zip(problems, expected, strict=True):
        assert words in what


def test_the_list_is_bounded_by_the_spec() -> None:
    many = [ReducerSpec(AT, 1)] * (MAX_REDUCERS + 1)
    assert reducer_problems(many, 4) == []  # named once, as "reducers", by the spec
    at_the_bound = reducer_problems([ReducerSpec(MEAN)] * MAX_REDUCERS, 4)
    assert len(at_the_bound) == MAX_REDUCERS - 1  # still checked entry by entry
    with pytest.raises(InvalidArgument) as info:
        RunSpec(models=("m",), datasets=(DatasetRef("d", "1"),), repeat=4, reducers=tuple(many))
    assert [v.field for v in info.value.field_violations] == ["reducers"]
    distinct = tuple(ReducerSpec(kind, k) for kind in (AT, HAT) for k in range(1, 9))
    assert len(distinct) == MAX_REDUCERS
    spec = RunSpec(models=("m",), datasets=(DatasetRef("d", "1"),), repeat=8, reducers=distinct)
    assert spec.reducers == distinct


def test_task_types_that_cannot_give_a_reducer() -> None:
    datasets = [
        ("qa 1", TaskType.QA),
        ("ner 1", TaskType.NER),
        ("sums 1", TaskType.SUMMARIZATION),
    ]
    problems = task_type_problems([ReducerSpec(AT, 1), ReducerSpec(MAJORITY)], datasets)
    assert [field for field, _ in problems] == ["reducers[0]", "reducers[1]"]
    assert "sums 1 is summarization" in problems[0][1]
    # majority stops at the first dataset without an answer key (ner), one problem each
    assert "majority needs an answer key per sample; ner 1 is ner" in problems[1][1]
    fine = [("qa 1", TaskType.QA), ("mc 1", TaskType.MULTIPLE_CHOICE)]
    assert task_type_problems([ReducerSpec(MAJORITY), ReducerSpec(HAT, 2)], fine) == []
    assert task_type_problems([ReducerSpec(MEAN)], [("ner 1", TaskType.NER)]) == []
    # One problem per reducer however many datasets lack it; any iterable of datasets.
    twice = (("sums 1", TaskType.SUMMARIZATION), ("sums 2", TaskType.SUMMARIZATION))
    problems = task_type_problems([ReducerSpec(MEAN), ReducerSpec(AT, 1)], twice)
    assert [field for field, _ in problems] == ["reducers[0]", "reducers[1]"]
    mixed = iter((("qa 1", TaskType.QA), ("ner 1", TaskType.NER)))
    problems = task_type_problems([ReducerSpec(MEAN), ReducerSpec(MAJORITY)], mixed)
    assert [field for field, _ in problems] == ["reducers[1]"]

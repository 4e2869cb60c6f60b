"""CompareRuns against a real server: runs on simulated models of known accuracy."""

import pytest

import evald_client as ec
from tests.comparison._known_runs import RECORDS, KnownRuns


def test_a_weaker_model_is_a_significant_drop_on_every_dataset(runs: KnownRuns) -> None:
    with ec.EvaldClient(runs.address) as client:
        comparison = client.compare_runs(
            baseline_run_id=runs.baseline, candidate_run_id=runs.weaker, seed=3
        )
    assert comparison.task_pairing is ec.TaskPairing.MODEL_POSITION
    assert comparison.unmatched_tasks == ()
    assert [(t.dataset_name, t.candidate_model_id) for t in comparison.tasks] == [
        ("colours", "sim-60"),
        ("capitals", "sim-60"),
    ]
    colours, capitals = comparison.tasks
    assert colours.paired_samples == colours.paired_records == RECORDS
    assert {m.metric for m in colours.metrics} == {
        "accuracy", "f1_macro", "precision_macro", "recall_macro"
    }  # fmt: skip
    accuracy = colours.metric("accuracy")
    assert accuracy is not None
    assert accuracy.test is ec.PairedTest.MCNEMAR_EXACT
    assert 0.85 < accuracy.baseline_value < 0.95
    assert 0.52 < accuracy.candidate_value < 0.68
    assert accuracy.delta == pytest.approx(accuracy.candidate_value - accuracy.baseline_value)
    assert accuracy.delta_interval.lower <= accuracy.delta <= accuracy.delta_interval.upper < 0
    assert accuracy.p_value < 1e-6
    assert accuracy.records_improved + accuracy.records_worsened + accuracy.records_unchanged == (
        RECORDS
    )
    assert accuracy.records_worsened > accuracy.records_improved
    f1 = capitals.metric("f1")
    assert f1 is not None
    assert f1.test is ec.PairedTest.PERMUTATION
    assert f1.delta < 0
    assert f1.p_value < 0.001
    exact = capitals.metric("exact_match")
    assert exact is not None
    assert exact.test is ec.PairedTest.MCNEMAR_EXACT


def test_the_same_accuracy_under_another_seed_is_no_significant_change(runs: KnownRuns) -> None:
    with ec.EvaldClient(runs.address) as client:
        comparison = client.compare_runs(
            baseline_run_id=runs.baseline, candidate_run_id=runs.peer, seed=3
        )
        results = {r.benchmark.name: r for r in client.results(runs.baseline)}
    # The simulator's draws hash the run id, so each test session sees fresh data: under
    # H0 a p-value below 0.001 happens once in a thousand sessions per metric.
    for task in comparison.tasks:
        for metric in task.metrics:
            assert metric.p_value > 0.001, metric
            assert abs(metric.delta) < 0.1, metric
            # Nothing was excluded: the baseline's value is its result's headline figure.
            baseline = results[task.dataset_name].metrics[metric.metric]
            assert metric.baseline_value == pytest.approx(baseline, abs=1e-12)


def test_tasks_without_counterpart_are_reported_not_compared(runs: KnownRuns) -> None:
    with ec.EvaldClient(runs.address) as client:
        comparison = client.compare_runs(
            baseline_run_id=runs.baseline, candidate_run_id=runs.partial
        )
        again = client.compare_runs(baseline_run_id=runs.baseline, candidate_run_id=runs.partial)
    assert comparison == again  # seeded: the same request gives the same numbers
    assert comparison.task_pairing is ec.TaskPairing.MODEL_ID
    assert [t.dataset_name for t in comparison.tasks] == ["colours"]
    (colours,) = comparison.tasks
    assert colours.paired_samples == RECORDS
    assert len(colours.metrics) == 4
    unmatched = {(u.run_id, u.dataset_name) for u in comparison.unmatched_tasks}
    assert unmatched == {(runs.baseline, "capitals"), (runs.partial, "extra")}


def test_explicit_pairs_and_request_errors(runs: KnownRuns) -> None:
    with ec.EvaldClient(runs.address) as client:
        explicit = client.compare_runs(
            baseline_run_id=runs.baseline,
            candidate_run_id=runs.weaker,
            model_pairs=[("sim-90a", "sim-60")],
        )
        assert explicit.task_pairing is ec.TaskPairing.EXPLICIT
        with pytest.raises(ec.InvalidArgument, match="not a model of the candidate run") as bad:
            client.compare_runs(
                baseline_run_id=runs.baseline,
                candidate_run_id=runs.weaker,
                model_pairs=[("sim-90a", "sim-90b")],
            )
        assert bad.value.field_violations[0].field == "model_pairs[0].candidate_model_id"
        with pytest.raises(ec.NotFound, match="RUN_NOT_FOUND"):
            client.compare_runs(baseline_run_id=runs.baseline, candidate_run_id="run_missing")
        with pytest.raises(ec.InvalidArgument, match="candidate_run_id is required"):
            client.compare_runs(baseline_run_id=runs.baseline, candidate_run_id="")
        with pytest.raises(ec.InvalidArgument, match="resamples must be between"):
            client.compare_runs(
                baseline_run_id=runs.baseline, candidate_run_id=runs.peer, resamples=10**6
            )

"""The dashboard folded from events, drawn for a terminal and as plain lines."""

import io
import json

from rich.console import Console

from evald.v1 import result_pb2
from evald_cli._dashboard import Dashboard, RunView, render
from evald_cli._render import jsonable, results_tables
from evald_client import RunState, SampleFailed, TaskScored
from evald_client._convert_events import event_from_proto
from evald_client._convert_results import result_from_proto
from evald_client._convert_runs import run_from_proto
from tests.client import _protos


def _events(run_id: str = "r-1") -> list:
    return [event_from_proto(e) for e in _protos.event_log(run_id)]


def test_the_view_folds_every_event_kind() -> None:
    view = RunView.of(run_from_proto(_protos.run("r-1")))
    for event in _events():
        view.apply(event)
    assert view.state is RunState.PARTIAL
    assert view.counts.finished == 20
    assert view.fraction == 1.0
    assert view.eta_s == 0.0
    assert set(view.scored) == {"t-1", "t-2"}
    assert [f.record_id for f in view.failures] == ["rec-9"]
    latency = view.model_latency()
    assert latency["sim-a"] == (58.0, 95.5, 9)


def test_failures_keep_only_the_latest_five_but_count_all() -> None:
    view = RunView.of(run_from_proto(_protos.run("r-1")))
    failed = next(e for e in _events() if isinstance(e, SampleFailed))
    for index in range(8):
        view.apply(
            SampleFailed(
                seq=100 + index,
                run_id="r-1",
                event_time=None,
                task_id="t-2",
                subtask_id=f"s-{index}",
                record_id=f"rec-{index}",
                repeat_index=0,
                model_id="sim-b",
                attempts=2,
                error=failed.error,
            )
        )
    assert [f.record_id for f in view.failures] == [f"rec-{i}" for i in range(3, 8)]
    assert view.failure_count == 8


def test_model_latency_weights_p50_by_samples_and_takes_the_worst_p99() -> None:
    view = RunView.of(run_from_proto(_protos.run("r-1")))
    a = _protos.result("t-1", "sim-a")
    b = _protos.result("t-2", "sim-a")
    b.execution_profile.latency_p50_ms = 100.0
    b.execution_profile.latency_p99_ms = 400.0
    b.execution_profile.samples_succeeded = 27
    for seq, proto in enumerate((a, b), start=1):
        result = result_from_proto(proto)
        view.apply(TaskScored(seq=seq, run_id="r-1", event_time=None, result=result))
    p50, p99, samples = view.model_latency()["sim-a"]
    assert p50 == (9 * 58.0 + 27 * 100.0) / 36
    assert p99 == 400.0
    assert samples == 36


def test_terminal_rendering_shows_tasks_latency_and_failures() -> None:
    view = RunView.of(run_from_proto(_protos.run("r-1")))
    for event in _events()[:-3]:  # before the tasks are scored
        view.apply(event)
    console = Console(file=io.StringIO(), width=140, force_terminal=True, record=True)
    console.print(render(view))
    text = console.export_text()
    assert "run r-1" in text
    assert "running" in text
    assert "ETA 0s" in text
    assert "sim-a" in text
    assert "sentiment@1.0" in text
    assert "latest failures (1 in all)" in text
    assert "PROVIDER_TIMEOUT" in text
    assert "latency per model" not in text  # nothing scored yet
    for event in _events()[-3:]:
        view.apply(event)
    console.print(render(view))
    assert "latency per model (scored tasks)" in console.export_text()


def test_plain_lines_when_stdout_is_not_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    dashboard = Dashboard(console, run_from_proto(_protos.run("r-1")))
    with dashboard.showing():
        for event in _events():
            dashboard.apply(event)
    lines = out.getvalue().splitlines()
    assert lines[0] == "watching run r-1 (20 samples)"
    assert lines[1:3] == ["run r-1: pending", "run r-1: running"]
    progress = [line for line in lines if line.startswith("progress ")]
    # One line per new tenth: 4, 8, 12, 16, 20 of 20 done.
    assert [line.split(" ")[1] for line in progress] == ["4/20", "8/20", "12/20", "16/20", "20/20"]
    assert progress[-1] == "progress 20/20 (100%): 20 ok, 0 failed, 4.0/s, ETA 0s"
    assert any(line.startswith("failed sim-b record rec-9 after 4 attempts") for line in lines)
    assert lines[-1] == "run r-1: partial"
    assert "\x1b[" not in out.getvalue()  # no escape codes in a log


def test_results_tables_group_by_dataset_and_json_names_the_payload_kind() -> None:
    results = [result_from_proto(_protos.result(f"t-{i}", f"m-{i}")) for i in range(3)]
    tables = results_tables(results)
    assert len(tables) == 1
    assert [c.header for c in tables[0].columns][:4] == ["model", "status", "accuracy", "f1_macro"]
    data = json.loads(json.dumps(jsonable(results)))
    assert data[0]["payload"]["kind"] == "classification"
    assert data[0]["task_type"] == "classification"
    assert data[0]["execution"]["ttft_p99_ms"] is None


def test_results_tables_show_the_reducers_with_their_interval_and_skipped_records() -> None:
    plain = _protos.result("t-1", "m-1")
    reduced = _protos.result("t-2", "m-2")
    reduced.reduced_metrics.add(
        name="pass@5",
        value=0.8125,
        interval=result_pb2.MetricInterval(lower=0.7, upper=0.9),
        records=16,
        records_skipped=2,
    )
    (table,) = results_tables([result_from_proto(r) for r in (plain, reduced)])
    headers = [c.header for c in table.columns]
    assert "pass@5" in headers
    cells = [str(c) for c in table.columns[headers.index("pass@5")].cells]
    assert cells == ["", "0.812\n0.70–0.90\n2 skipped"]
    assert table.title == "sentiment@1.0 (classification)"
    for result in (plain, reduced):
        result.provenance.rescored_from_run_id = "run-src"
    (table,) = results_tables([result_from_proto(r) for r in (plain, reduced)])
    assert table.title == "sentiment@1.0 (classification), rescored from run-src"


def test_a_task_without_answered_samples_shows_no_latency() -> None:
    answered = _protos.result("t-1", "m-ok")
    failed = _protos.result("t-2", "m-down")
    failed.execution_profile.samples_succeeded = 0
    failed.execution_profile.samples_failed = 10
    for field in ("latency_mean_ms", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms"):
        setattr(failed.execution_profile, field, 0.0)
    (table,) = results_tables([result_from_proto(r) for r in (answered, failed)])
    headers = [c.header for c in table.columns]
    p50, p99 = (list(table.columns[headers.index(h)].cells) for h in ("p50 ms", "p99 ms"))
    assert (p50, p99) == (["58", ""], ["96", ""])  # blank, not a measured 0

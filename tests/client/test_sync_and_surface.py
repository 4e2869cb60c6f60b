"""The blocking client, and the pinned public surface of evald_client."""

import inspect
import subprocess
import sys
import threading
import typing

import pytest

import evald_client as ec
from tests.client import _protos
from tests.client._servicer import FakeEvaluationService, WatchCut

FAST = ec.ReconnectPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.02)


def test_sync_client_mirrors_the_async_one(servicer: FakeEvaluationService, address: str) -> None:
    for index in range(5):
        servicer.add_run(_protos.run(f"r-{index}"))
    servicer.watch_cuts = [WatchCut(after_events=4)]
    with ec.EvaldClient(address, reconnect=FAST) as client:
        assert [m.model_id for m in client.list_models()] == ["sim-a", "sim-b"]
        assert [r.run_id for r in client.list_runs(page_size=2)] == [f"r-{i}" for i in range(5)]
        events = list(client.watch("r-1"))
        assert [e.seq for e in events if not isinstance(e, ec.Heartbeat)] == [
            e.seq for e in servicer.events["r-1"]
        ]
        dataset = client.upload_dataset(
            name="n", version="1", task_type="qa", records=[{"question": "q", "answers": ["a"]}]
        )
        assert dataset.record_count == 1
        assert len(client.results("r-1")) == 2
        with pytest.raises(ec.NotFound, match="RUN_NOT_FOUND"):
            client.get_run("r-missing")


def test_sync_iterator_can_be_abandoned_and_the_client_closed_twice(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-1"))
    client = ec.EvaldClient(address)
    events = client.watch("r-1")
    first = next(iter(events))
    assert isinstance(first, ec.Heartbeat)
    events.close()  # type: ignore[attr-defined]
    assert client.get_run("r-1").run_id == "r-1"
    client.close()
    client.close()


def test_sync_client_serves_several_threads(servicer: FakeEvaluationService, address: str) -> None:
    servicer.add_run(_protos.run("r-1"))
    seen: list[str] = []
    with ec.EvaldClient(address) as client:
        threads = [
            threading.Thread(target=lambda: seen.append(client.get_run("r-1").run_id))
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert seen == ["r-1"] * 4


EXPECTED_PUBLIC = {
    "AlreadyExists", "AsyncEvaldClient", "BenchmarkRef", "Budget", "ChoiceLetterStats",
    "ChoiceContinuation", "ChoiceScoring", "Cost", "RetryCounts", "PromptFormat",
    "ClassMetrics", "ClassificationPayload", "ConfusionMatrix", "Dataset", "DatasetInvalid",
    "DatasetOptions", "DatasetRef", "DeadlineExceeded", "EntityTypeMetrics", "ErrorCategory",
    "EvalError", "EvaldClient", "EvaldError", "ExecutionProfile", "ExtractionRuleCount",
    "FailedPrecondition", "FieldViolation", "FinishReason", "GenerationParams",
    "GenerationPayload", "Heartbeat", "InternalError", "IntervalMethod", "InvalidArgument",
    "MatchModeStats", "MetricComparison", "MetricInterval", "MetricUncertainty", "Model",
    "ModelActivity", "ModelIdentity", "ModelPair", "MultipleChoicePayload", "NerPayload",
    "NotFound", "OutOfRange", "PairedTest", "Payload", "PermissionDenied", "Progress",
    "PromptOptions", "Provenance", "ProviderError", "QaPayload", "ReconnectPolicy", "ReducedMetric",
    "Reducer", "ReducerKind", "RepeatStats",
    "ResourceExhausted", "ResultStatus", "RetryOutcome", "RetryPolicy", "RougeScore", "Run",
    "RunComparison", "RunEvent", "RunProgress", "RunSpec", "RunState", "Sample", "SampleFailed",
    "ShotFormat", "StateChanged", "SubjectAccuracy", "SubtaskCounts", "SubtaskState",
    "SummarizationPayload", "TaskComparison", "TaskPairing", "TaskProgress", "TaskResult",
    "TaskScored", "TaskState", "TaskType", "TlsConfig", "Unauthenticated", "Unavailable",
    "UnmatchedTask", "WorstExample",
    # Model-graded scoring (issue 16).
    "JudgeOptions", "JudgeProvenance", "JudgeScoreFormat", "SampleJudgement",
    # Code tasks (issue 26).
    "CodeExecution", "CodeTestOutcome", "CodePayload", "CodeVerdictCount", "PassAtK",
    # Tool calls and structured outputs (issue 27).
    "StructuredOutputPayload", "ToolCallPayload",
}  # fmt: skip


def test_public_surface_is_pinned() -> None:
    assert set(ec.__all__) == EXPECTED_PUBLIC
    assert sorted(ec.__all__) == ec.__all__
    for name in ec.__all__:
        obj = getattr(ec, name)
        if name != "Payload":  # a union alias
            assert obj.__module__.startswith("evald_client._"), name


@pytest.mark.parametrize("cls", [ec.AsyncEvaldClient, ec.EvaldClient])
def test_no_generated_type_in_public_signatures(cls: type) -> None:
    async_methods = {n for n, _ in inspect.getmembers(ec.AsyncEvaldClient) if not n.startswith("_")}
    sync_methods = {n for n, _ in inspect.getmembers(ec.EvaldClient) if not n.startswith("_")}
    assert async_methods == sync_methods
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_") and name != "__init__":
            continue
        hints = typing.get_type_hints(member)
        assert "pb2" not in repr(hints), name
        params = list(inspect.signature(member).parameters.values())[1:]
        positional = [p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert positional in ([], ["run_id"], ["target"]), (name, positional)


def test_the_sdk_imports_nothing_of_the_server() -> None:
    code = (
        "import sys, evald_client; "
        "bad = sorted(m for m in sys.modules if m.startswith('evald_server')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stdout


def test_a_script_that_forgets_close_still_exits(address: str) -> None:
    code = (
        "import sys\n"
        "from evald_client import EvaldClient\n"
        f"client = EvaldClient({address!r})\n"
        "print(len(client.list_models()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "2\n"

"""The public surface of the engine, store and application packages, pinned."""

import evald_server.app
import evald_server.engine
import evald_server.store


def test_the_engine_exports() -> None:
    assert sorted(evald_server.engine.__all__) == sorted(
        [
            "CONTRACT_VERSION", "MODEL_LIMIT", "RUN_LIMIT", "SERVER_LIMIT", "BenchmarkRef",
            "DatasetRef", "Engine", "EventHub", "ExecutionProfile", "LaneState", "Limit",
            "LimitStats", "Limiter", "ModelActivity", "ModelIdentity", "Provenance",
            "RateControl", "RateSettings", "RateStats",
            "RetryPolicy", "RunEvent", "RunProgress",
            "RunSpec", "SampleFailure", "ScoringPort", "TaskContext", "TaskEvaluation",
            "TaskProgress", "build_profile", "check_limit", "generation_params", "percentile",
            "task_outcome", "DatasetOptions", "ShotSourceProblem", "shot_source", "task_prompt",
        ]
    )  # fmt: skip


def test_the_application_exports() -> None:
    assert sorted(evald_server.app.__all__) == sorted(
        [
            "DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "MAX_UPLOAD_BYTES", "Dataset", "DatasetHeader",
            "DatasetRef", "Evald", "ExecutionProfile", "LimitStats", "ModelActivity", "ModelInfo",
            "Page",
            "RetryPolicy", "Run", "RunEvent", "RunProgress", "RunSpec", "Sample",
            "SampleFailure", "TaskEvaluation", "TaskProgress",
        ]
    )  # fmt: skip


def test_every_exported_name_exists() -> None:
    for module in (evald_server.app, evald_server.engine, evald_server.store):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
    assert "SqliteStore" in evald_server.store.__all__
    assert "Store" in evald_server.store.__all__

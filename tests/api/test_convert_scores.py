"""Every scorer's report converts to TaskEvaluationResult field for field."""

import dataclasses

import pytest
from google.protobuf import json_format

from evald.v1 import result_pb2
from evald_server.api._convert_scores import apply_score_report
from evald_server.domain import TaskType
from evald_server.scoring import ScoringSample, score_task
from tests.scoring.test_intervals import STRUCTURED_RECORD, TOOL_ANSWERS, TOOL_RECORD

RECORDS = {
    TaskType.CLASSIFICATION: ({"input": "x", "label": "a", "choices": ["a", "b"]}, "b"),
    TaskType.QA: ({"question": "q", "answers": ["a lamp"]}, "lamp"),
    TaskType.NER: ({"tokens": ["Ann", "ran"], "tags": ["B-PER", "O"]}, "[]"),
    TaskType.SUMMARIZATION: ({"document": "d one. d two.", "summary": "d one"}, "d two"),
    TaskType.GENERATION: ({"input": "2+2", "reference": "#### 4", "match": "numeric"}, "5"),
    TaskType.MULTIPLE_CHOICE: (
        {
            "question": "q",
            "choices": ["x", "y", "z"],
            "answer_index": 2,
            "metadata": {"subject": "s"},
        },
        "B",
    ),
    # Code: no stored sandbox run here, so every sample counts as an error (not run).
    TaskType.CODE: (
        {"prompt": "def f():\n", "test": "def check(c):\n    pass\n", "entry_point": "f"},
        "```python\ndef f():\n    return 1\n```",
    ),
    TaskType.TOOL_CALL: (TOOL_RECORD, TOOL_ANSWERS[1]),
    TaskType.STRUCTURED_OUTPUT: (STRUCTURED_RECORD, '{"a": "1"}'),
}
ONEOF = {
    TaskType.CLASSIFICATION: "classification",
    TaskType.QA: "qa",
    TaskType.NER: "ner",
    TaskType.SUMMARIZATION: "summarization",
    TaskType.GENERATION: "generation",
    TaskType.MULTIPLE_CHOICE: "multiple_choice",
    TaskType.CODE: "code",
    TaskType.TOOL_CALL: "tool_call",
    TaskType.STRUCTURED_OUTPUT: "structured_output",
}


@pytest.mark.parametrize("task_type", list(TaskType))
def test_payload_metrics_and_repeats_survive_conversion(task_type: TaskType) -> None:
    record, wrong = RECORDS[task_type]
    samples = [
        ScoringSample(f"s{i}-{r}", f"r{i}", r, record, wrong if (i + r) % 2 else None)
        for i in range(4)
        for r in range(2)
    ]
    samples = [dataclasses.replace(s, output=s.output or "a") for s in samples]
    report = score_task(task_type, samples, seed=3, resamples=50)
    result = result_pb2.TaskEvaluationResult()
    apply_score_report(report, result)

    assert result.WhichOneof("payload") == ONEOF[task_type]
    assert dict(result.metrics_summary) == report.metrics
    assert set(result.metric_uncertainty) == set(report.uncertainty)
    for name, uncertainty in report.uncertainty.items():
        assert result.metric_uncertainty[name].bootstrap.lower == uncertainty.bootstrap.lower
        assert result.metric_uncertainty[name].bootstrap.upper == uncertainty.bootstrap.upper
    assert report.repeat is not None
    assert result.repeat_stats.repeats == report.repeat.repeats
    payload = json_format.MessageToDict(
        getattr(result, ONEOF[task_type]), preserving_proto_field_name=True
    )
    expected = dataclasses.asdict(report.payload)
    worst = expected.pop("worst_examples")
    assert len(payload.get("worst_examples", [])) == len(worst)
    for example, converted in zip(worst, payload.get("worst_examples", []), strict=True):
        assert converted["record_id"] == example["record_id"]
        assert converted.get("output", "") == example["output"]
    if task_type is TaskType.CLASSIFICATION:
        assert [c["label"] for c in payload["per_class"]] == [
            c["label"] for c in expected["per_class"]
        ]
        assert payload["confusion_matrix"]["labels"] == list(expected["labels"])
    elif task_type is TaskType.GENERATION:
        assert [m["match_mode"] for m in payload["match_modes"]] == [
            m["match_mode"] for m in expected["per_mode"]
        ]
    else:
        for key, value in expected.items():
            if isinstance(value, tuple):
                assert len(payload.get(key, [])) == len(value), key
            else:
                assert getattr(getattr(result, ONEOF[task_type]), key) == pytest.approx(value), key

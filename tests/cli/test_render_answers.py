"""The samples and results tables show why generation stopped and what was cut."""

import io

from rich.console import Console

from evald.v1 import sample_pb2
from evald_cli._render import results_tables, samples_table
from evald_client import FinishReason
from evald_client._convert_results import result_from_proto
from evald_client._convert_runs import sample_from_proto
from tests.client import _protos


def _text(table: object) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(table)
    return out.getvalue()


def test_the_samples_table_has_a_stop_column() -> None:
    cut = _protos.sample(1)
    cut.finish_reason = sample_pb2.FINISH_REASON_LENGTH
    cut.usage_reported = True
    old = _protos.sample(2)  # from a server before finish_reason was kept
    samples = [sample_from_proto(m) for m in (cut, old)]
    assert samples[0].finish_reason is FinishReason.LENGTH
    assert samples[1].finish_reason is FinishReason.UNSPECIFIED
    # An old server's real counts stay known; only a 1.1 server can say "unknown".
    assert samples[1].prompt_tokens == 10
    unknown = _protos.sample(3)
    unknown.prompt_tokens = unknown.completion_tokens = 0
    assert sample_from_proto(unknown).prompt_tokens is None
    table = samples_table(samples, {})
    assert [c.header for c in table.columns][3:5] == ["output", "stop"]
    rows = _text(table).splitlines()
    assert any("rec-1" in row and "length" in row for row in rows)


def test_the_results_table_shows_cut_and_empty_answers() -> None:
    message = _protos.result("t-1", "m-1")
    message.execution_profile.samples_truncated = 4
    message.execution_profile.samples_empty = 1
    (table,) = results_tables([result_from_proto(message)])
    assert "cut/empty" in [c.header for c in table.columns]
    assert "4/1" in _text(table)


def test_the_results_table_shows_the_judges_coverage_as_counts() -> None:
    graded, short = (_protos.result(f"t-{i}", f"m-{i}") for i in (1, 2))
    for message, judged in ((graded, 20), (short, 17)):
        message.metrics_summary["judge_pass_rate"] = 0.5
        message.metrics_summary["judge_coverage"] = judged / 20
        message.provenance.judge.model.model_id = "judge"
        message.provenance.judge.judged_samples = judged
        message.provenance.judge.unjudged_samples = 20 - judged
    (table,) = results_tables([result_from_proto(m) for m in (graded, short)])
    headers = [c.header for c in table.columns]
    assert "judge_pass_rate" in headers
    assert "judge_coverage" not in headers, "shown with the counts, not as a score"
    answered = [str(cell) for cell in table.columns[headers.index("ok/total")].cells]
    assert answered[0].count("judged") == 0, "every answer judged: nothing to say"
    assert answered[1].endswith("\njudged 17/20")

"""lm-eval's multiple-choice picks from stored loglikelihoods: acc, acc_norm (by the
choice's characters) and acc_bytes (by its UTF-8 bytes), ties to the first choice."""

import numpy as np
import pytest

from evald_server.domain import TaskType
from evald_server.scoring import LOGLIKELIHOOD_MARK, ScoringSample, continuation_entries, score_task
from evald_server.scoring._loglikelihood import is_loglikelihood, pick


def _lm_eval(choices: list[str], lls: list[float]) -> tuple[int, int, int]:
    """lm_eval/api/task.py (0.4.x, process_results for multiple_choice), verbatim."""
    completion_len = np.array([float(len(i)) for i in choices])
    byte_length = np.array([float(len(i.encode("utf-8"))) for i in choices])
    values = np.array(lls)
    return (
        int(np.argmax(values)),
        int(np.argmax(values / completion_len)),
        int(np.argmax(values / byte_length)),
    )


@pytest.mark.parametrize(
    ("choices", "lls"),
    [
        (["A", "B", "C", "D"], [-1.0, -0.5, -2.0, -0.5]),  # a tie: the first
        (["cat", "elephant"], [-2.0, -4.0]),
        (["Zürich", "Bern", "Basel"], [-2.9, -2.0, -2.2]),
        (["ja", "日本語", "x"], [-3.0, -4.4, -1.6]),
        (["a", "b"], [-0.0, -0.0]),
    ],
)
def test_picks_equal_lm_evals(choices: list[str], lls: list[float]) -> None:
    entries = continuation_entries([f" {c}" for c in choices], lls)
    picked = pick(entries, len(choices))
    assert picked is not None
    assert (picked.acc, picked.acc_norm, picked.acc_bytes) == _lm_eval(choices, lls)


def test_the_mark_tells_a_loglikelihood_sample_apart() -> None:
    assert is_loglikelihood(continuation_entries([" A"], [-1.0]))
    assert not is_loglikelihood(((" A", -1.0),))  # first-token alternatives
    assert not is_loglikelihood(())
    assert not is_loglikelihood(None)
    assert LOGLIKELIHOOD_MARK[1] > 0  # no provider log-probability can be positive


def test_a_sample_without_one_value_per_choice_is_unmapped() -> None:
    record = {"question": "q", "choices": ["w", "x", "y"], "answer_index": 1}
    short = continuation_entries([" A", " B"], [-1.0, -0.5])
    assert pick(short, 3) is None
    sample = ScoringSample("s1", "r1", 0, record, "", top_logprobs=short)
    report = score_task(TaskType.MULTIPLE_CHOICE, [sample])
    assert report.metrics["unmapped_rate"] == 1.0
    assert report.metrics["acc"] == 0.0

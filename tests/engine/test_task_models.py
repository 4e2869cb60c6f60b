"""The models a task calls, as CreateRun froze them (engine/_task_models.py): the stored
shape every task already has — the answering model's identity, the judge's under
"judge" — read and written by one type."""

from evald_server.config import GenerationParams, Price
from evald_server.engine import ModelIdentity, TaskModels

ANSWER = ModelIdentity("m", "openai", "llama", GenerationParams(temperature=0.0, max_tokens=8))
JUDGE = ModelIdentity(
    "j",
    "openai",
    "judge-model",
    GenerationParams(temperature=0.0),
    Price(input_per_million=1.0, output_per_million=2.0),
)


def test_a_judged_task_round_trips_with_the_judge_beside_the_answering_model() -> None:
    models = TaskModels(ANSWER, JUDGE)
    stored = models.to_json()
    assert stored["model_id"] == "m"
    assert stored["judge"] == JUDGE.to_json()
    assert TaskModels.from_json(stored) == models
    assert models.model_ids == ("m", "j")


def test_a_task_stored_without_a_judge_reads_as_one_model() -> None:
    stored = ANSWER.to_json()  # what a task of an unjudged run holds
    assert "judge" not in TaskModels(ANSWER).to_json()
    assert TaskModels.from_json(stored) == TaskModels(ANSWER, None)
    assert TaskModels.from_json(stored).model_ids == ("m",)

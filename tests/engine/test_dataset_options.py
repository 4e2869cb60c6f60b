"""Per-dataset run settings: precedence, validation, and the stored JSON form."""

import pytest

from evald_server.config import GenerationParams
from evald_server.datasets import PromptOptions
from evald_server.domain import ChoiceScoring, InvalidArgument, TaskType
from evald_server.engine import DatasetOptions, DatasetRef, RunSpec

MMLU, GSM = DatasetRef("mmlu", "1.0.0"), DatasetRef("gsm", "1.0.0")
MODEL = GenerationParams(temperature=0.7, max_tokens=512, stop=("###",))


def _spec(*options: DatasetOptions, **fields: object) -> RunSpec:
    return RunSpec(models=("m",), datasets=(MMLU, GSM), dataset_options=options, **fields)  # type: ignore[arg-type]


def test_model_then_run_then_dataset_field_by_field() -> None:
    spec = _spec(
        DatasetOptions("mmlu", "1.0.0", params=GenerationParams(max_tokens=2)),
        params=GenerationParams(temperature=0.0),
    )
    mmlu = spec.params_for(MODEL, MMLU, TaskType.MULTIPLE_CHOICE)
    gsm = spec.params_for(MODEL, GSM, TaskType.GENERATION)
    assert (mmlu.temperature, mmlu.max_tokens, mmlu.stop) == (0.0, 2, ("###",))
    assert (gsm.temperature, gsm.max_tokens, gsm.stop) == (0.0, 512, ("###",))


def test_logprob_scoring_generates_one_token_unless_the_dataset_says_otherwise() -> None:
    run_wide = _spec(choice_scoring=ChoiceScoring.LOGPROBS)
    assert run_wide.params_for(MODEL, MMLU, TaskType.MULTIPLE_CHOICE).max_tokens == 1
    assert run_wide.params_for(MODEL, GSM, TaskType.GENERATION).max_tokens == 512
    explicit = _spec(
        DatasetOptions(
            "mmlu",
            "1.0.0",
            params=GenerationParams(max_tokens=3),
            choice_scoring=ChoiceScoring.LOGPROBS,
        )
    )
    assert explicit.params_for(MODEL, MMLU, TaskType.MULTIPLE_CHOICE).max_tokens == 3
    text = _spec(
        DatasetOptions("mmlu", "1.0.0", choice_scoring=ChoiceScoring.TEXT),
        choice_scoring=ChoiceScoring.LOGPROBS,
    )
    assert text.choice_scoring_for(MMLU) is ChoiceScoring.TEXT
    assert text.params_for(MODEL, MMLU, TaskType.MULTIPLE_CHOICE).max_tokens == 512


def test_prompt_precedence_and_json_round_trip() -> None:
    mine = PromptOptions(shots=5, shots_from=("mmlu-dev", "1.0.0"), shot_seed=3)
    spec = _spec(
        DatasetOptions("mmlu", "1.0.0", prompt=mine),
        prompt=PromptOptions(system_message="Be brief."),
        choice_scoring=ChoiceScoring.LOGPROBS,
    )
    assert spec.prompt_for(MMLU) == mine
    assert spec.prompt_for(GSM) == PromptOptions(system_message="Be brief.")
    assert RunSpec.from_json(spec.to_json()) == spec


def test_a_spec_without_them_keeps_its_json_and_body_hash() -> None:
    plain = RunSpec(models=("m",), datasets=(MMLU,))
    assert set(plain.to_json()).isdisjoint({"dataset_options", "prompt", "choice_scoring"})


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ((DatasetOptions("other", "1.0.0"),), "dataset_options[0].dataset"),
        (
            (DatasetOptions("mmlu", "1.0.0"), DatasetOptions("mmlu", "1.0.0")),
            "dataset_options[1].dataset",
        ),
        (
            (DatasetOptions("mmlu", "1.0.0", prompt=PromptOptions(shots=33)),),
            "dataset_options[0].prompt.shots",
        ),
        (
            (DatasetOptions("mmlu", "1.0.0", prompt=PromptOptions(shots_from=("dev", "1"))),),
            "dataset_options[0].prompt.shots_from",
        ),
    ],
)
def test_bad_entries_are_named(options: tuple[DatasetOptions, ...], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        _spec(*options)
    assert field in {v.field for v in caught.value.field_violations}

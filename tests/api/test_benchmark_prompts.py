"""Benchmark runs through the real server, SDK and fake provider: multiple choice, chat
prompts (system message, k-shot examples from the dataset or a dev split, one message or
chat turns, all in the prompt hash) and per-dataset generation settings."""

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest

from evald.v1 import dataset_pb2, enums_pb2, run_pb2, service_pb2
from evald_client import (
    AlreadyExists,
    AsyncEvaldClient,
    ChoiceScoring,
    DatasetInvalid,
    DatasetOptions,
    DatasetRef,
    GenerationParams,
    InvalidArgument,
    MultipleChoicePayload,
    NotFound,
    PromptOptions,
    ResultStatus,
    ShotFormat,
)
from evald_server.fake_provider import FakeChatRequest, FakeProvider
from tests._shared import jsonl
from tests.api._support import assert_reason, chunk, fails, header, raw_stub
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

SUBJECTS = ["anatomy", "law"]


def mc_records(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{prefix}{i}",
            "question": f"{prefix} question {i}?",
            "choices": [f"{prefix}{i} w", f"{prefix}{i} x", f"{prefix}{i} y", f"{prefix}{i} z"],
            "answer_index": i % 4,
            "metadata": {"subject": SUBJECTS[i % 2]},
        }
        for i in range(n)
    ]


GSM = [
    {
        "id": "g0",
        "input": "Question: 2 + 3?\nAnswer:",
        "reference": "2 + 3 = 5\n#### 5",
        "match": "numeric",
    },
    {
        "id": "g1",
        "input": "Question: 4 * 5?\nAnswer:",
        "reference": "4 * 5 = 20\n#### 20",
        "match": "numeric",
    },
]
_QUESTION = re.compile(r"(mc|dev) question (\d+)\?\nA\.")


class Recorder:
    """The fake model: answers each MC question with its gold letter when the record
    number is even, "D" otherwise; a generation prompt with "20"; records every request."""

    def __init__(self) -> None:
        self.requests: list[FakeChatRequest] = []

    def __call__(self, chat: FakeChatRequest) -> str:
        self.requests.append(chat)
        asked = _QUESTION.findall(str(chat.messages[-1]["content"]))
        if not asked:
            return "so the answer is 20"
        number = int(asked[-1][1])
        return f"Answer: {'ABCD'[number % 4] if number % 2 == 0 else 'D'}"

    def for_record(self, prefix: str, number: int) -> FakeChatRequest:
        return next(
            r
            for r in self.requests
            if _QUESTION.findall(str(r.messages[-1]["content"]))[-1:] == [(prefix, str(number))]
        )


async def _upload(client: AsyncEvaldClient, **extra: Any) -> None:
    await client.upload_dataset(
        name="mc",
        version="1.0.0",
        task_type="multiple_choice",
        records=mc_records("mc", 8),
        **extra,
    )
    await client.upload_dataset(
        name="dev", version="1.0.0", task_type="multiple_choice", records=mc_records("dev", 3)
    )
    await client.upload_dataset(name="gsm", version="1.0.0", task_type="generation", records=GSM)


def _messages(chat: FakeChatRequest) -> list[tuple[str, str]]:
    return [(str(m["role"]), str(m["content"])) for m in chat.messages]


async def test_chat_turns_from_the_dataset_and_per_dataset_generation(tmp_path: Path) -> None:
    recorder = Recorder()
    async with FakeProvider(answer=recorder) as fake:
        model = fake.model_config("fake-m", params={"max_tokens": 64, "temperature": 0.7})
        config = make_config(tmp_path, models=[model.model_dump(mode="json")])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            options = PromptOptions(
                system_message="You are an expert.",
                shots=2,
                shot_seed=7,
                shot_format=ShotFormat.CHAT_TURNS,
            )
            await _upload(client, prompt=options)
            stored = await client.get_dataset(name="mc", version="1.0.0")
            assert stored.prompt == options
            run = await client.create_run(
                models=["fake-m"],
                datasets=[("mc", "1.0.0"), ("gsm", "1.0.0")],
                generation=GenerationParams(temperature=0.0),
                dataset_options=[
                    DatasetOptions(
                        dataset=DatasetRef("mc", "1.0.0"),
                        generation=GenerationParams(max_tokens=3),
                    ),
                    DatasetOptions(
                        dataset=DatasetRef("gsm", "1.0.0"),
                        generation=GenerationParams(stop=("\n\n",)),
                    ),
                ],
            )
            assert len(run.spec.dataset_options) == 2
            await client.wait(run.run_id, timeout_s=60)
            results = {r.benchmark.name: r for r in await client.results(run.run_id)}
            samples = {
                s.record_id: s
                for s in [x async for x in client.samples(run.run_id)]
                if s.record_id.startswith("mc")
            }

    # Per-dataset generation settings: what was sent, and what each result says.
    mc_params, gsm_params = results["mc"].model.params, results["gsm"].model.params
    assert (mc_params.max_tokens, mc_params.temperature, mc_params.stop) == (3, 0.0, ())
    assert (gsm_params.max_tokens, gsm_params.temperature, gsm_params.stop) == (64, 0.0, ("\n\n",))
    mc_bodies = [
        r.body for r in recorder.requests if _QUESTION.search(str(r.messages[-1]["content"]))
    ]
    gsm_bodies = [
        r.body for r in recorder.requests if str(r.messages[-1]["content"]).startswith("Question: ")
    ]
    assert len(mc_bodies) == 8
    assert {b["max_tokens"] for b in mc_bodies} == {3}
    assert len(gsm_bodies) == 2
    assert {b["max_tokens"] for b in gsm_bodies} == {64}
    assert all(b["stop"] == ["\n\n"] for b in gsm_bodies)

    # Chat turns: system, (user, assistant) per example, the record; never itself.
    for number in range(8):
        messages = _messages(recorder.for_record("mc", number))
        assert [role for role, _ in messages] == [
            "system", "user", "assistant", "user", "assistant", "user",
        ]  # fmt: skip
        assert messages[0] == ("system", "You are an expert.")
        shown = [int(_QUESTION.findall(content)[0][1]) for role, content in messages[1:5:2]]
        assert number not in shown
        assert [content for role, content in messages[2:5:2]] == ["ABCD"[n % 4] for n in shown]
    # The draw is fixed: every record sees the same examples unless it is one of them.
    drawn = {
        tuple(
            int(_QUESTION.findall(c)[0][1])
            for _, c in _messages(recorder.for_record("mc", n))[1:5:2]
        )
        for n in range(8)
    }
    assert 1 <= len(drawn) <= 3
    assert samples["mc0"].input.startswith("[system] You are an expert.\n\n[user] ")

    mc = results["mc"]
    assert mc.status is ResultStatus.SUCCESS
    payload = mc.payload
    assert isinstance(payload, MultipleChoicePayload)
    # Even records answered right (4), odd ones "D": right for records 3 and 7 (gold D).
    assert mc.metrics["accuracy"] == 6 / 8
    assert [(s.subject, s.samples) for s in payload.subjects] == [("anatomy", 4), ("law", 4)]
    assert results["gsm"].metrics["accuracy"] == 0.5


async def test_single_message_from_a_dev_split_and_the_prompt_hash(tmp_path: Path) -> None:
    recorder = Recorder()
    async with FakeProvider(answer=recorder) as fake:
        model = fake.model_config("fake-m")
        config = make_config(tmp_path, models=[model.model_dump(mode="json")])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await _upload(client)
            plain = await client.create_run(models=["fake-m"], datasets=[("mc", "1.0.0")])
            few_shot = PromptOptions(shots=3, shots_from=DatasetRef("dev", "1.0.0"), shot_seed=1)
            runs = [
                await client.create_run(
                    models=["fake-m"], datasets=[("mc", "1.0.0")], prompt=few_shot
                )
                for _ in range(2)
            ]
            other_seed = await client.create_run(
                models=["fake-m"],
                datasets=[("mc", "1.0.0")],
                dataset_options=[
                    DatasetOptions(
                        dataset=DatasetRef("mc", "1.0.0"),
                        prompt=PromptOptions(
                            shots=3, shots_from=DatasetRef("dev", "1.0.0"), shot_seed=2
                        ),
                    )
                ],
            )
            hashes = []
            for run in (plain, *runs, other_seed):
                await client.wait(run.run_id, timeout_s=60)
                (result,) = await client.results(run.run_id)
                hashes.append(result.provenance.prompt_template_sha256)

    assert hashes[1] == hashes[2], "the same prompt options give the same hash"
    assert len({hashes[0], hashes[1], hashes[3]}) == 3, "zero-shot, seed 1 and seed 2 differ"
    with_shots = [r for r in recorder.requests if "dev question" in str(r.messages[-1]["content"])]
    assert len(with_shots) == 8 * 3
    for request in with_shots:
        ((role, content),) = _messages(request)
        assert role == "user"
        blocks = content.split("\n\n" + "Answer the multiple-choice")
        assert len(blocks) == 4  # three solved examples, then the record
        for block in blocks[:3]:
            number = int(_QUESTION.findall(block)[0][1])
            assert block.endswith(f"Answer: {'ABCD'[number % 4]}")
        assert content.endswith("\nAnswer:")


async def _failure(call: Any) -> Any:
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the type is checked by the caller
        await call
    return caught.value


async def test_bad_prompt_and_dataset_settings_are_named(tmp_path: Path) -> None:
    async with (
        running_server(make_config(tmp_path)) as address,
        AsyncEvaldClient(address) as client,
    ):
        await _upload(client)
        cases: list[tuple[Mapping[str, Any], type[Exception], str]] = [
            ({"prompt": PromptOptions(shots=8)}, InvalidArgument, "need at least 9 records"),
            ({"prompt": PromptOptions(shots=40)}, InvalidArgument, "between 0 and 32"),
            (
                {"prompt": PromptOptions(shots=1, shots_from=DatasetRef("nope", "1.0.0"))},
                NotFound,
                "dataset nope 1.0.0 not found",
            ),
            (
                {"prompt": PromptOptions(shots=1, shots_from=DatasetRef("gsm", "1.0.0"))},
                InvalidArgument,
                "is generation, not multiple_choice",
            ),
            (
                {"dataset_options": [DatasetOptions(dataset=DatasetRef("gsm", "1.0.0"))]},
                InvalidArgument,
                "gsm 1.0.0 is not one of the run's datasets",
            ),
            (
                {
                    "dataset_options": [
                        DatasetOptions(
                            dataset=DatasetRef("mc", "1.0.0"),
                            generation=GenerationParams(max_tokens=0),
                        )
                    ]
                },
                InvalidArgument,
                "max_tokens",
            ),
        ]
        for extra, kind, fragment in cases:
            error = await _failure(
                client.create_run(models=["sim-good"], datasets=[("mc", "1.0.0")], **extra)
            )
            assert isinstance(error, kind), (extra, error)
            assert fragment in str(error), (fragment, str(error))
        logprobs_on_generation = await _failure(
            client.create_run(
                models=["sim-good"],
                datasets=[("gsm", "1.0.0")],
                dataset_options=[
                    DatasetOptions(
                        dataset=DatasetRef("gsm", "1.0.0"), choice_scoring=ChoiceScoring.LOGPROBS
                    )
                ],
            )
        )
        assert isinstance(logprobs_on_generation, InvalidArgument)
        assert "needs a multiple_choice dataset" in str(logprobs_on_generation)
        run_wide_logprobs_without_choices = await _failure(
            client.create_run(
                models=["sim-good"],
                datasets=[("gsm", "1.0.0")],
                choice_scoring=ChoiceScoring.LOGPROBS,
            )
        )
        assert isinstance(run_wide_logprobs_without_choices, InvalidArgument)
        assert run_wide_logprobs_without_choices.reason == "RUN_SPEC_INVALID"
        assert [v.field for v in run_wide_logprobs_without_choices.field_violations] == [
            "spec.choice_scoring"
        ]
        assert "the run has none (gsm 1.0.0 is generation)" in str(
            run_wide_logprobs_without_choices
        )
        assert [r async for r in client.list_runs()] == [], "nothing is stored"
        bad_upload = await _failure(
            client.upload_dataset(
                name="mc2",
                version="1.0.0",
                task_type="multiple_choice",
                records=mc_records("mc", 2),
                prompt=PromptOptions(shots=1, shots_from=DatasetRef("gsm", "1.0.0")),
            )
        )
        assert isinstance(bad_upload, DatasetInvalid)
        assert bad_upload.reason == "DATASET_HEADER_INVALID"
        assert "is generation, not multiple_choice" in str(bad_upload)
        listed = [d.name async for d in client.list_datasets()]
        assert "mc2" not in listed, "nothing is stored"


async def test_logprob_scoring_reads_the_letter_tokens_and_counts_fallbacks(tmp_path: Path) -> None:
    bodies: list[Mapping[str, Any]] = []

    def answer(chat: FakeChatRequest) -> str:
        bodies.append(chat.body)
        return "D"  # one token: log-probability scoring asks for max_tokens = 1

    def alternatives(chat: FakeChatRequest, text: str) -> list[tuple[str, float]]:
        asked = _QUESTION.findall(str(chat.messages[-1]["content"]))
        if not asked:
            return [("so", -0.1)]
        number = int(asked[-1][1])
        if number % 2:  # no letter among the alternatives: the text decides
            return [("The", -0.1), ("I", -1.2)]
        return [(" " + "ABCD"[number % 4], -0.5), ("D", -1.5), ("(D", -3.0)]

    async with FakeProvider(answer=answer, alternatives=alternatives) as fake:
        model = fake.model_config("fake-m", stream=True)
        config = make_config(tmp_path, models=[model.model_dump(mode="json")])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await _upload(client)
            run = await client.create_run(
                models=["fake-m"],
                datasets=[("mc", "1.0.0"), ("gsm", "1.0.0")],
                # No max_tokens for the dataset: log-probability scoring asks for one token.
                choice_scoring=ChoiceScoring.LOGPROBS,
                generation=GenerationParams(max_tokens=32),
            )
            assert run.spec.choice_scoring is ChoiceScoring.LOGPROBS
            await client.wait(run.run_id, timeout_s=60)
            results = {r.benchmark.name: r for r in await client.results(run.run_id)}
            samples = {s.record_id: s async for s in client.samples(run.run_id)}
        journal = fake.journal

    assert journal.requests == 10
    asked = [b for b in bodies if b.get("logprobs")]
    assert len(asked) == 8  # the multiple-choice records only
    assert {(b["top_logprobs"], b["max_tokens"]) for b in asked} == {(20, 1)}
    assert [b["max_tokens"] for b in bodies if not b.get("logprobs")] == [32, 32]
    assert results["mc"].model.params.max_tokens == 1
    assert results["gsm"].model.params.max_tokens == 32
    mc = results["mc"]
    payload = mc.payload
    assert isinstance(payload, MultipleChoicePayload)
    assert (payload.logprob_scored, payload.logprob_fallbacks) == (4, 4)
    # Even records by their gold letter's token; odd ones fall back to the answer "D".
    assert mc.metrics["accuracy"] == 6 / 8
    assert {r.rule: r.samples for r in payload.extraction_rules} == {
        "logprobs": 4,
        "bare_letter": 4,
    }
    for number in range(8):
        sample = samples[f"mc{number}"]
        if number % 2:
            assert "logprob_fallback" in sample.flags
            assert not any(key.startswith("logprob_") for key in sample.scores)
        else:
            gold = "ABCD"[number % 4]
            assert sample.scores[f"logprob_{gold}"] == pytest.approx(-0.5)
            # "D" and "(D" are one letter: their probabilities add up.
            both = math.log(math.exp(-1.5) + math.exp(-3.0))
            assert sample.scores["logprob_D"] == pytest.approx(both)
            assert sample.scores["predicted_index"] == number % 4
    assert results["gsm"].metrics["accuracy"] == 0.0  # "D" has no number
    assert "no_number" in samples["g0"].flags


async def test_prompt_options_are_part_of_a_dataset_version(tmp_path: Path) -> None:
    options = PromptOptions(system_message="Hi.", shots=1, shot_seed=3)
    async with (
        running_server(make_config(tmp_path)) as address,
        AsyncEvaldClient(address) as client,
    ):
        first = await client.upload_dataset(
            name="mc", version="1.0.0", task_type="multiple_choice", records=mc_records("mc", 3),
            prompt=options,
        )  # fmt: skip
        again = await client.upload_dataset(
            name="mc", version="1.0.0", task_type="multiple_choice", records=mc_records("mc", 3),
            prompt=options,
        )  # fmt: skip
        assert again.dataset_id == first.dataset_id
        conflict = await _failure(
            client.upload_dataset(
                name="mc",
                version="1.0.0",
                task_type="multiple_choice",
                records=mc_records("mc", 3),
                prompt=PromptOptions(system_message="Other."),
            )
        )
        assert isinstance(conflict, AlreadyExists)
        assert conflict.reason == "DATASET_VERSION_CONFLICT"
        too_few = await _failure(
            client.upload_dataset(
                name="mc",
                version="2.0.0",
                task_type="multiple_choice",
                records=mc_records("mc", 3),
                prompt=PromptOptions(shots=3),
            )
        )
        assert isinstance(too_few, DatasetInvalid)
        assert "need at least 4 records" in str(too_few)


async def test_unknown_enum_numbers_on_the_wire_are_named_not_defaulted(tmp_path: Path) -> None:
    async with running_server(make_config(tmp_path)) as address, raw_stub(address) as stub:
        upload = header("mc", task_type=enums_pb2.TASK_TYPE_MULTIPLE_CHOICE)
        upload.header.prompt.shot_format = 7  # type: ignore[assignment]
        records = mc_records("mc", 4)
        failure = await fails(stub.UploadDataset(iter([upload, chunk(jsonl(records))])))
        assert_reason(failure, grpc.StatusCode.INVALID_ARGUMENT, "DATASET_HEADER_INVALID")
        assert "header.prompt.shot_format" in failure.violations
        ok = header("mc", task_type=enums_pb2.TASK_TYPE_MULTIPLE_CHOICE)
        await stub.UploadDataset(iter([ok, chunk(jsonl(records))]))
        spec = run_pb2.RunSpec(
            model_ids=["sim-good"],
            datasets=[dataset_pb2.DatasetRef(name="mc", benchmark_version="1.0.0")],
            choice_scoring=9,  # type: ignore[arg-type]
        )
        failure = await fails(stub.CreateRun(service_pb2.CreateRunRequest(spec=spec)))
        assert_reason(failure, grpc.StatusCode.INVALID_ARGUMENT, "RUN_SPEC_INVALID")
        assert "spec.choice_scoring" in failure.violations
        spec.choice_scoring = enums_pb2.CHOICE_SCORING_LOGPROBS
        spec.prompt.shot_format = 5  # type: ignore[assignment]
        failure = await fails(stub.CreateRun(service_pb2.CreateRunRequest(spec=spec)))
        assert_reason(failure, grpc.StatusCode.INVALID_ARGUMENT, "RUN_SPEC_INVALID")
        assert "spec.prompt.shot_format" in failure.violations

"""Structured-output tasks end to end: the real server, the SDK and the fake provider
answering each record with JSON that is valid, fenced, wrong in a field, not JSON,
against the schema, or with a field too many; the schema sent as response_format only
to the model configured to honour it. Each sample's verdict is checked against the
one worked out by hand, each metric against its recomputation from the samples read
back through ListSamples, and hostile schemas are refused at upload."""

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from evald_client import (
    AsyncEvaldClient,
    DatasetInvalid,
    ResultStatus,
    StructuredOutputPayload,
    SubtaskState,
)
from evald_server.fake_provider import Behaviour, FakeProvider
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z]"},
        "age": {"type": "integer", "minimum": 0},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
ANN = {"name": "Ann", "age": 30}
# Each case: the answer, whether the record has ANN as its reference, and the verdict
# by hand: (json_valid, schema_valid, field_exact_match, field_f1, flags).
CASES: dict[str, tuple[str, bool, tuple[Any, ...]]] = {
    "valid": ('{"name": "Ann", "age": 30}', True, (1.0, 1.0, 1.0, 1.0, ())),
    "fenced": ('```json\n{"age": 30.0, "name": "Ann"}\n```', True, (1.0, 1.0, 1.0, 1.0, ())),
    "wrong-field": ('{"name": "Bob", "age": 30}', True, (1.0, 1.0, 0.0, 0.5, ())),
    "not-json": ("{name: Ann}", True, (0.0, 0.0, 0.0, 0.0, ("invalid_json",))),
    "violates": ('{"name": "Ann", "age": "30"}', True, (1.0, 0.0, 0.0, 0.5, ("schema_violation",))),
    "extra-field": (
        '{"name": "Ann", "age": 30, "id": 7}',
        True,
        (1.0, 0.0, 0.0, 0.8, ("schema_violation",)),
    ),
    "no-reference": ('{"name": "Cy", "age": 5}', False, (1.0, 1.0, None, None, ())),
}


def records() -> list[dict[str, Any]]:
    return [
        {
            "id": case,
            "input": f"[{case}] Who is it?",
            "json_schema": PERSON,
            **({"reference": ANN} if referenced else {}),
        }
        for case, (_, referenced, _) in CASES.items()
    ]


def recomputed(samples: list[Any]) -> dict[str, float]:
    referenced = [s for s in samples if "field_f1" in s.scores]
    n = len(samples)
    return {
        "json_valid_rate": sum(s.scores["json_valid"] for s in samples) / n,
        "schema_valid_rate": sum(s.scores["schema_valid"] for s in samples) / n,
        "field_exact_match": sum(s.scores["field_exact_match"] for s in referenced)
        / len(referenced),
        "field_f1": sum(s.scores["field_f1"] for s in referenced) / len(referenced),
    }


async def test_structured_outputs_scored_per_sample_and_overall(tmp_path: Path) -> None:
    async with FakeProvider() as fake:
        answers = {f"[{case}]": Behaviour.ok(answer=text) for case, (text, _, _) in CASES.items()}
        fake.configure(per_prompt=answers)
        models = [
            fake.model_config("fake-plain").model_dump(mode="json"),
            fake.model_config(
                "fake-schema", stream=True, structured_output_format="json_schema"
            ).model_dump(mode="json"),
        ]
        config = make_config(tmp_path, models=models)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="people", version="1.0.0", task_type="structured_output", records=records()
            )
            run = await client.create_run(
                models=["fake-plain", "fake-schema"], datasets=[("people", "1.0.0")]
            )
            await client.wait(run.run_id, timeout_s=60)
            results = {r.model.model_id: r for r in await client.results(run.run_id)}
            samples = [s async for s in client.samples(run.run_id)]
        sent = list(fake.journal.entries)

    # The schema goes as response_format only to the model that honours it; the prompt
    # carries it for both.
    by_model = {entry.model: entry.request_extras for entry in sent}
    assert by_model["fake-plain"] is None
    assert by_model["fake-schema"] == {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": PERSON},
        }
    }
    assert all('"additionalProperties":false' in s.input for s in samples)

    assert {s.state for s in samples} == {SubtaskState.SUCCEEDED}
    for model_id, result in results.items():
        assert result.status is ResultStatus.SUCCESS, model_id
        mine = [s for s in samples if s.model_id == model_id]
        assert len(mine) == len(CASES)
        for sample in mine:
            json_valid, schema_valid, exact, f1, flags = CASES[sample.record_id][2]
            scores = sample.scores
            got = (
                scores["json_valid"],
                scores["schema_valid"],
                scores.get("field_exact_match"),
                scores.get("field_f1"),
            )
            assert got == pytest.approx((json_valid, schema_valid, exact, f1)), sample.record_id
            assert sample.flags == flags, sample.record_id
        again = recomputed(mine)
        assert {k: result.metrics[k] for k in again} == pytest.approx(again, abs=1e-12)
        # By hand: 6 of 7 JSON, 4 of 7 valid; of the 6 with a reference 2 exact, F1 3.8.
        assert result.metrics["json_valid_rate"] == pytest.approx(6 / 7)
        assert result.metrics["schema_valid_rate"] == pytest.approx(4 / 7)
        assert result.metrics["field_exact_match"] == pytest.approx(2 / 6)
        assert result.metrics["field_f1"] == pytest.approx(3.8 / 6)
        for metric in again:
            interval = result.intervals[metric].bootstrap
            assert interval.lower <= result.metrics[metric] <= interval.upper, metric
        payload = result.payload
        assert isinstance(payload, StructuredOutputPayload)
        assert (payload.invalid_json, payload.schema_violations, payload.with_reference) == (
            1,
            2,
            6,
        )


class _Counting(BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"type": "string"}')

    def log_message(self, *args: object) -> None:
        pass


HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"$ref": "REMOTE"}, "refers outside the schema; evald never fetches a schema"),
    (
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
        "'#/$defs/missing' does not resolve within the schema",
    ),
    ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "loops"),
    ({"type": "object", "patternProperties": {"^a": {}}}, "patternProperties"),
    ({"type": "string", "pattern": "(a)\\1"}, "RE2 cannot compile it"),
    ({"type": "strnig"}, "not a valid schema"),
    ({"properties": {f"p{i}": {"type": "string"} for i in range(4000)}}, "over the limit"),
    ({"$schema": "https://example.com/my-draft"}, "unknown draft"),
]


async def test_hostile_schemas_are_refused_at_upload_without_a_fetch(tmp_path: Path) -> None:
    server = HTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    remote = f"http://127.0.0.1:{server.server_address[1]}/schema.json"
    messages = []
    try:
        config = make_config(tmp_path, limits={"max_record_bytes": 1 << 20})
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            for schema, _ in HOSTILE:
                hostile = {"$ref": remote} if schema.get("$ref") == "REMOTE" else schema
                with pytest.raises(DatasetInvalid) as refused:
                    await client.upload_dataset(
                        name="bad",
                        version="1.0.0",
                        task_type="structured_output",
                        records=[{"input": "x", "json_schema": hostile}],
                    )
                messages.append(str(refused.value))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    for (_, fragment), message in zip(HOSTILE, messages, strict=True):
        assert fragment in message, message
        assert "json_schema" in message, message
    assert _Counting.hits == 0

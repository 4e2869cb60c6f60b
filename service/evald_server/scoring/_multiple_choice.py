"""Multiple choice: accuracy, unmapped rate, letters predicted against gold, subjects.

Each answer is mapped to a choice by the rules of ``_choices`` (documented there); with
log-probability scoring the letter tokens' log-probabilities come first and the text
rules are the fallback. An unmapped answer is wrong and flagged ``unmapped_output``.

* ``accuracy`` and ``unmapped_rate`` are proportions over the scored samples, each
  with a bootstrap and a Wilson interval.
* When any record has a ``metadata.subject`` (MMLU's 57 subjects), the payload has the
  accuracy per subject and ``subject_macro_accuracy``, the unweighted mean over the
  subjects (records without a subject form the subject ""); the macro average is a
  headline metric with a bootstrap interval (subjects absent from a resample are left
  out of that resample's mean).
* ``letters`` counts, per letter from A to the most choices of any record, how often it
  is gold, how often it was predicted and how often it was right: a model that prefers
  a position shows it there.
* Per sample: ``correct``, ``predicted_index`` (-1 when unmapped), ``gold_index`` and,
  with log-probability scoring, ``logprob_<letter>`` for each choice letter found among
  the top alternatives; flags ``unmapped_output`` and ``logprob_fallback``.
* Loglikelihood scoring (``_loglikelihood``): the prediction is lm-eval's ``acc`` pick;
  ``acc`` (equal to ``accuracy``), ``acc_norm`` and ``acc_bytes`` are headline metrics
  with their intervals; per sample ``logprob_<letter>`` is each choice's summed
  continuation log-probability, ``correct_norm`` and ``predicted_norm_index`` the
  acc_norm pick. A sample without one value per choice is unmapped.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.datasets import choice_letter, gold_choice_index
from evald_server.domain import TaskType
from evald_server.scoring._choices import (
    LOGPROBS,
    RULES,
    UNMAPPED,
    Extraction,
    extract_choice,
    letter_logprobs,
)
from evald_server.scoring._common import BaseScorer, Evaluation, Row
from evald_server.scoring._intervals import FloatArray, GroupedSums, IntArray, safe_div
from evald_server.scoring._loglikelihood import LoglikelihoodPick, is_loglikelihood, pick
from evald_server.scoring._payloads import (
    ChoiceLetterStats,
    ExtractionRuleCount,
    MultipleChoicePayload,
    SubjectAccuracy,
    WorstExample,
)
from evald_server.scoring._types import ScoringSample

LOGLIKELIHOOD = "loglikelihood"  # the extraction rule of a loglikelihood sample
UNMAPPED_FLAG = "unmapped_output"
FALLBACK_FLAG = "logprob_fallback"


def subject_of(record: Mapping[str, Any]) -> str | None:
    metadata = record.get("metadata")
    subject = metadata.get("subject") if isinstance(metadata, Mapping) else None
    return subject if isinstance(subject, str) else None


def _read(
    sample: ScoringSample, choices: Sequence[str]
) -> tuple[Extraction, dict[int, float], bool, LoglikelihoodPick | None]:
    """(the extraction, the letters' log-probabilities, whether it fell back to text,
    the loglikelihood picks of a sample scored that way)."""
    if is_loglikelihood(sample.top_logprobs):
        assert sample.top_logprobs is not None
        picked = pick(sample.top_logprobs, len(choices))
        if picked is None:
            return Extraction(None, UNMAPPED), {}, False, None
        scores = dict(enumerate(picked.loglikelihoods))
        return Extraction(picked.acc, LOGLIKELIHOOD), scores, False, picked
    extraction, logprobs, fell_back = _read_generated(sample, choices)
    return extraction, logprobs, fell_back, None


def _read_generated(
    sample: ScoringSample, choices: Sequence[str]
) -> tuple[Extraction, dict[int, float], bool]:
    if sample.top_logprobs is None:
        return extract_choice(sample.output or "", choices), {}, False
    logprobs = letter_logprobs(sample.top_logprobs, len(choices))
    if not logprobs:
        return extract_choice(sample.output or "", choices), {}, True
    best = max(logprobs, key=lambda index: (logprobs[index], -index))
    return Extraction(best, LOGPROBS), logprobs, False


class MultipleChoiceScorer(BaseScorer):
    name = "multiple_choice"
    # 1.1.0: verbatim choice texts first; signs, decimals, units kept. 1.2.0: loglikelihood
    # samples (acc, acc_norm, acc_bytes).
    version = "1.2.0"
    task_type = TaskType.MULTIPLE_CHOICE
    primary_metric = "correct"

    def expected_text(self, record: Mapping[str, Any]) -> str:
        index = gold_choice_index(record)
        return f"{choice_letter(index)}. {record['choices'][index]}"

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record["question"])

    streams = True
    pages = True  # a page is a measure of its samples (BaseScorer.score_page)

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        return self._evaluate_measured(scored, every)

    def measure(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample], state: Any
    ) -> tuple[list[Row], dict[str, np.ndarray]]:
        rows: list[Row] = []
        gold = np.empty(len(scored), dtype=np.intp)
        pred = np.empty(len(scored), dtype=np.intp)
        rules: list[str] = []
        fell_backs = np.zeros(len(scored), dtype=np.bool_)
        loglikelihood = np.zeros(len(scored), dtype=np.bool_)
        pred_norm = np.empty(len(scored), dtype=np.intp)
        pred_bytes = np.empty(len(scored), dtype=np.intp)
        for i, sample in enumerate(scored):
            choices = sample.record["choices"]
            extraction, logprobs, fell_back, picked = _read(sample, choices)
            gold[i] = gold_choice_index(sample.record)
            pred[i] = -1 if extraction.index is None else extraction.index
            loglikelihood[i] = is_loglikelihood(sample.top_logprobs)
            pred_norm[i] = pred[i] if picked is None else picked.acc_norm
            pred_bytes[i] = pred[i] if picked is None else picked.acc_bytes
            rules.append(extraction.rule)
            fell_backs[i] = fell_back
            correct = bool(pred[i] == gold[i])
            scores = {
                "correct": float(correct),
                "predicted_index": float(pred[i]),
                "gold_index": float(gold[i]),
            }
            scores.update({f"logprob_{choice_letter(k)}": v for k, v in logprobs.items()})
            if picked is not None:
                scores["correct_norm"] = float(picked.acc_norm == gold[i])
                scores["predicted_norm_index"] = float(picked.acc_norm)
            flags = ((UNMAPPED_FLAG,) if extraction.index is None else ()) + (
                (FALLBACK_FLAG,) if fell_back else ()
            )
            rows.append(
                Row(
                    scores=scores,
                    primary=float(correct),
                    correct=correct,
                    flags=flags,
                    note=_note(extraction, int(gold[i]), fell_back),
                    answer="" if extraction.index is None else choice_letter(extraction.index),
                )
            )
        return rows, {
            "gold": gold,
            "pred": pred,
            "rule": np.array(rules, dtype=object).reshape(len(rules)),
            "fell_back": fell_backs,
            "loglikelihood": loglikelihood,
            "pred_norm": pred_norm,
            "pred_bytes": pred_bytes,
            "subject": np.array([subject_of(s.record) or "" for s in scored], dtype=object).reshape(
                len(scored)
            ),
            # Over every sample of the page, scored or not:
            "letters": np.array([len(s.record["choices"]) for s in every], dtype=np.intp),
            "has_subject": np.array(
                [subject_of(s.record) is not None for s in every], dtype=np.bool_
            ),
        }

    def conclude(self, columns: Mapping[str, np.ndarray]) -> Evaluation:
        gold: IntArray = columns["gold"]
        pred: IntArray = columns["pred"]
        n_letters = int(columns["letters"].max()) if columns["letters"].size else 0
        has_subjects = bool(columns["has_subject"].any())
        subject_column = columns["subject"].tolist()
        subject_names = sorted(set(subject_column)) if has_subjects else []
        subject_index = {name: i for i, name in enumerate(subject_names)}
        subjects = np.zeros(gold.size, dtype=np.intp)
        if has_subjects:
            subjects[:] = [subject_index[name] for name in subject_column]
        rules = Counter(columns["rule"].tolist())
        logprob_scored = rules[LOGPROBS]
        fallbacks = int(columns["fell_back"].sum())
        correct_column: FloatArray = (gold == pred).astype(np.float64)
        unmapped_column: FloatArray = (pred < 0).astype(np.float64)
        metrics: dict[str, float] = {}
        if gold.size:
            metrics = {
                "accuracy": float(correct_column.mean()),
                "unmapped_rate": float(unmapped_column.mean()),
            }
        per_subject = _per_subject(subject_names, subjects, correct_column)
        macro = float(np.mean([s.accuracy for s in per_subject])) if per_subject else 0.0
        if per_subject:
            metrics["subject_macro_accuracy"] = macro
        # Loglikelihood scoring: lm-eval's acc, acc_norm and acc_bytes (``_loglikelihood``).
        lm_eval: dict[str, FloatArray] = {}
        if bool(columns["loglikelihood"].any()):
            lm_eval = {
                "acc": correct_column,
                "acc_norm": (gold == columns["pred_norm"]).astype(np.float64),
                "acc_bytes": (gold == columns["pred_bytes"]).astype(np.float64),
            }
            metrics.update({name: float(column.mean()) for name, column in lm_eval.items()})
        if not per_subject:
            subjects[:] = -1  # grouped sums leave negative groups out
        subject_correct = GroupedSums(subjects, len(subject_names), correct_column)
        subject_samples = GroupedSums(subjects, len(subject_names))

        def statistic(weights: FloatArray) -> dict[str, FloatArray]:
            total = weights.sum(axis=1)
            values = {
                "accuracy": (weights @ correct_column) / total,
                "unmapped_rate": (weights @ unmapped_column) / total,
            }
            values.update({name: (weights @ column) / total for name, column in lm_eval.items()})
            if per_subject:
                counts = subject_samples(weights)
                present = counts > 0
                accuracy = safe_div(subject_correct(weights), counts)
                values["subject_macro_accuracy"] = safe_div(
                    (accuracy * present).sum(axis=1), present.sum(axis=1).astype(np.float64)
                )
            return values

        letters = _letters(n_letters, gold, pred)
        rule_counts = tuple(
            ExtractionRuleCount(rule, rules[rule])
            for rule in (LOGLIKELIHOOD, LOGPROBS, *RULES, UNMAPPED)
            if rules[rule]
        )

        def build_payload(worst: tuple[WorstExample, ...]) -> MultipleChoicePayload:
            return MultipleChoicePayload(
                accuracy=metrics.get("accuracy", 0.0),
                unmapped_outputs=int(unmapped_column.sum()),
                letters=letters,
                subjects=per_subject,
                subject_macro_accuracy=macro,
                extraction_rules=rule_counts,
                logprob_scored=logprob_scored,
                logprob_fallbacks=fallbacks,
                worst_examples=worst,
            )

        return Evaluation(
            rows=[],
            metrics=metrics,
            statistic=statistic,
            build_payload=build_payload,
            proportions={
                "accuracy": float(correct_column.sum()),
                "unmapped_rate": float(unmapped_column.sum()),
            }
            | {name: float(column.sum()) for name, column in lm_eval.items()},
        )


def _note(extraction: Extraction, gold: int, fell_back: bool) -> str:
    suffix = " (no letter among the top log-probabilities; read from the text)" if fell_back else ""
    if extraction.index is None:
        return f"no choice found in the answer, gold {choice_letter(gold)}{suffix}"
    return (
        f"predicted {choice_letter(extraction.index)} ({extraction.rule}), "
        f"gold {choice_letter(gold)}{suffix}"
    )


def _per_subject(
    names: Sequence[str], subjects: IntArray, correct: FloatArray
) -> tuple[SubjectAccuracy, ...]:
    if not names:
        return ()
    samples = np.bincount(subjects, minlength=len(names))
    right = np.bincount(subjects, weights=correct, minlength=len(names))
    return tuple(
        SubjectAccuracy(name, int(n), int(r), float(r / n))
        for name, n, r in zip(names, samples, right, strict=True)
        if n
    )


def _letters(n_letters: int, gold: IntArray, pred: IntArray) -> tuple[ChoiceLetterStats, ...]:
    gold_counts = np.bincount(gold, minlength=n_letters)
    predicted = np.bincount(pred[pred >= 0], minlength=n_letters)
    right = np.bincount(gold[gold == pred], minlength=n_letters)
    return tuple(
        ChoiceLetterStats(choice_letter(i), int(gold_counts[i]), int(predicted[i]), int(right[i]))
        for i in range(n_letters)
    )

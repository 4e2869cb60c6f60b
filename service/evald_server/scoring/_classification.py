"""Classification: accuracy and macro precision / recall / F1, per class, confusion.

Each output is mapped to a label by the rules of ``_labels`` (documented there);
an unmapped output is wrong and flagged ``unmapped_output``.

* The label set (payload ``labels``, sorted) is every gold label and every choice of
  the task. ``per_class`` covers all of them (0 where undefined).
* Macro averages run over the *active* labels — those with gold support or at least
  one prediction among the scored samples — as scikit-learn does when ``labels`` is
  not given. An unmapped output is a false negative of its gold label and a false
  positive of none. Undefined precision / recall / F1 count as 0 (sklearn
  ``zero_division=0``).
* Above ``CONFUSION_MAX_LABELS`` labels the confusion matrix and ``unmapped_by_gold``
  (its extra column, one proto row each) are both omitted (empty); ``per_class`` and
  ``unmapped_outputs`` are always there.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.domain import TaskType
from evald_server.scoring._common import BaseScorer, Evaluation, Row, truncate
from evald_server.scoring._intervals import (
    FloatArray,
    GroupedSums,
    Groups,
    IntArray,
    Statistic,
    safe_div,
)
from evald_server.scoring._labels import LabelMatcher
from evald_server.scoring._payloads import ClassificationPayload, ClassMetrics, WorstExample
from evald_server.scoring._scored_pages import ScoredPage, merged_order
from evald_server.scoring._types import ScoreReport, ScoringSample

CONFUSION_MAX_LABELS = 200
MAX_COLUMN_CELLS = 1 << 22  # samples × count columns in one matrix (32 MiB of float64)
UNMAPPED = "unmapped_output"


def _choices(record: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(record.get("choices") or ())


class _Counts:
    """Per-class counts and the four headline metrics, on points or on resamples."""

    def __init__(self, tp: FloatArray, support: FloatArray, predicted: FloatArray) -> None:
        self.precision = safe_div(tp, predicted)
        self.recall = safe_div(tp, support)
        self.f1 = safe_div(2 * tp, support + predicted)
        self.active = (support + predicted) > 0

    def macro(self, values: FloatArray) -> FloatArray:
        return safe_div((values * self.active).sum(axis=-1), self.active.sum(axis=-1))


class ClassificationScorer(BaseScorer):
    name = "classification"
    # 1.1.0: bootstrap counts per label pair drawn directly; 1.2.0: a negated label is
    # not read as that label
    version = "1.2.0"
    task_type = TaskType.CLASSIFICATION
    primary_metric = "correct"

    def expected_text(self, record: Mapping[str, Any]) -> str:
        return str(record["label"])

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record["input"])

    pages = True

    def compactor(self, worst_k: int) -> Callable[[ScoringSample], ScoringSample]:
        """A sample as ``score`` reads it: its label and choices (one record shared by
        every sample with the same two), its output, ids and repeat; a skipped sample
        counts only for the label set (one placeholder shared by every skipped sample
        with the same label and choices).

        Whether a sample is right depends on its output and record only (given the
        task's label set), so the task's first ``worst_k`` wrong samples are among the
        first ``worst_k`` of each (output, label, choices): only those keep the input
        text their worst example would show (truncated, which is idempotent), and each
        keeps that class's one output string."""
        records: dict[tuple[type, Any, tuple[str, ...]], Mapping[str, Any]] = {}
        skipped: dict[tuple[type, Any, tuple[str, ...]], ScoringSample] = {}
        seen: dict[tuple[str, tuple[type, Any, tuple[str, ...]]], list[Any]] = {}

        def compact(sample: ScoringSample) -> ScoringSample:
            label = sample.record["label"]
            choices = _choices(sample.record)
            key = (type(label), label, choices)
            record = records.get(key)
            if record is None:
                record = records[key] = {"label": label, "choices": choices, "input": ""}
            if sample.output is None:
                if key not in skipped:
                    skipped[key] = ScoringSample("", "", 0, record, None)
                return skipped[key]
            output_class = seen.get((sample.output, key))
            if output_class is None:
                output_class = seen[(sample.output, key)] = [sample.output, 0]
            shown = ""
            if output_class[1] < worst_k:
                output_class[1] += 1
                shown = truncate(sample.input_text or self.input_text(sample.record))
            return ScoringSample(
                sample.subtask_id,
                sample.record_id,
                sample.repeat_index,
                record,
                output_class[0],
                shown,
            )

        return compact

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        labels = _label_set(every)
        gold, pred, rows = self._match(scored, labels)
        evaluation = self._evaluation(labels, gold, pred)
        evaluation.rows = rows
        return evaluation

    def score_page(
        self, samples: Sequence[ScoringSample], *, context: tuple[str, ...], worst_k: int
    ) -> ScoredPage:
        """Matched against the labels known so far (``context``) and the page's own."""
        labels = _label_set(samples, known=context)
        scored = [s for s in samples if s.output is not None]
        gold, pred, rows = self._match(scored, labels)
        columns = {"gold": gold, "pred": pred}
        return self._page(samples, scored, rows, context=labels, worst_k=worst_k, columns=columns)

    def aggregate(
        self, pages: Sequence[ScoredPage], *, seed: int, worst_k: int, resamples: int
    ) -> ScoreReport | None:
        labels = tuple(sorted({label for page in pages for label in page.context}))
        if any(page.context != labels for page in pages):
            return None  # a label appeared late: earlier pages matched against fewer
        order = merged_order(pages)
        gold = np.concatenate([p.columns["gold"] for p in pages])[order]
        pred = np.concatenate([p.columns["pred"] for p in pages])[order]
        evaluation = self._evaluation(labels, gold, pred)
        return self._aggregated(
            pages, evaluation, order, seed=seed, worst_k=worst_k, resamples=resamples
        )

    def _match(
        self, scored: Sequence[ScoringSample], labels: tuple[str, ...]
    ) -> tuple[IntArray, IntArray, list[Row]]:
        """Each output's label: gold and predicted label indices, and the rows."""
        index = {label: i for i, label in enumerate(labels)}
        matchers: dict[tuple[str, ...], LabelMatcher] = {}
        # A row depends only on the predicted label and whether it is right: one of each
        # (rows are frozen), not a row and a scores dict per sample.
        shared: dict[tuple[str | None, bool], Row] = {}
        rows: list[Row] = []
        gold = np.empty(len(scored), dtype=np.intp)
        pred = np.empty(len(scored), dtype=np.intp)
        for i, sample in enumerate(scored):
            choices = _choices(sample.record)
            matcher = matchers.get(choices)
            if matcher is None:
                matcher = LabelMatcher(choices or labels, lettered=bool(choices))
                matchers[choices] = matcher
            label = sample.record["label"]
            predicted = matcher.match(sample.output or "")
            gold[i] = index[label]
            pred[i] = -1 if predicted is None else index[predicted]
            correct = predicted == label
            row = shared.get((predicted, correct))
            if row is None:
                row = shared[(predicted, correct)] = Row(
                    scores={"correct": float(correct)},
                    primary=float(correct),
                    correct=correct,
                    flags=(UNMAPPED,) if predicted is None else (),
                    note="output maps to no label"
                    if predicted is None
                    else f"predicted {predicted!r}",
                    answer=predicted or "",  # "": no label, a vote for no answer
                )
            rows.append(row)
        return gold, pred, rows

    def _evaluation(self, labels: tuple[str, ...], gold: IntArray, pred: IntArray) -> Evaluation:
        """Everything but the rows, from the label indices of the scored samples."""
        n_labels = len(labels)
        correct = (gold == pred).astype(np.float64)
        mapped = pred >= 0
        support = np.bincount(gold, minlength=n_labels).astype(np.float64)
        predicted = np.bincount(pred[mapped], minlength=n_labels).astype(np.float64)
        tp = np.bincount(gold, weights=correct, minlength=n_labels).astype(np.float64)
        counts = _Counts(tp, support, predicted)
        metrics: dict[str, float] = {}
        if gold.size:
            metrics = {
                "accuracy": float(correct.mean()),
                "f1_macro": float(counts.macro(counts.f1)),
                "precision_macro": float(counts.macro(counts.precision)),
                "recall_macro": float(counts.macro(counts.recall)),
            }
        statistic = _resample_statistic(gold, pred, n_labels)
        # A sample's counts depend only on its (gold, predicted) pair: the bootstrap
        # draws counts per pair and the statistic is over one row per pair.
        by_pair: tuple[Groups, Statistic] | None = None
        n_pairs = n_labels * (n_labels + 1)
        if n_pairs <= gold.size:
            pairs = Groups(gold * (n_labels + 1) + pred + 1, n_pairs)
            pair_gold, pair_pred = np.divmod(np.arange(n_pairs, dtype=np.intp), n_labels + 1)
            by_pair = (pairs, _resample_statistic(pair_gold, pair_pred - 1, n_labels))

        confusion: tuple[tuple[int, ...], ...] = ()
        unmapped_by_gold: tuple[int, ...] = ()
        if n_labels <= CONFUSION_MAX_LABELS:
            cells = np.bincount(gold[mapped] * n_labels + pred[mapped], minlength=n_labels**2)
            confusion = tuple(tuple(row) for row in cells.reshape(n_labels, n_labels).tolist())
            unmapped_by_gold = tuple(np.bincount(gold[~mapped], minlength=n_labels).tolist())
        per_class = tuple(
            ClassMetrics(label, float(p), float(r), float(f), int(s))
            for label, p, r, f, s in zip(
                labels, counts.precision, counts.recall, counts.f1, support, strict=True
            )
        )

        def build_payload(worst: tuple[WorstExample, ...]) -> ClassificationPayload:
            return ClassificationPayload(
                labels=labels,
                confusion=confusion,
                unmapped_by_gold=unmapped_by_gold,
                per_class=per_class,
                unmapped_outputs=int((~mapped).sum()),
                worst_examples=worst,
            )

        return Evaluation(
            rows=[],
            metrics=metrics,
            statistic=statistic,
            build_payload=build_payload,
            proportions={"accuracy": float(correct.sum())},
            grouped=by_pair,
        )


def _label_set(samples: Sequence[ScoringSample], known: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Every gold label and every choice of the samples (and ``known``), sorted."""
    labels = set(known)
    for sample in samples:
        labels.add(sample.record["label"])
        labels.update(_choices(sample.record))
    return tuple(sorted(labels))


def _resample_statistic(gold: IntArray, pred: IntArray, n_labels: int) -> Statistic:
    """The four headline metrics on resamples of these (gold, predicted) label indices.

    Every count the statistic needs is a column of one matrix, so each resample chunk is
    read once (one product instead of five passes over the weights): per-class true
    positives, support and predictions, then correct and 1. The columns are 0/1, so the
    sums are exact whatever the summation order; above the matrix's size bound, the
    same counts come from per-count grouped sums."""
    correct = (gold == pred).astype(np.float64)

    def metrics(
        tp: FloatArray,
        support: FloatArray,
        predicted: FloatArray,
        right: FloatArray,
        total: FloatArray,
    ) -> dict[str, FloatArray]:
        counts = _Counts(tp, support, predicted)
        return {
            "accuracy": right / total,
            "f1_macro": counts.macro(counts.f1),
            "precision_macro": counts.macro(counts.precision),
            "recall_macro": counts.macro(counts.recall),
        }

    columns = _count_columns(gold, pred, correct, n_labels)
    if columns is not None:
        k = n_labels

        def over_columns(weights: FloatArray) -> dict[str, FloatArray]:
            counted = weights @ columns
            tp, support, predicted = (counted[:, i * k : (i + 1) * k] for i in range(3))
            return metrics(tp, support, predicted, counted[:, 3 * k], counted[:, 3 * k + 1])

        return over_columns
    sums = (
        GroupedSums(gold, n_labels, correct),
        GroupedSums(gold, n_labels),
        GroupedSums(pred, n_labels),
    )

    def segmented(weights: FloatArray) -> dict[str, FloatArray]:
        tp, support, predicted = (grouped(weights) for grouped in sums)
        return metrics(tp, support, predicted, weights @ correct, weights.sum(axis=1))

    return segmented


def _count_columns(
    gold: IntArray, pred: IntArray, correct: FloatArray, n_labels: int
) -> FloatArray | None:
    """Samples × (3 · labels + 2) indicator columns, or None when that matrix would be
    too large (many labels: the segmented sums of ``GroupedSums`` then)."""
    n = gold.size
    width = 3 * n_labels + 2
    if n * width > MAX_COLUMN_CELLS:
        return None
    columns = np.zeros((n, width), dtype=np.float64)
    rows = np.arange(n)
    columns[rows, gold] = correct
    columns[rows, n_labels + gold] = 1.0
    mapped = pred >= 0
    columns[rows[mapped], 2 * n_labels + pred[mapped]] = 1.0
    columns[:, 3 * n_labels] = correct
    columns[:, 3 * n_labels + 1] = 1.0
    return columns

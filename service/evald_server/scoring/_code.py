"""Code: pass@1, verdict counts and extraction rules from each sample's sandbox run.

The engine runs every answer's program in the sandbox before the task is scored and
stores the run (``ScoringSample.execution``, the JSON of docs/SANDBOX.md's verdicts);
this scorer only reads it. A sample is correct when its verdict is ``passed``.

* ``pass_at_1`` is the fraction of scored samples that passed, with its bootstrap
  interval over problems (records). When every problem has the same number n of
  scored samples — the usual case, ``repeat`` = n — it is the unbiased pass@1 of Chen
  et al. 2021, the mean over problems of c/n. pass@k for k > 1 is added by the engine
  with ``_reducers`` (the ks come from the run), as the mean over problems, each
  weighing one (problems with fewer than k scored samples left out and counted).
* Per sample: ``passed`` (1 or 0); flags: the verdict when it is not ``passed``;
  the note is the verdict's reason. A sample with no stored run (a bug upstream) is
  counted as ``error`` with the note saying so, never as passed.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.datasets import expected_text
from evald_server.domain import TaskType
from evald_server.scoring._common import BaseScorer, Evaluation, Row
from evald_server.scoring._intervals import FloatArray
from evald_server.scoring._payloads import (
    CodePayload,
    CodeVerdictCount,
    ExtractionRuleCount,
    PassAtK,
    WorstExample,
)
from evald_server.scoring._types import ScoringSample

# Every verdict a sample can have, in the order the payload lists them.
VERDICTS = ("passed", "failed", "error", "timeout", "resource_limit", "no_program")
EXTRACTION_RULES = ("fence", "definition", "completion", "whole", "none")
NOT_RUN = "not_run"  # flag of a sample whose program has no stored run


def _verdict(execution: Mapping[str, Any] | None) -> tuple[str, str, str]:
    """(verdict, reason, extraction rule) of a stored run."""
    if not isinstance(execution, Mapping):
        return "error", "the program has no stored run in the sandbox", "none"
    verdict = execution.get("verdict")
    if verdict not in VERDICTS:
        return "error", f"unknown verdict {verdict!r}", "none"
    rule = execution.get("extraction_rule") or "none"
    return str(verdict), str(execution.get("reason", "")), str(rule)


class CodeScorer(BaseScorer):
    name = "code"
    version = "1.0.0"
    task_type = TaskType.CODE
    primary_metric = "passed"

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        rows: list[Row] = []
        verdicts: Counter[str] = Counter()
        rules: Counter[str] = Counter()
        per_record: Counter[str] = Counter(s.record_id for s in scored)
        for sample in scored:
            verdict, reason, rule = _verdict(sample.execution)
            passed = verdict == "passed"
            verdicts[verdict] += 1
            rules[rule if rule in EXTRACTION_RULES else "none"] += 1
            flags: tuple[str, ...] = () if passed else (verdict,)
            if sample.execution is None:
                flags += (NOT_RUN,)
            rows.append(
                Row(
                    scores={"passed": float(passed)},
                    primary=float(passed),
                    correct=passed,
                    flags=flags,
                    note=f"{verdict}: {reason}" if reason else verdict,
                )
            )
        column: FloatArray = np.fromiter(
            (row.primary for row in rows), dtype=np.float64, count=len(rows)
        )
        problems = len(per_record)
        pass_at_1 = float(column.mean()) if column.size else 0.0
        verdict_counts = tuple(CodeVerdictCount(v, verdicts.get(v, 0)) for v in VERDICTS)
        rule_counts = tuple(
            ExtractionRuleCount(rule, rules[rule]) for rule in EXTRACTION_RULES if rules[rule]
        )

        def build_payload(worst: tuple[WorstExample, ...]) -> CodePayload:
            return CodePayload(
                pass_at_1=pass_at_1,
                pass_at_k=(PassAtK(1, pass_at_1, problems, 0),),
                verdicts=verdict_counts,
                problems=problems,
                extraction_rules=rule_counts,
                worst_examples=worst,
            )

        def statistic(weights: FloatArray) -> dict[str, FloatArray]:
            return {"pass_at_1": (weights @ column) / weights.sum(axis=1)}

        return Evaluation(
            rows=rows,
            metrics={"pass_at_1": pass_at_1},
            statistic=statistic,
            build_payload=build_payload,
        )

    def expected_text(self, record: Mapping[str, Any]) -> str:
        return expected_text(TaskType.CODE, record)

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record.get("prompt") or record.get("text") or "")

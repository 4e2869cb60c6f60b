"""Chat prompts: an optional system message, k solved examples, then the record.

Every record is rendered with its dataset's template (``_prompts``); a ``ChatPrompt``
puts that text into chat messages:

* ``system_message``, when set, is the first message (role ``system``).
* ``shots = k`` solved examples come next. Without ``shots_from`` they are drawn from
  the evaluated dataset itself: ``random.Random(shot_seed).sample`` picks k + 1 record
  positions once per task, and each record is shown the first k of them that are not
  the record itself, so a record is never its own example and most records see the
  same k. With ``shots_from`` (a dataset version of the same task type, e.g. a dev
  split) k positions of that dataset are drawn the same way and every record sees them.
* An example is its rendered prompt and its answer (``shot_answer``: the label, the
  first answer, the entities as JSON, the summary, the choice letter, the reference).
  ``SINGLE_MESSAGE`` (lm-evaluation-harness' layout) writes each example as the
  prompt followed by the answer — after a space when the prompt ends with ``:``
  ("Answer: B"), on the next line otherwise — then the record, all separated by blank
  lines in one user message. ``CHAT_TURNS`` sends a user turn (the example's prompt)
  and an assistant turn (its answer) per example, then the record as the last user turn.
* ``plain_text`` is the prompt for a completions endpoint, where no chat template
  applies: the system message, a blank line, then the ``SINGLE_MESSAGE`` text (turns
  have no meaning without a template).

The prompt hash in provenance covers the template, these options, the ids of the
example records and the content hash of the dataset they come from; a zero-shot prompt
without a system message keeps the hash of its template alone.
"""

import hashlib
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evald_server.datasets._prompts import render_prompt, template_sha256
from evald_server.datasets._references import shot_answer
from evald_server.domain import ChatMessage, ShotFormat, TaskType

MAX_SHOTS = 32
MAX_SYSTEM_MESSAGE_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class PromptOptions:
    """How records become chat messages; the defaults are a zero-shot user message."""

    system_message: str | None = None
    shots: int = 0
    shots_from: tuple[str, str] | None = None  # (name, benchmark_version)
    shot_seed: int = 0
    shot_format: ShotFormat = ShotFormat.SINGLE_MESSAGE

    @property
    def is_default(self) -> bool:
        return self == PromptOptions()

    def problems(self, prefix: str) -> list[tuple[str, str]]:
        """(field path, what is wrong) for every bad field, paths under ``prefix``."""
        found: list[tuple[str, str]] = []
        if isinstance(self.shots, bool) or not 0 <= self.shots <= MAX_SHOTS:
            found.append((f"{prefix}.shots", f"must be between 0 and {MAX_SHOTS}"))
        if self.shots_from is not None:
            if not all(self.shots_from):
                found.append((f"{prefix}.shots_from", "name and benchmark_version are required"))
            if self.shots == 0:
                found.append((f"{prefix}.shots_from", "needs shots > 0"))
        if self.system_message is not None and len(self.system_message) > MAX_SYSTEM_MESSAGE_CHARS:
            found.append(
                (f"{prefix}.system_message", f"at most {MAX_SYSTEM_MESSAGE_CHARS} characters")
            )
        if not -(2**63) <= self.shot_seed < 2**63:
            found.append((f"{prefix}.shot_seed", "must fit in a signed 64-bit integer"))
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "system_message": self.system_message,
            "shots": self.shots,
            "shots_from": None if self.shots_from is None else list(self.shots_from),
            "shot_seed": self.shot_seed,
            "shot_format": self.shot_format.value,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "PromptOptions":
        source = data.get("shots_from")
        return cls(
            system_message=data.get("system_message"),
            shots=int(data.get("shots", 0)),
            shots_from=None if source is None else (str(source[0]), str(source[1])),
            shot_seed=int(data.get("shot_seed", 0)),
            shot_format=ShotFormat(data.get("shot_format", ShotFormat.SINGLE_MESSAGE.value)),
        )


@dataclass(frozen=True, slots=True)
class Shot:
    """A solved example: a record of the evaluated dataset or of ``shots_from``."""

    record_id: str
    fields: Mapping[str, Any]


def shot_positions(record_count: int, options: PromptOptions) -> list[int]:
    """The record positions the examples are drawn from, in draw order: k + 1 of the
    evaluated dataset (one may be the record asked), or k of ``shots_from``."""
    if options.shots == 0:
        return []
    wanted = options.shots + (0 if options.shots_from is not None else 1)
    return random.Random(options.shot_seed).sample(range(record_count), min(wanted, record_count))


def shots_needed(options: PromptOptions) -> int:
    """Records the example source must hold."""
    if options.shots == 0:
        return 0
    return options.shots + (0 if options.shots_from is not None else 1)


@dataclass(frozen=True, slots=True)
class ChatPrompt:
    """The prompt of one task: template, options and the drawn examples."""

    task_type: TaskType
    template: str | None = None
    options: PromptOptions = field(default_factory=PromptOptions)
    pool: tuple[Shot, ...] = ()  # from ``shot_positions``, in that order
    source_sha256: str = ""  # content hash of the dataset the examples come from

    def shots_for(self, record_id: str) -> tuple[Shot, ...]:
        """The k examples shown before ``record_id`` (never the record itself)."""
        if self.options.shots_from is not None:
            return self.pool[: self.options.shots]
        return tuple(s for s in self.pool if s.record_id != record_id)[: self.options.shots]

    def render(self, fields: Mapping[str, Any], record_id: str) -> tuple[ChatMessage, ...]:
        """The chat messages for one record."""
        if not self.pool and self.options.system_message is None:
            return render_prompt(self.task_type, fields, self.template)  # zero-shot: one turn
        messages: list[ChatMessage] = []
        if self.options.system_message is not None:
            messages.append(ChatMessage(role="system", content=self.options.system_message))
        question = self._text(fields)
        shots = [
            (self._text(s.fields), shot_answer(self.task_type, s.fields))
            for s in self.shots_for(record_id)
        ]
        if self.options.shot_format is ShotFormat.CHAT_TURNS:
            for prompt, answer in shots:
                messages.append(ChatMessage(role="user", content=prompt))
                messages.append(ChatMessage(role="assistant", content=answer))
            messages.append(ChatMessage(role="user", content=question))
        else:
            blocks = [_solved(prompt, answer) for prompt, answer in shots]
            messages.append(ChatMessage(role="user", content="\n\n".join([*blocks, question])))
        return tuple(messages)

    def plain_text(self, fields: Mapping[str, Any], record_id: str) -> str:
        """The prompt as one text for a completions endpoint (no chat template): the
        system message, a blank line, then the examples and the record as in
        ``SINGLE_MESSAGE`` (whatever ``shot_format`` says: turns need a template)."""
        shots = [
            _solved(self._text(s.fields), shot_answer(self.task_type, s.fields))
            for s in self.shots_for(record_id)
        ]
        body = "\n\n".join([*shots, self._text(fields)])
        system = self.options.system_message
        return body if system is None else f"{system}\n\n{body}"

    def _text(self, fields: Mapping[str, Any]) -> str:
        return render_prompt(self.task_type, fields, self.template)[0].content

    def sha256(self) -> str:
        """The prompt hash recorded in provenance."""
        if self.options.is_default:
            return template_sha256(self.task_type, self.template)
        source = json.dumps(
            {
                "task_type": self.task_type.value,
                "template": self.template,
                "options": self.options.to_json(),
                "shots": [s.record_id for s in self.pool],
                "shots_sha256": self.source_sha256,
            },
            sort_keys=True,
        )
        return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _solved(prompt: str, answer: str) -> str:
    prompt = prompt.rstrip()
    return f"{prompt} {answer}" if prompt.endswith(":") else f"{prompt}\n{answer}"


def plain_prompt(task_type: TaskType, template: str | None) -> ChatPrompt:
    """A zero-shot prompt without a system message: the template alone."""
    return ChatPrompt(task_type=task_type, template=template)


def pool_of(
    records: Sequence[tuple[int, str, Mapping[str, Any]]], positions: Sequence[int]
) -> tuple[Shot, ...]:
    """The examples at ``positions`` (draw order) from (position, record_id, fields) rows."""
    by_position = {position: Shot(record_id, fields) for position, record_id, fields in records}
    return tuple(by_position[p] for p in positions if p in by_position)

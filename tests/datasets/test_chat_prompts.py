"""Chat prompts: system message, k-shot examples (never the record asked), layouts, hash."""

import pytest

from evald_server.datasets import (
    ChatPrompt,
    PromptOptions,
    Shot,
    plain_prompt,
    shot_positions,
    template_sha256,
)
from evald_server.domain import ShotFormat, TaskType

QA = [{"question": f"q{i}?", "answers": [f"a{i}"]} for i in range(10)]


def _prompt(**options: object) -> ChatPrompt:
    chosen = PromptOptions(**options)  # type: ignore[arg-type]
    positions = shot_positions(len(QA), chosen)
    pool = tuple(Shot(str(p), QA[p]) for p in positions)
    return ChatPrompt(TaskType.QA, "Q: {question}\nA:", chosen, pool, "sha")


@pytest.mark.parametrize("seed", range(20))
def test_a_record_is_never_its_own_example(seed: int) -> None:
    prompt = _prompt(shots=3, shot_seed=seed)
    assert len(prompt.pool) == 4
    for i in range(len(QA)):
        shots = prompt.shots_for(str(i))
        assert len(shots) == 3
        assert str(i) not in {s.record_id for s in shots}


def test_the_draw_is_fixed_by_the_seed() -> None:
    assert shot_positions(100, PromptOptions(shots=5, shot_seed=3)) == shot_positions(
        100, PromptOptions(shots=5, shot_seed=3)
    )
    assert shot_positions(100, PromptOptions(shots=5, shot_seed=3)) != shot_positions(
        100, PromptOptions(shots=5, shot_seed=4)
    )
    dev = PromptOptions(shots=2, shots_from=("dev", "1.0.0"))
    assert len(shot_positions(10, dev)) == 2  # from a dev split: no spare needed


def test_single_message_and_chat_turn_layouts() -> None:
    single = _prompt(system_message="Be brief.", shots=1, shot_seed=0)
    (shot,) = single.shots_for("9")
    system, user = single.render(QA[9], "9")
    assert (system.role, system.content) == ("system", "Be brief.")
    q = shot.fields["question"]
    assert user.content == f"Q: {q}\nA: {shot.fields['answers'][0]}\n\nQ: q9?\nA:"
    turns = _prompt(shots=1, shot_seed=0, shot_format=ShotFormat.CHAT_TURNS)
    messages = turns.render(QA[9], "9")
    assert [(m.role, m.content) for m in messages] == [
        ("user", f"Q: {q}\nA:"),
        ("assistant", shot.fields["answers"][0]),
        ("user", "Q: q9?\nA:"),
    ]


def test_the_prompt_hash_covers_options_and_examples() -> None:
    assert plain_prompt(TaskType.QA, None).sha256() == template_sha256(TaskType.QA, None)
    base = _prompt(shots=2, shot_seed=1)
    assert base.sha256() == _prompt(shots=2, shot_seed=1).sha256()
    others = [
        _prompt(shots=2, shot_seed=2),
        _prompt(shots=3, shot_seed=1),
        _prompt(shots=2, shot_seed=1, system_message="x"),
        _prompt(shots=2, shot_seed=1, shot_format=ShotFormat.CHAT_TURNS),
    ]
    assert len({base.sha256(), *(p.sha256() for p in others)}) == 5

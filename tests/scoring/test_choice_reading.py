"""Reading an answer against choices that differ only in what a careless normalisation
drops: signs (the Unicode minus too), decimal points, units and symbols. A verbatim
choice text is that choice; a normalised one keeps what tells the choices apart; and
choices that would still read the same are refused at upload (tests/datasets)."""

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from evald_server.datasets import choice_key, choice_letter, colliding_choices, letter_choices
from evald_server.scoring._choices import extract_choice

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SIGNED = ["\u22124", "\u22122", "10", "2"]  # "−4", "−2": the Unicode minus sign


@pytest.mark.parametrize(
    ("output", "index", "rule"),
    [
        ("2", 3, "exact_text"),
        ("\u22122", 1, "exact_text"),
        ("-2", 1, "choice_text"),  # the ASCII hyphen-minus is the same sign
        ("\u20132", 1, "choice_text"),  # an en dash before a digit too
        ("  -2. ", 1, "choice_text"),
        ("-4", 0, "choice_text"),
        ("10", 2, "exact_text"),
        ("The answer is -2.", 1, "choice_text_contained"),
        ("x = 2", 3, "choice_text_contained"),
        ("So x = \u22124, since 1 - 5 = \u22124", 0, "choice_text_contained"),
        ("The result is 2, clearly.", 3, "choice_text_contained"),
        ("either 2 or -2", None, "unmapped"),  # two choices
        ("not -2", None, "unmapped"),  # a negated choice
        ("2.0", None, "unmapped"),  # another number
        ("12", None, "unmapped"),
    ],
)
def test_signed_choices_keep_their_signs(output: str, index: int | None, rule: str) -> None:
    found = extract_choice(output, SIGNED)
    assert (found.index, found.rule) == (index, rule)


@pytest.mark.parametrize(
    ("choices", "output", "index"),
    [
        (["2.5", "25", "2,5", "-2.5"], "2.5", 0),
        (["2.5", "25", "2,5", "-2.5"], "It is 25.", 1),
        (["2.5", "25", "2,5", "-2.5"], "2,5", 2),
        (["2.5", "25", "2,5", "-2.5"], "The answer is \u22122.5", 3),
        (["0.5", ".5", "5"], "about .5", 1),
        (["5%", "5", "$5", "5 kg"], "5 %", 0),
        (["5%", "5", "$5", "5 kg"], "It costs $5.", 2),
        (["5%", "5", "$5", "5 kg"], "5 KG", 3),
        (["5%", "5", "$5", "5 kg"], "five", None),
        (["10 m", "10 cm", "10 m/s", "-10 m"], "10 m/s", 2),
        (["10 m", "10 cm", "10 m/s", "-10 m"], "10 CM.", 1),
        (["10 m", "10 cm", "10 m/s", "-10 m"], "It fell \u221210 m", 3),
        (["x < 3", "x > 3", "x = 3"], "x>3", 1),
        (["x < 3", "x > 3", "x = 3"], "so x<3", 0),
        (["100 °C", "100 °F", "100 K"], "100°F", 1),
        (["Paris", "Paris, Texas", "Lyon"], "Paris, Texas!", 1),
        (["Paris", "Paris, Texas", "Lyon"], "I mean Paris, Texas", 1),  # the longer mention
        (["Paris", "Paris, Texas", "Lyon"], "It is not Paris", None),
    ],
)
def test_near_duplicate_choices_stay_apart(
    choices: list[str], output: str, index: int | None
) -> None:
    assert colliding_choices(choices) == []
    assert extract_choice(output, choices).index == index


@pytest.mark.parametrize(
    ("choices", "groups"),
    [
        (["\u22122", "-2", "2"], [(0, 1)]),
        (["Paris", "paris.", " PARIS ", "Lyon"], [(0, 1, 2)]),
        (["a", "b", "a"], [(0, 2)]),
        (["5 %", "5%", "5", "$5", "$ 5"], [(0, 1), (3, 4)]),
        (["...", "?!", "x"], [(0, 1)]),  # nothing left of either: no answer reaches them
        (["2.5", "25", "-2.5", "+2.5"], []),
    ],
)
def test_colliding_choices_are_the_groups_with_one_key(
    choices: list[str], groups: list[tuple[int, ...]]
) -> None:
    assert colliding_choices(choices) == groups


def test_choices_sharing_a_key_are_reached_only_verbatim() -> None:
    # An older dataset stored before uploads refused such choices.
    choices = ["-2", "\u22122", "2"]
    assert extract_choice("-2", choices).index == 0
    assert extract_choice("\u22122", choices).index == 1
    assert extract_choice("- 2 ", choices).index == 2  # "- 2" is a dash, not a sign
    assert extract_choice("-2.", choices).index is None
    assert extract_choice("It is -2.", choices).index is None


# --- properties ---------------------------------------------------------------------

_CHOICE_TEXT = st.text(
    alphabet=st.sampled_from("ab xyz019.,-+\u2212\u2013%$°/()'\"!?:;_*é\u00a0\uff12"),
    min_size=1,
    max_size=12,
) | st.text(min_size=1, max_size=12)
_CHOICES = st.lists(_CHOICE_TEXT, min_size=2, max_size=8)


def _uploadable(choices: list[str]) -> bool:
    """As an upload accepts them: not blank, none reading like another or its letter."""
    return all(c.strip() for c in choices) and not (
        colliding_choices(choices) or letter_choices(choices)
    )


@SETTINGS
@given(_CHOICES)
def test_every_choice_text_maps_to_itself(choices: list[str]) -> None:
    assume(_uploadable(choices))
    for index, choice in enumerate(choices):
        assert extract_choice(choice, choices).index == index
        assert extract_choice(f"\n {choice}\t", choices).index == index


@SETTINGS
@given(_CHOICES)
def test_a_letter_and_a_choice_text_never_disagree(choices: list[str]) -> None:
    assume(_uploadable(choices))
    for index in range(len(choices)):
        letter = choice_letter(index)
        assert extract_choice(letter, choices).index == index
        assert extract_choice(letter.lower(), choices).index == index


_NUMBER = st.builds(
    lambda value, places: f"{value:.{places}f}", st.integers(-999, 999).map(lambda i: i / 4),
    st.integers(0, 2),
)  # fmt: skip
_UNIT = st.sampled_from(["", "%", " kg", " m/s", " °C"])


def _minus(text: str, sign: str) -> str:
    return text.replace("-", sign)


@SETTINGS
@given(
    st.lists(st.tuples(_NUMBER, _UNIT), min_size=2, max_size=8, unique=True),
    st.sampled_from(["-", "\u2212", "\u2013"]),
    st.sampled_from(["-", "\u2212"]),
    st.data(),
)
def test_numeric_choices_are_read_by_sign_decimals_and_unit(
    numbers: list[tuple[str, str]], written: str, answered: str, data: st.DataObject
) -> None:
    choices = [_minus(number, written) + unit for number, unit in numbers]
    assert colliding_choices(choices) == []  # distinct texts of numbers never collide
    index = data.draw(st.integers(0, len(choices) - 1))
    number, unit = numbers[index]
    answer = _minus(number, answered) + unit.upper()
    assert extract_choice(answer, choices).index == index
    assert extract_choice(f"The answer is {answer}.", choices).index == index
    assert extract_choice(f"{answer}, not another one", choices).index == index


@SETTINGS
@given(st.text(max_size=60))
def test_the_choice_key_never_raises_and_is_idempotent(text: str) -> None:
    key = choice_key(text)
    assert choice_key(key) == key
    assert key == key.strip()
    assert "  " not in key


def test_an_extraction_is_a_frozen_value() -> None:
    import dataclasses

    found = extract_choice("B", ["x", "y"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.index = 0  # type: ignore[misc]
    assert not hasattr(found, "__dict__")

"""Which candidate texts an answer mentions as whole words, and whether it negates one.

Both the answer and the candidates are given as keys (normalised, space-separated
words). A candidate is *mentioned* where its words occur in the answer's words as a
run; a mention inside a longer mention is part of that one ("not toxic" mentions the
label "not toxic", not also "toxic"). A mention is *negated* when one of ``NEGATIONS``
(or a contraction ending in "n't", whose apostrophe a key turns into a space: "isn t")
stands among the ``NEGATION_REACH`` words before it: "not neg", "isn't positive", "not
a very positive". An answer that negates a candidate is not read as any candidate:
"not neg" is no answer of "neg", and guessing which other label it means is no reading.
"""

from collections.abc import Collection, Sequence

# Words that negate what follows them (as keys write them: lower case, no apostrophes).
NEGATIONS = frozenset(
    {
        "not", "no", "never", "non", "neither", "nor", "cannot", "isnt", "arent", "wasnt",
        "werent", "dont", "doesnt", "didnt", "cant", "wont", "wouldnt", "shouldnt",
        "couldnt", "hasnt", "havent", "hadnt", "aint",
    }
)  # fmt: skip
# How many words before a mention a negation reaches: "not at all positive".
NEGATION_REACH = 3


def mentioned(
    words: Sequence[str], keys: Collection[str], lengths: Sequence[int]
) -> set[str] | None:
    """The keys among ``keys`` (whose lengths in words are ``lengths``) that ``words``
    mention; ``None`` when a mention is negated."""
    spans: list[tuple[int, int, str]] = []  # (start, -end, key): longer first at a start
    for length in lengths:
        for start in range(len(words) - length + 1):
            text = " ".join(words[start : start + length])
            if text in keys:
                spans.append((start, -(start + length), text))
    found: set[str] = set()
    reached = 0  # the furthest end of a mention so far: one ending within it is inside it
    for start, negative_end, key in sorted(spans):
        if -negative_end <= reached:
            continue
        reached = -negative_end
        if negated(words, start):
            return None
        found.add(key)
    return found


def negated(words: Sequence[str], start: int) -> bool:
    """Whether a negation stands among the ``NEGATION_REACH`` words before ``start``."""
    for i in range(max(start - NEGATION_REACH, 0), start):
        if words[i] in NEGATIONS or (words[i] == "t" and i > 0 and words[i - 1].endswith("n")):
            return True
    return False

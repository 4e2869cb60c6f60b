"""BIO tags → entity spans (the CoNLL convention seqeval also follows)."""

from collections.abc import Sequence


def bio_entities(tokens: Sequence[str], tags: Sequence[str]) -> list[dict[str, str]]:
    """Entities as ``{"text", "type"}`` with their tokens joined by one space.

    An ``I-X`` that does not continue an ``X`` span starts a new span, as in seqeval's
    default (non-strict) mode.
    """
    entities: list[dict[str, str]] = []
    span_type: str | None = None
    span_tokens: list[str] = []

    def close() -> None:
        nonlocal span_type
        if span_type is not None:
            entities.append({"text": " ".join(span_tokens), "type": span_type})
        span_type = None
        span_tokens.clear()

    for token, tag in zip(tokens, tags, strict=True):
        prefix, _, kind = tag.partition("-")
        if prefix == "B" or (prefix == "I" and kind != span_type):
            close()
            span_type = kind
            span_tokens.append(token)
        elif prefix == "I":
            span_tokens.append(token)
        else:
            close()
    close()
    return entities

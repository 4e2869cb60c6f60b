"""The CLI's tests reuse the SDK tests' fake EvaluationService on 127.0.0.1 port 0."""

from tests.client.conftest import address, servicer

__all__ = ["address", "servicer"]

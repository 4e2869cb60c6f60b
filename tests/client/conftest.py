"""Fixtures: a fake EvaluationService on a real grpc.aio server on 127.0.0.1 port 0."""

from collections.abc import Iterator

import pytest

from tests.client._servicer import FakeEvaluationService, serve_fake


@pytest.fixture
def servicer() -> FakeEvaluationService:
    return FakeEvaluationService()


@pytest.fixture
def address(servicer: FakeEvaluationService) -> Iterator[str]:
    with serve_fake(servicer) as target:
        yield target

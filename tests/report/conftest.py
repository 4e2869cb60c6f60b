from collections.abc import Iterator

import pytest

from tests.comparison._known_runs import KnownRuns, known_runs


@pytest.fixture(scope="package")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnownRuns]:
    yield from known_runs(tmp_path_factory.mktemp("known-runs"))

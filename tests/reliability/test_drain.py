"""SIGTERM mid-run: the server drains (claims nothing more, lets the calls in flight
finish within grace_s, writes every outcome), exits 0; restarted on the same store it
completes the run without asking the provider again for anything it had answered.
"""

from pathlib import Path

import pytest

from tests._shared import wait_for
from tests.reliability._rig import rig
from tests.reliability._support import query

pytestmark = pytest.mark.anyio

RECORDS = 300


async def test_sigterm_mid_run_then_restart_loses_nothing(tmp_path: Path) -> None:
    async with rig(tmp_path, latency_ms=20.0, max_concurrency=8) as the_rig:
        run_id = await the_rig.upload_and_run(await the_rig.start(), RECORDS)

        async def a_third_answered() -> bool:
            stats = await the_rig.fake.control.stats()
            return int(stats["outcomes"].get("ok", 0)) >= RECORDS // 3

        await wait_for(a_third_answered, timeout_s=60)
        code, drained = await the_rig.terminate()
        assert code == 0
        assert "draining" in the_rig.server.stderr()
        assert 0 < len(drained.finished) < RECORDS
        # The drain put every in-flight subtask back: nothing is left 'running'.
        states = dict(
            query(
                the_rig.db,
                "SELECT state, COUNT(*) FROM subtasks WHERE run_id = ? GROUP BY state",
                (run_id,),
            )
        )
        assert set(states) <= {"pending", "succeeded"}, states
        assert states["succeeded"] == len(drained.finished)
        # Every answer the fake gave is in the store: the calls in flight at the SIGTERM
        # were allowed to finish, none was aborted after its answer was paid for.
        answered = {e.key for e in await the_rig.fake.control.journal() if e.outcome == "ok"}
        assert answered == drained.finished

        await the_rig.start()
        final = await the_rig.finish(run_id)
        assert final.state.value == "succeeded"
        the_rig.assert_complete(run_id, RECORDS)
        await the_rig.assert_no_finished_work_repeated(drained)
        assert await the_rig.fake.control.duplicates_after_success() == {}

"""The whole job as a user's script does it, in a fresh client process: import the SDK,
upload a JSONL file, CreateRun, watch the run to its end, read the results, exit.

    python -m bench._client_job ADDRESS DATASET.jsonl NAME SPAWNED_AT

``bench_e2e`` spawns it and times it from the spawn to the exit; it prints one JSON line
of when each phase ended, in seconds since ``SPAWNED_AT`` (the parent's wall clock), so
the interpreter's start and the imports show apart from the job.
"""

import json
import sys
import time

_MAIN_AT = time.time()  # the interpreter has started and is running this module


def main() -> None:
    address, path, name, spawned_at = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    marks: dict[str, float] = {"interpreter": _MAIN_AT - spawned_at}

    def mark(phase: str) -> None:
        marks[phase] = time.time() - spawned_at

    import anyio

    from evald_client import AsyncEvaldClient, DatasetRef

    mark("imports")
    with open(path, "rb") as lines:
        records = sum(1 for _ in lines)

    async def job() -> None:
        async with AsyncEvaldClient(address, timeout_s=300) as client:
            await client.upload_dataset(
                name=name, version="1.0.0", task_type="classification", path=path
            )
            mark("upload")
            run = await client.create_run(models=["bench"], datasets=[DatasetRef(name, "1.0.0")])
            mark("create_run")
            async for _ in client.watch(run.run_id):
                pass
            mark("watch_end")
            results = await client.results(run.run_id)
            if [r.execution.samples_succeeded for r in results] != [records]:
                raise SystemExit(f"the run did not succeed whole: {results}")
            mark("results")

    anyio.run(job)
    print(json.dumps(marks), flush=True)


if __name__ == "__main__":
    main()

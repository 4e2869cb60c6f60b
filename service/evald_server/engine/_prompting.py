"""The chat prompt of a task: its options resolved and its k-shot examples loaded.

The same function serves the executor (what is sent), ListSamples (what is shown) and
provenance (what is hashed), so the three always agree. Options come from the run
(``RunSpec.prompt_for``), else from the dataset's upload; examples are read from the
store by position (``shot_positions``), at most ``MAX_SHOTS + 1`` records.
"""

from evald_server.datasets import (
    ChatPrompt,
    PromptOptions,
    plain_prompt,
    pool_of,
    shot_positions,
    shots_needed,
)
from evald_server.domain import TaskType
from evald_server.engine._spec import DatasetRef, RunSpec
from evald_server.store import DatasetRow, Store


class ShotSourceProblem(Exception):
    """The examples cannot be drawn: ``field`` names the option, ``message`` says why."""

    def __init__(self, field: str, message: str, *, not_found: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.not_found = not_found


def effective_options(spec: RunSpec | None, dataset: DatasetRow) -> PromptOptions:
    """The run's prompt options for ``dataset``, else those it was uploaded with."""
    chosen = None
    if spec is not None:
        chosen = spec.prompt_for(DatasetRef(dataset.name, dataset.benchmark_version))
    if chosen is None and dataset.prompt_options is not None:
        chosen = PromptOptions.from_json(dataset.prompt_options)
    return chosen or PromptOptions()


async def shot_source(
    store: Store,
    tenant: str,
    task_type: TaskType,
    options: PromptOptions,
    *,
    own_record_count: int,
    field: str,
) -> DatasetRow | None:
    """The dataset the examples come from (None: the evaluated one); raises
    ``ShotSourceProblem`` when it is missing, of another task type, or too small."""
    if options.shots == 0:
        return None
    needed = shots_needed(options)
    if options.shots_from is None:
        if own_record_count < needed:
            raise ShotSourceProblem(
                f"{field}.shots",
                f"{options.shots} examples drawn from the dataset itself need at least "
                f"{needed} records (one is left out for the record asked); it has "
                f"{own_record_count}",
            )
        return None
    name, version = options.shots_from
    source = await store.find_dataset(tenant, name, version)
    if source is None:
        raise ShotSourceProblem(
            f"{field}.shots_from", f"dataset {name} {version} not found", not_found=True
        )
    if source.task_type is not task_type:
        raise ShotSourceProblem(
            f"{field}.shots_from",
            f"dataset {name} {version} is {source.task_type.value}, not {task_type.value}",
        )
    if source.record_count < needed:
        raise ShotSourceProblem(
            f"{field}.shots",
            f"{options.shots} examples need {needed} records; {name} {version} has "
            f"{source.record_count}",
        )
    return source


async def task_prompt(
    store: Store, tenant: str, spec: RunSpec | None, dataset: DatasetRow
) -> ChatPrompt:
    """The prompt every record of ``dataset`` is sent with in a run of ``spec``."""
    options = effective_options(spec, dataset)
    if options.is_default:
        return plain_prompt(dataset.task_type, dataset.prompt_template)
    source = await shot_source(
        store,
        tenant,
        dataset.task_type,
        options,
        own_record_count=dataset.record_count,
        field="prompt",
    )
    origin = dataset if source is None else source
    positions = shot_positions(origin.record_count, options)
    rows = await store.read_records(origin.dataset_id, sorted(positions)) if positions else []
    return ChatPrompt(
        task_type=dataset.task_type,
        template=dataset.prompt_template,
        options=options,
        pool=pool_of([(r.idx, r.record_id, r.fields) for r in rows], positions),
        source_sha256=origin.content_sha256,
    )

"""Argument parsing, usage errors, and run spec files (TOML and JSON)."""

import json
from pathlib import Path

import pytest

from evald_cli._commands import upload_prompt
from evald_cli._errors import CliError
from evald_cli._parser import build_parser
from evald_cli._spec import load_spec
from evald_cli.main import main
from evald_client import (
    ChoiceContinuation,
    ChoiceScoring,
    DatasetRef,
    GenerationParams,
    PromptFormat,
    PromptOptions,
    Reducer,
    ReducerKind,
    RetryPolicy,
    ShotFormat,
)


def test_every_client_command_takes_server_and_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALD_SERVER", "10.0.0.1:7000")
    monkeypatch.setenv("EVALD_TOKEN", "from-env")
    parser = build_parser()
    commands = [
        ["models"],
        ["datasets", "upload", "f.jsonl", "--name", "n", "--version", "1", "--task-type", "qa"],
        ["datasets", "list"],
        ["submit", "spec.toml"],
        ["watch", "r-1"],
        ["results", "r-1"],
        ["samples", "r-1"],
        ["cancel", "r-1"],
        ["retry", "r-1"],
    ]
    for argv in commands:
        args = parser.parse_args(argv)
        assert (args.server, args.token) == ("10.0.0.1:7000", "from-env"), argv
        args = parser.parse_args([*argv, "--server", "127.0.0.1:1", "--token", "t"])
        assert (args.server, args.token) == ("127.0.0.1:1", "t"), argv


def test_defaults_without_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALD_SERVER", raising=False)
    monkeypatch.delenv("EVALD_TOKEN", raising=False)
    args = build_parser().parse_args(["samples", "r-1", "--failed", "--task", "t-2"])
    assert args.server == "127.0.0.1:50051"
    assert args.token is None
    assert (args.failed, args.task, args.limit) == (True, "t-2", None)
    retry = build_parser().parse_args(
        ["retry", "r-1", "--task", "a", "--task", "b", "--category", "model_provider_error"]
    )
    assert retry.task == ["a", "b"]
    assert retry.category == ["model_provider_error"]


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["serve"],
        ["datasets", "upload", "f.jsonl", "--name", "n", "--version", "1", "--task-type", "poem"],
        ["datasets"],
        ["samples", "r-1", "--limit", "-3"],
        ["samples", "r-1", "--limit", "many"],
        ["retry", "r-1", "--category", "bad_luck"],
        ["watch"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage: evald" in err
    assert "evald" in err.splitlines()[-1]
    assert "error:" in err.splitlines()[-1]


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "submit" in capsys.readouterr().out


TOML_SPEC = """
name = "nightly"
models = ["sim-a", "sim-b"]
datasets = [{ name = "sentiment", version = "1.0.0" }, "reading_qa@2.0.0"]
max_concurrency = 8
repeat = 2
request_id = "req-1"

[retry_policy]
max_retries = 2
backoff_s = [0.5, 2.0]
jitter_fraction = 0.1

[generation]
temperature = 0.0
max_tokens = 64
stop = ["\\n"]

[labels]
team = "search"
"""


def _check_full_spec(path: Path) -> None:
    spec = load_spec(path)
    assert spec.name == "nightly"
    assert spec.models == ["sim-a", "sim-b"]
    assert spec.dataset_refs() == [
        DatasetRef("sentiment", "1.0.0"),
        DatasetRef("reading_qa", "2.0.0"),
    ]
    assert (spec.max_concurrency, spec.repeat, spec.request_id) == (8, 2, "req-1")
    assert spec.retry() == RetryPolicy(max_retries=2, backoff_s=(0.5, 2.0), jitter_fraction=0.1)
    assert spec.generation_params() == GenerationParams(
        temperature=0.0, max_tokens=64, stop=("\n",)
    )
    assert spec.labels == {"team": "search"}


def test_toml_spec(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(TOML_SPEC, encoding="utf-8")
    _check_full_spec(path)


def test_json_spec(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    data = {
        "name": "nightly",
        "models": ["sim-a", "sim-b"],
        "datasets": [{"name": "sentiment", "version": "1.0.0"}, "reading_qa@2.0.0"],
        "max_concurrency": 8,
        "repeat": 2,
        "request_id": "req-1",
        "retry_policy": {"max_retries": 2, "backoff_s": [0.5, 2.0], "jitter_fraction": 0.1},
        "generation": {"temperature": 0.0, "max_tokens": 64, "stop": ["\n"]},
        "labels": {"team": "search"},
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    _check_full_spec(path)


def test_minimal_spec_leaves_the_rest_to_the_server(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text('{"models": ["m"], "datasets": ["d@1"]}', encoding="utf-8")
    spec = load_spec(path)
    assert spec.retry() is None
    assert spec.generation_params() is None
    assert (spec.max_concurrency, spec.repeat, spec.name) == (None, 1, "")


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a.toml", 'models = ["m"]', "datasets: Field required"),
        ("a.toml", 'models = []\ndatasets = ["d@1"]', "models: List should have at least 1 item"),
        ("a.toml", 'models = ["m"]\ndatasets = ["nover"]', "'nover' is not 'name@version'"),
        ("a.json", '{"models": ["m"], "datasets": [{"name": "d"}]}', "datasets[0].version"),
        ("a.json", '{"models": ["m"], "datasets": ["d@1"], "colour": 1}', "colour: Extra"),
        ("a.json", '{"models": ["m"], "datasets": ["d@1"], "repeat": 0}', "repeat: Input should"),
        (
            "a.json",
            '{"models": ["m"], "datasets": ["d@1"], "retry_policy": {"max_retries": -1}}',
            "retry_policy.max_retries",
        ),
        (
            "a.json",
            '{"models": ["m"], "datasets": ["d@1"], "generation": {"top_p": 0}}',
            "generation.top_p",
        ),
        ("a.json", '{"models": ["m"], "datasets": ["d@1"], "reducers": ["pass@x"]}', "pass@K"),
        ("a.json", '{"models": ["m"], "datasets": ["d@1"], "reducers": ["best"]}', "'best'"),
        ("a.json", '{"models": ["m"],', "invalid JSON"),
        ("a.toml", "models = [", "invalid TOML"),
        ("a.json", "[1, 2]", "a run spec is a table/object, not list"),
        ("a.yaml", "models: [m]", "unknown spec format '.yaml'"),
    ],
)
def test_bad_specs_fail_with_one_line_naming_the_problem(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CliError) as info:
        load_spec(path)
    message = str(info.value)
    assert expected in message
    assert message.startswith(str(path))
    assert "\n" not in message


def test_reducers_in_a_spec(tmp_path: Path) -> None:
    path = tmp_path / "run.toml"
    path.write_text(
        'models = ["m"]\ndatasets = ["d@1"]\nrepeat = 5\n'
        'reducers = ["pass@1", "pass^5", "majority", "mean"]\n',
        encoding="utf-8",
    )
    spec = load_spec(path)
    assert spec.reducers == [
        Reducer(ReducerKind.PASS_AT_K, 1),
        Reducer(ReducerKind.PASS_HAT_K, 5),
        Reducer(ReducerKind.MAJORITY),
        Reducer(ReducerKind.MEAN),
    ]
    assert [r.name for r in spec.reducers] == ["pass@1", "pass^5", "majority", "mean"]


def test_a_bad_spec_exits_1_with_one_line_before_contacting_anyone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.toml"
    path.write_text('models = ["m"]', encoding="utf-8")
    # Port 1 on loopback: nothing listens, and nothing needs to: the spec fails first.
    assert main(["submit", str(path), "--server", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err
    assert err == f"evald: error: {path}: datasets: Field required\n"


def test_a_missing_spec_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", str(tmp_path / "nope.toml"), "--server", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err.endswith("nope.toml: no such file\n")


def test_spec_with_per_dataset_settings_and_a_run_prompt(tmp_path: Path) -> None:
    path = tmp_path / "bench.toml"
    path.write_text(
        """
models = ["m"]
choice_scoring = "text"

[prompt]
system_message = "Be brief."

[[datasets]]
name = "gsm"
version = "1.0.0"

[[datasets]]
name = "mmlu"
version = "1.0.0"
choice_scoring = "logprobs"
generation = { max_tokens = 2 }
prompt = { shots = 5, shots_from = "mmlu-dev@1.0.0", shot_format = "chat_turns" }
"""
    )
    spec = load_spec(path)
    (options,) = spec.dataset_options()
    assert options.dataset == DatasetRef("mmlu", "1.0.0")
    assert options.generation is not None
    assert options.generation.max_tokens == 2
    assert options.prompt == PromptOptions(
        shots=5, shots_from=DatasetRef("mmlu-dev", "1.0.0"), shot_format=ShotFormat.CHAT_TURNS
    )
    assert options.choice_scoring is ChoiceScoring.LOGPROBS
    assert spec.run_prompt() == PromptOptions(system_message="Be brief.")
    assert spec.dataset_refs() == [DatasetRef("gsm", "1.0.0"), DatasetRef("mmlu", "1.0.0")]


def test_upload_prompt_flags() -> None:
    args = build_parser().parse_args(
        ["datasets", "upload", "f.jsonl", "--name", "n", "--version", "1.0.0",
         "--task-type", "multiple_choice", "--system-message", "Hi", "--shots", "2",
         "--shots-from", "dev@1.0.0", "--shot-seed", "9"]
    )  # fmt: skip
    assert upload_prompt(args) == PromptOptions(
        system_message="Hi", shots=2, shots_from=DatasetRef("dev", "1.0.0"), shot_seed=9
    )
    plain = build_parser().parse_args(
        ["datasets", "upload", "f.jsonl", "--name", "n", "--version", "1", "--task-type", "qa"]
    )
    assert upload_prompt(plain) is None


def test_upload_help_asks_for_a_semantic_version(capsys: pytest.CaptureFixture[str]) -> None:
    # It suggested "--version 1.0", which the server refuses.
    assert main(["datasets", "upload", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "semantic version MAJOR.MINOR.PATCH, e.g. 1.0.0" in text
    assert "e.g. 1.0 " not in text.replace("e.g. 1.0.0", "")


def test_spec_with_loglikelihood_scoring_and_a_prompt_format(tmp_path: Path) -> None:
    path = tmp_path / "arc.toml"
    path.write_text(
        """
models = ["m"]
prompt_format = "plain"

[[datasets]]
name = "arc"
version = "1.0.0"
choice_scoring = "loglikelihood"
choice_continuation = "texts"

[[datasets]]
name = "gsm"
version = "1.0.0"
prompt_format = "chat"
"""
    )
    spec = load_spec(path)
    arc, gsm = spec.dataset_options()
    assert arc.choice_scoring is ChoiceScoring.LOGLIKELIHOOD
    assert arc.choice_continuation is ChoiceContinuation.TEXTS
    assert gsm.prompt_format is PromptFormat.CHAT
    assert spec.prompt_format == "plain"
    path.write_text('models = ["m"]\ndatasets = ["a@1"]\nchoice_continuation = "texts"\n')
    with pytest.raises(CliError, match="choice_continuation"):
        load_spec(path)

"""A ScoringSample crosses to the scoring workers pickled (``__reduce__``): every field
comes back, and the default ones stay defaults."""

import pickle

from evald_server.scoring import ScoringSample


def test_a_scoring_sample_comes_back_from_pickle_with_every_field() -> None:
    full = ScoringSample(
        "17",
        "r3",
        2,
        {"id": "r3", "input": "x", "label": "pos", "choices": ["pos", "neg"]},
        "pos",
        input_text="Classify: x",
        top_logprobs=(("pos", -0.1), ("neg", -2.5)),
    )
    plain = ScoringSample("18", "r4", 0, {"id": "r4"}, None)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        for sample in (full, plain):
            again = pickle.loads(pickle.dumps(sample, protocol=protocol))
            assert again == sample
            assert type(again) is ScoringSample

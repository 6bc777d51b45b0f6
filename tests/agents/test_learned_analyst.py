"""The learned analyst: features computed by hand, the artefact's version check, p(up) by hand,
and the shipped artefact loads with the version its coefficients give."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from agents.analysts import learned


def test_price_features_by_hand() -> None:
    adj = [100.0] * 14 + [100.0, 101.0, 99.0, 99.0, 102.0, 100.0]  # 20 bars, the last is d-1
    volume = [1000.0] * 15 + [2000.0, 1000.0, 1000.0, 1000.0, 4000.0]
    got = learned.price_features(adj, volume)
    rets = [math.log(100 / 102), math.log(102 / 99), 0.0, math.log(99 / 101), math.log(101 / 100)]
    for k, r in enumerate(rets, start=1):
        assert got[f"ret_{k}"] == pytest.approx(r)
    mean = sum(rets) / 5
    assert got["vol_5"] == pytest.approx(math.sqrt(sum((r - mean) ** 2 for r in rets) / 5))
    # last 5 volumes mean 1800, last 20 mean (15·1000 + 2000 + 3·1000 + 4000)/20 = 1200
    assert got["volume_1"] == pytest.approx(math.log(4000 / 1800))
    assert got["volume_5"] == pytest.approx(math.log(1800 / 1200))
    with pytest.raises(ValueError, match="20 bars"):
        learned.price_features(adj[:10], volume[:10])


def test_social_features_bucket_posts_by_session() -> None:
    bounds = [datetime(2015, 8, d, 20, tzinfo=UTC) for d in (3, 4, 5, 6, 7)] + [
        datetime(2015, 8, 10, 20, tzinfo=UTC)
    ]
    posts = [
        {"text": "great", "reach": 0, "lang": "en", "created_at": "2015-08-08T12:00:00Z"},  # session 1
        {"text": "terrible", "reach": 99, "lang": "en", "created_at": "2015-08-04T10:00:00Z"},  # session 5
        {"text": "great", "reach": 0, "lang": "en", "created_at": "2015-08-10T20:00:00Z"},  # at the cut: out
        {"text": "super", "reach": 0, "lang": "fr", "created_at": "2015-08-09T12:00:00Z"},  # not scored
    ]
    got = learned.social_features(posts, bounds=bounds, tweets=7)
    great, terrible = 0.6249, -0.4767  # VADER compounds of the single words
    assert got["sent_1"] == pytest.approx(great, abs=1e-4)
    assert got["sent_5"] == pytest.approx(terrible, abs=1e-4)
    assert got["sent_2"] == got["sent_3"] == got["sent_4"] == 0.0
    # weights 1 (reach 0) and 3 (reach 99): (1·great + 3·terrible) / 4; unweighted: the plain mean
    assert got["sent_window"] == pytest.approx((great + 3 * terrible) / 4, abs=1e-4)
    assert got["sent_plain"] == pytest.approx((great + terrible) / 2, abs=1e-4)
    assert got["posts_log"] == pytest.approx(math.log(8)) and got["has_posts"] == 1.0
    empty = learned.social_features([], bounds=bounds, tweets=0)
    assert empty["has_posts"] == 0.0 and empty["sent_window"] == 0.0
    with pytest.raises(ValueError, match="ascending"):
        learned.social_features([], bounds=bounds[::-1], tweets=0)


def _params(**over: object) -> dict[str, object]:
    params: dict[str, object] = {
        "features": ["ret_1", "vol_5"],
        "mean": [0.0, 0.01],
        "scale": [0.01, 0.005],
        "coef": [-0.5, 0.2],
        "intercept": 0.1,
    }
    params.update(over)
    params.setdefault("version", learned.model_version(params))
    return params


def test_model_predicts_by_hand_and_refuses_broken_artefacts() -> None:
    model = learned.parse(_params())
    # z = 0.1 - 0.5·(0.02 - 0)/0.01 + 0.2·(0.02 - 0.01)/0.005 = 0.1 - 1 + 0.4 = -0.5
    assert model.p_up({"ret_1": 0.02, "vol_5": 0.02}) == pytest.approx(1 / (1 + math.exp(0.5)))
    view = learned.learned_summary(model=model, values={"ret_1": 0.02, "vol_5": 0.02}, refs=["h"], weight=0.0)
    assert view["label"] == "DOWN" and view["p_up"] == 0.3775 and view["score"] == -0.2449
    assert view["version"] == model.version and view["source_refs"] == ["h"]
    with pytest.raises(learned.LearnedModelError, match="missing"):
        model.p_up({"ret_1": 0.0})
    with pytest.raises(learned.LearnedModelError, match="version"):
        learned.parse(_params(version="lr-000000000000"))
    with pytest.raises(learned.LearnedModelError, match="unknown"):
        learned.parse(_params(features=["ret_1", "moon_phase"]))
    with pytest.raises(learned.LearnedModelError, match="length"):
        learned.parse(_params(coef=[1.0]))


def test_shipped_artefact_loads_and_records_its_choice() -> None:
    model = learned.load()
    assert model.version == learned.model_version(model.raw)
    assert model.raw["trained_on"]["split"] == "train" and model.raw["chosen_on"]["split"] == "dev"
    assert "test" not in str(model.raw["chosen_on"])  # chosen without the test split

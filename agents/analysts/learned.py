"""The learned analyst: a logistic regression over point-in-time price and social features that
gives p(the next session's adjusted close moves up), trained on the ACL18 train split of the
stocknet data (Xu & Cohen, ACL 2018) and shipped as a small JSON of coefficients
(``learned_model.json`` beside this module; no pickle).

Target day ``d`` is the session after the last bar read (the analysis' ``as_of``); every input
ends at the close of ``d-1``:

Price features (``adj`` the adjusted closes, ``v`` the volumes, oldest first, the last one
``d-1``; at least :data:`MIN_BARS` bars):

- ``ret_1 .. ret_5``: the log returns ``ln(adj[d-k] / adj[d-k-1])``, ``k = 1..5`` (fractions);
- ``vol_5``: their population standard deviation;
- ``volume_1``: ``ln(v[d-1] / mean(v[d-5 .. d-1]))``; ``volume_5``: ``ln(mean of the last 5 /
  mean of the last 20 volumes)`` (0 when a mean is 0).

Social features, from the collapsed posts (``agents.data.social.posts.collapse``) of the
5-session window ``[close(d-6), close(d-1))``, each post in the session bucket of its first
copy's time:

- ``sent_1 .. sent_5``: the reach-weighted mean sentiment of bucket ``k`` (``sent_1`` the
  session that closed at ``d-1``; :func:`agents.analysts.social.social_score`; 0 without an
  English post);
- ``sent_window``: the same over the whole window; ``sent_plain``: the unweighted mean;
- ``posts_log``: ``ln(1 + tweets in the window)``; ``has_posts``: 1 with an English post, else 0.

The model (scikit-learn ``LogisticRegression``, L2) standardises each feature with the train
split's mean and scale, then ``p = 1 / (1 + exp(-(b + Σ w_i z_i)))``. Which features and which
regularisation were chosen on the dev split only (the artefact records the candidates). The
analyst's score is ``2p - 1`` in [-1, 1]; its call is UP at p ≥ 0.5, else DOWN.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any

from agents.analysts.social import social_score

#: Sessions of the lag window (the benchmark's).
LAG = 5
#: Bars needed for the price features (20 volumes for ``volume_5`` and 6 closes for 5 returns).
MIN_BARS = 20
PRICE_FEATURES: tuple[str, ...] = (
    "ret_1",
    "ret_2",
    "ret_3",
    "ret_4",
    "ret_5",
    "vol_5",
    "volume_1",
    "volume_5",
)
SOCIAL_FEATURES: tuple[str, ...] = (
    "sent_1",
    "sent_2",
    "sent_3",
    "sent_4",
    "sent_5",
    "sent_window",
    "sent_plain",
    "posts_log",
    "has_posts",
)
ALL_FEATURES = PRICE_FEATURES + SOCIAL_FEATURES
MODEL_PATH = Path(__file__).with_name("learned_model.json")


class LearnedModelError(ValueError):
    """The artefact is missing, malformed, or asks for a feature that was not computed."""


def price_features(adj: Sequence[float], volume: Sequence[float]) -> dict[str, float]:
    """The price features of the module docstring from the last bars up to ``d-1`` (oldest
    first). Raises ``ValueError`` with fewer than :data:`MIN_BARS` bars or a non-positive close."""
    if len(adj) < MIN_BARS or len(volume) < MIN_BARS:
        raise ValueError(f"price features need {MIN_BARS} bars, got {min(len(adj), len(volume))}")
    tail = [float(x) for x in adj[-(LAG + 1) :]]
    if min(tail) <= 0:
        raise ValueError("price features need positive adjusted closes")
    rets = [math.log(tail[-k] / tail[-k - 1]) for k in range(1, LAG + 1)]
    mean = sum(rets) / LAG
    out = {f"ret_{k}": rets[k - 1] for k in range(1, LAG + 1)}
    out["vol_5"] = math.sqrt(sum((r - mean) ** 2 for r in rets) / LAG)
    v5 = sum(float(x) for x in volume[-LAG:]) / LAG
    v20 = sum(float(x) for x in volume[-20:]) / 20
    last = float(volume[-1])
    out["volume_1"] = math.log(last / v5) if last > 0 and v5 > 0 else 0.0
    out["volume_5"] = math.log(v5 / v20) if v5 > 0 and v20 > 0 else 0.0
    return out


def social_features(
    posts: Sequence[dict[str, Any]], *, bounds: Sequence[datetime], tweets: int
) -> dict[str, float]:
    """The social features of the module docstring.

    Args:
        posts: collapsed posts ``{text, reach, lang, created_at}`` (``created_at`` a datetime or
            an ISO string, UTC) of the window; posts outside ``[bounds[0], bounds[-1])`` are ignored.
        bounds: the :data:`LAG` + 1 session closes ``close(d-6) .. close(d-1)``, ascending (UTC).
        tweets: tweets in the window (copies included), for ``posts_log``.
    Raises ``ValueError`` when ``bounds`` has the wrong length or is not ascending."""
    if len(bounds) != LAG + 1 or any(later <= earlier for earlier, later in pairwise(bounds)):
        raise ValueError(f"social features need {LAG + 1} ascending session closes")
    buckets: list[list[dict[str, Any]]] = [[] for _ in range(LAG)]
    inside: list[dict[str, Any]] = []
    for post in posts:
        stamp = post["created_at"]
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00")) if isinstance(stamp, str) else stamp
        if not bounds[0] <= when < bounds[-1]:
            continue
        inside.append(post)
        for k in range(LAG):  # bucket 0 = the session closing at d-1
            if bounds[LAG - k - 1] <= when < bounds[LAG - k]:
                buckets[k].append(post)
                break
    out: dict[str, float] = {}
    for k in range(LAG):
        score, _, _ = social_score(buckets[k])
        out[f"sent_{k + 1}"] = score or 0.0
    window, scored, _ = social_score(inside)
    out["sent_window"] = window or 0.0
    plain, _, _ = social_score([{**p, "reach": 0} for p in inside])
    out["sent_plain"] = plain or 0.0
    out["posts_log"] = math.log1p(max(0, tweets))
    out["has_posts"] = 1.0 if scored else 0.0
    return out


@dataclass(frozen=True)
class LearnedModel:
    """A loaded artefact: ``features`` (names), their train ``mean`` and ``scale``, the
    logistic ``coef`` (per standardised feature) and ``intercept``, and ``version``
    (``lr-`` + the first 12 hex digits of the sha256 of those five fields' canonical JSON)."""

    version: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    raw: dict[str, Any]

    def p_up(self, values: dict[str, float]) -> float:
        """p(up) for the feature ``values`` (a mapping with every name in ``features``).
        Raises :class:`LearnedModelError` for a missing or non-finite feature."""
        z = self.intercept
        for name, mu, sd, w in zip(self.features, self.mean, self.scale, self.coef, strict=True):
            if name not in values or not math.isfinite(values[name]):
                raise LearnedModelError(f"feature {name!r} missing or not finite")
            z += w * (values[name] - mu) / sd
        return 1.0 / (1.0 + math.exp(-z))


def model_version(params: dict[str, Any]) -> str:
    """``lr-`` + 12 hex digits of the sha256 of ``{features, mean, scale, coef, intercept}``
    as sorted, compact JSON: the version recorded in every report that uses the model."""
    core = {k: params[k] for k in ("features", "mean", "scale", "coef", "intercept")}
    digest = hashlib.sha256(json.dumps(core, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return "lr-" + digest[:12]


def parse(raw: dict[str, Any]) -> LearnedModel:
    """A :class:`LearnedModel` from the artefact's JSON object. Raises
    :class:`LearnedModelError` for missing keys, unequal lengths, an unknown feature, a
    non-positive scale or a version that does not match the coefficients."""
    try:
        features = tuple(str(f) for f in raw["features"])
        mean = tuple(float(x) for x in raw["mean"])
        scale = tuple(float(x) for x in raw["scale"])
        coef = tuple(float(x) for x in raw["coef"])
        intercept = float(raw["intercept"])
        version = str(raw["version"])
    except (KeyError, TypeError, ValueError) as exc:
        raise LearnedModelError(f"learned model artefact malformed: {exc}") from exc
    if not features or not len(features) == len(mean) == len(scale) == len(coef):
        raise LearnedModelError("learned model artefact: features, mean, scale and coef differ in length")
    if unknown := [f for f in features if f not in ALL_FEATURES]:
        raise LearnedModelError(f"learned model artefact: unknown features {unknown}")
    if min(scale) <= 0:
        raise LearnedModelError("learned model artefact: a scale is not positive")
    if version != model_version(raw):
        raise LearnedModelError(f"learned model artefact: version {version} does not match its coefficients")
    return LearnedModel(version, features, mean, scale, coef, intercept, raw)


@lru_cache(maxsize=4)
def load(path: Path = MODEL_PATH) -> LearnedModel:
    """The artefact at ``path`` (default: the shipped ``learned_model.json``), parsed once.
    Raises :class:`LearnedModelError` when it is missing or malformed."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LearnedModelError(f"learned model artefact {path}: {exc}") from exc
    return parse(raw)


def needs_social(model: LearnedModel) -> bool:
    """Whether the model reads any social feature."""
    return any(f in SOCIAL_FEATURES for f in model.features)


def learned_summary(
    *, model: LearnedModel, values: dict[str, float], refs: Sequence[str], weight: float
) -> dict[str, Any]:
    """The analyst's view for a report: ``{label: UP|DOWN, p_up (4 decimals), score (2p-1, 4
    decimals), version, features {name: value (6 decimals)} of the model, weight_in_composite,
    note, source_refs}``, ``refs`` the tool calls its inputs came from (history, social posts).
    Raises :class:`LearnedModelError` for a missing feature."""
    p = model.p_up(values)
    return {
        "label": "UP" if p >= 0.5 else "DOWN",
        "p_up": round(p, 4),
        "score": round(2 * p - 1, 4) + 0.0,
        "version": model.version,
        "features": {f: round(values[f], 6) + 0.0 for f in model.features},
        "weight_in_composite": weight,
        "note": (
            "Logistic regression trained on the ACL18 train split (stocknet, 2014-01-01 .. 2015-08-01): "
            "p(next session's adjusted close up); its measured accuracy: docs/benchmarks.md, ACL18."
        ),
        "source_refs": list(refs),
    }

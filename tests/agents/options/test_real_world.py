"""The seam between the option plans and the risk forecast (``agents.quant.options.real_world``):
the forecast's own P(below), P(touch) and σ, in the chain's units, for any horizon; the interim
EWMA model only when the forecast cannot be built, and said so."""

from __future__ import annotations

import math
from datetime import date
from pathlib import Path

import pytest

from agents.data.market.csv_folder import CsvFolderProvider
from agents.quant.options.probabilities import LognormalRealWorld
from agents.quant.options.real_world import ForecastRealWorld, annual_sigma, real_world_model
from agents.quant.risk import forecast_risk

AS_OF = date(2015, 12, 24)


def _bars(stocknet_dir: Path, start: date) -> object:
    return CsvFolderProvider(data_dir=stocknet_dir).bars(symbol="GOOG", start=start, end=AS_OF)


def test_the_model_is_the_risk_forecast_in_the_chains_units(stocknet_dir: Path) -> None:
    bars = _bars(stocknet_dir, date(2013, 12, 24))
    direct = forecast_risk(bars, symbol="GOOG", as_of=AS_OF, horizons=(14, 33))
    # a chain quoted at twice the bars' prices (as across a 2:1 split): levels scale with it
    spot = 2 * direct.close
    model = real_world_model(bars=bars, symbol="GOOG", as_of=AS_OF, spot=spot, horizons=(14,))
    assert isinstance(model, ForecastRealWorld) and model.source.startswith("risk forecast risk-")
    # its σ a year (a fraction) as the risk section prints it: a percentage to two decimals
    assert f"; σ {100 * direct.sigma_annual:.2f} % a year outside report days" in model.source
    assert model.prob_below(2 * 725.0, 14) == pytest.approx(direct.prob_below(725.0, 14), abs=1e-12)
    assert model.prob_touch(2 * 725.0, 14) == pytest.approx(direct.prob_touch(725.0, 14), abs=1e-12)
    assert model.sigma(14) == pytest.approx(direct.horizon(14).sigma, abs=1e-12)
    # a horizon it was not built for is forecast on first use, the same as built up front
    assert model.prob_touch(2 * 700.0, 33) == pytest.approx(direct.prob_touch(700.0, 33), abs=1e-9)
    assert annual_sigma(model, 14) == pytest.approx(direct.horizon(14).sigma * math.sqrt(252 / 14))
    # the probabilities read as a desk reads them: a touch is likelier than ending below
    assert model.prob_touch(2 * 725.0, 14) > model.prob_below(2 * 725.0, 14) > 0


def test_too_few_sessions_fall_back_to_the_interim_model_and_say_so(stocknet_dir: Path) -> None:
    bars = _bars(stocknet_dir, date(2015, 10, 20))  # about 46 sessions
    assert 22 <= len(bars) < 60  # the forecast wants 60 sessions, the EWMA 22
    model = real_world_model(bars=bars, symbol="GOOG", as_of=AS_OF, spot=748.4)
    assert isinstance(model, LognormalRealWorld)
    assert model.source.startswith("interim model (the risk forecast cannot be built:")
    short = _bars(stocknet_dir, date(2015, 12, 1))
    with pytest.raises(ValueError, match="the EWMA needs at least 22"):
        real_world_model(bars=short, symbol="GOOG", as_of=AS_OF, spot=748.4)

"""CsvFolderProvider on the real stocknet CSVs and on small folders built from their real rows."""

from __future__ import annotations

import os
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
import pytest

from agents.data.market.base import (
    BARS_COLUMNS,
    DateOutOfRangeError,
    MarketDataProvider,
    NoDataError,
    SymbolNotFoundError,
)
from agents.data.market.csv_folder import CsvFolderProvider

SHARED_DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
STOCKNET = SHARED_DATA / "ohlcv" / "stocknet"

HEADER = "Date,Open,High,Low,Close,Adj Close,Volume"
# Real rows copied verbatim from shared/data/ohlcv/stocknet/PTR.csv (PetroChina, June-July 2016),
# including Yahoo's all-"null" row for 2016-06-29.
PTR_ROWS = {
    "2016-06-27": "2016-06-27,64.949997,64.989998,63.430000,63.919998,63.077053,129200",
    "2016-06-28": "2016-06-28,65.680000,66.279999,65.239998,65.870003,65.001343,88400",
    "2016-06-29": "2016-06-29,null,null,null,null,null,null",
    "2016-06-30": "2016-06-30,67.910004,68.440002,67.449997,67.919998,67.024307,146400",
    "2016-07-01": "2016-07-01,68.379997,68.949997,68.269997,68.620003,67.715073,123500",
    "2016-07-05": "2016-07-05,67.500000,67.500000,65.790001,66.239998,65.366463,119400",
}


def assert_follows_contract(frame: pd.DataFrame) -> None:
    assert tuple(frame.columns) == BARS_COLUMNS
    assert all(str(dtype) == "float64" for dtype in frame.dtypes)
    assert isinstance(frame.index, pd.DatetimeIndex)
    assert frame.index.name == "date"
    assert frame.index.tz is None
    assert frame.index.is_monotonic_increasing
    assert frame.index.is_unique
    assert not frame[["close", "adj_close"]].isna().any().any()


def write_csv(folder: Path, name: str, lines: list[str]) -> Path:
    path = folder / name
    path.write_text("\n".join([HEADER, *lines]) + "\n", encoding="utf-8")
    return path


# -- the real stocknet folder (tests using this fixture skip when ../shared/data is absent) --------


@pytest.fixture(scope="module")
def stocknet() -> CsvFolderProvider:
    if not (STOCKNET / "AAPL.csv").is_file():
        pytest.skip(
            f"real stocknet CSVs not found at {STOCKNET.resolve()} (../shared/data is workplace-only)"
        )
    return CsvFolderProvider(data_dir=STOCKNET)


@pytest.mark.shared_data
def test_stocknet_tickers_load_and_follow_the_contract(stocknet: CsvFolderProvider) -> None:
    symbols = stocknet.symbols()
    assert len(symbols) >= 20
    assert isinstance(stocknet, MarketDataProvider)
    for symbol in symbols:
        bars = stocknet.bars(symbol=symbol, start=None, end=date(2017, 9, 1))
        assert_follows_contract(bars)
        assert bars.index[0] >= pd.Timestamp("2012-09-04")
        assert bars.index[-1] == pd.Timestamp("2017-09-01")
        assert stocknet.latest_date(symbol=symbol) == date(2017, 9, 1)


@pytest.mark.shared_data
def test_stocknet_aapl_has_five_years_of_sessions(stocknet: CsvFolderProvider) -> None:
    bars = stocknet.bars(symbol="AAPL", start=None, end=date(2017, 9, 1))
    assert len(bars) == 1258  # 2012-09-04 .. 2017-09-01, no null rows in this file
    assert bars.loc[pd.Timestamp("2012-09-04"), "close"] == pytest.approx(96.424286)
    assert stocknet.parsed(symbol="AAPL").dropped_rows == 0


@pytest.mark.shared_data
def test_stocknet_null_row_is_dropped_and_counted(stocknet: CsvFolderProvider) -> None:
    # PTR.csv carries Yahoo's all-"null" row for 2016-06-29.
    parsed = stocknet.parsed(symbol="PTR")
    assert parsed.dropped_rows == 1
    assert pd.Timestamp("2016-06-29") not in parsed.frame.index
    window = stocknet.bars(symbol="PTR", start=date(2016, 6, 28), end=date(2016, 6, 30))
    assert [d.date() for d in window.index] == [date(2016, 6, 28), date(2016, 6, 30)]


@pytest.mark.shared_data
def test_stocknet_brk_a_is_served_under_both_spellings(stocknet: CsvFolderProvider) -> None:
    assert "BRK.A" in stocknet.symbols()
    dotted = stocknet.bars(symbol="BRK.A", start=date(2017, 8, 1), end=date(2017, 9, 1))
    dashed = stocknet.bars(symbol="BRK-A", start=date(2017, 8, 1), end=date(2017, 9, 1))
    pd.testing.assert_frame_equal(dotted, dashed)
    assert dotted.loc[pd.Timestamp("2017-09-01"), "close"] == pytest.approx(271062.0)
    assert stocknet.profile(symbol="BRK.A").name == "Berkshire Hathaway Inc."
    assert stocknet.source_ref(symbol="BRK.A").endswith("BRK-A.csv")


@pytest.mark.shared_data
def test_stocknet_profile_names_come_from_the_stock_table(stocknet: CsvFolderProvider) -> None:
    aapl = stocknet.profile(symbol="AAPL")
    assert aapl.name == "Apple Inc."
    assert aapl.market_cap is None
    assert aapl.pe_ratio is None
    # "$AMZN\tAmazon.com  Inc." in the table: "$" stripped, whitespace collapsed
    assert stocknet.profile(symbol="AMZN").name == "Amazon.com Inc."


@pytest.mark.shared_data
def test_stocknet_dates_outside_the_data_are_refused(stocknet: CsvFolderProvider) -> None:
    with pytest.raises(DateOutOfRangeError, match=r"KO.*2012-08-31.*2012-09-04\.\.2017-09-01"):
        stocknet.bars(symbol="KO", start=None, end=date(2012, 8, 31))
    with pytest.raises(DateOutOfRangeError, match=r"KO.*2017-09-11"):
        stocknet.bars(symbol="KO", start=None, end=date(2017, 9, 11))
    future = date.today() + timedelta(days=2)
    with pytest.raises(DateOutOfRangeError, match=future.isoformat()):
        stocknet.bars(symbol="KO", start=None, end=future)


# -- small folders made of real rows ------------------------------------------------------------


def test_null_rows_duplicates_and_disorder_are_handled(tmp_path: Path) -> None:
    # Given PTR's real rows, shuffled, with the null row and one row repeated verbatim
    r = PTR_ROWS
    write_csv(
        tmp_path,
        "PTR.csv",
        [
            r["2016-07-01"],
            r["2016-06-28"],
            r["2016-06-29"],
            r["2016-06-30"],
            r["2016-06-27"],
            r["2016-06-30"],
        ],
    )
    provider = CsvFolderProvider(data_dir=tmp_path)

    # When the provider reads it
    parsed = provider.parsed(symbol="PTR")
    bars = provider.bars(symbol="PTR", start=None, end=date(2016, 7, 1))

    # Then the frame is sorted, unique, without the null day, and the problems are counted
    assert_follows_contract(bars)
    assert [d.date() for d in bars.index] == [
        date(2016, 6, 27),
        date(2016, 6, 28),
        date(2016, 6, 30),
        date(2016, 7, 1),
    ]
    assert parsed.dropped_rows == 1
    assert parsed.duplicate_dates == 1
    assert bars.loc[pd.Timestamp("2016-06-30")].to_dict() == pytest.approx(
        {
            "open": 67.910004,
            "high": 68.440002,
            "low": 67.449997,
            "close": 67.919998,
            "adj_close": 67.024307,
            "volume": 146400.0,
        }
    )


def test_share_class_file_names_map_to_dotted_symbols(tmp_path: Path) -> None:
    write_csv(tmp_path, "BRK-A.csv", [PTR_ROWS["2016-06-27"], PTR_ROWS["2016-06-28"]])
    provider = CsvFolderProvider(data_dir=tmp_path)
    assert provider.symbols() == ["BRK.A"]
    assert len(provider.bars(symbol="BRK.A", start=None, end=date(2016, 6, 28))) == 2
    assert provider.profile(symbol="BRK.A").name is None  # no StockTable.tsv in this folder


def test_missing_file_is_symbol_not_found(tmp_path: Path) -> None:
    provider = CsvFolderProvider(data_dir=tmp_path)
    with pytest.raises(SymbolNotFoundError, match="ZZZZ"):
        provider.bars(symbol="ZZZZ", start=None, end=date(2016, 7, 1))
    with pytest.raises(SymbolNotFoundError):
        provider.latest_date(symbol="ZZZZ")


def test_an_unknown_ticker_is_named_with_the_known_ones_and_no_server_path(tmp_path: Path) -> None:
    """The message reaches users (CLI, API, console): it names the tickers the data has, never
    the folder the server reads them from."""
    folder = tmp_path / "private-server-folder"
    folder.mkdir()
    write_csv(folder, "PTR.csv", [PTR_ROWS["2016-06-27"]])
    write_csv(folder, "BRK-A.csv", [PTR_ROWS["2016-06-27"]])
    with pytest.raises(SymbolNotFoundError) as caught:
        CsvFolderProvider(data_dir=folder).bars(symbol="ZZZZ", start=None, end=date(2016, 7, 1))
    message = str(caught.value)
    assert message == "ZZZZ: not in the csv data (2 tickers: BRK.A, PTR)"
    assert "private-server-folder" not in message and str(tmp_path) not in message


def test_symbols_cannot_escape_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "secret.csv"
    write_csv(tmp_path, "secret.csv", [PTR_ROWS["2016-06-27"]])
    folder = tmp_path / "data"
    folder.mkdir()
    provider = CsvFolderProvider(data_dir=folder)
    assert outside.is_file()
    with pytest.raises(SymbolNotFoundError):
        provider.bars(symbol="../SECRET", start=None, end=date(2016, 7, 1))


def test_a_file_with_only_null_rows_has_no_usable_bars(tmp_path: Path) -> None:
    write_csv(tmp_path, "PTR.csv", [PTR_ROWS["2016-06-29"]])
    with pytest.raises(SymbolNotFoundError, match="no usable bar"):
        CsvFolderProvider(data_dir=tmp_path).bars(symbol="PTR", start=None, end=date(2016, 7, 1))


def test_a_rewritten_file_is_read_again(tmp_path: Path) -> None:
    # Given a parsed file
    path = write_csv(tmp_path, "PTR.csv", [PTR_ROWS["2016-06-27"], PTR_ROWS["2016-06-28"]])
    provider = CsvFolderProvider(data_dir=tmp_path)
    assert provider.latest_date(symbol="PTR") == date(2016, 6, 28)

    # When the file gains a row (and a newer mtime)
    write_csv(tmp_path, "PTR.csv", [PTR_ROWS["2016-06-27"], PTR_ROWS["2016-06-28"], PTR_ROWS["2016-06-30"]])
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))

    # Then the provider serves the new row
    assert provider.latest_date(symbol="PTR") == date(2016, 6, 30)


def test_weekend_window_is_no_data(tmp_path: Path) -> None:
    write_csv(tmp_path, "PTR.csv", [PTR_ROWS["2016-07-01"], PTR_ROWS["2016-07-05"]])
    provider = CsvFolderProvider(data_dir=tmp_path)
    with pytest.raises(NoDataError):
        provider.bars(symbol="PTR", start=date(2016, 7, 2), end=date(2016, 7, 4))


def test_missing_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an existing folder"):
        CsvFolderProvider(data_dir=tmp_path / "nope")


def test_the_parsed_file_cache_keeps_the_recently_used_files_within_its_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.data.market import csv_folder

    monkeypatch.setattr(csv_folder, "_FILE_CACHE", csv_folder.OrderedDict())
    rows = list(PTR_ROWS.values())
    for name in ("AAA", "BBB", "CCC"):
        write_csv(tmp_path, f"{name}.csv", rows)
    provider = CsvFolderProvider(data_dir=tmp_path, cache_files=2)
    first = provider.parsed(symbol="AAA")
    provider.parsed(symbol="BBB")
    assert provider.parsed(symbol="AAA") is first  # a hit, and AAA is now the most recent
    provider.parsed(symbol="CCC")  # past the bound: BBB, the least recently used, goes
    assert [p.stem for p in csv_folder._FILE_CACHE] == ["AAA", "CCC"]
    assert provider.parsed(symbol="AAA") is first
    again = provider.parsed(symbol="BBB")  # parsed afresh, the same bars
    assert again.frame.equals(first.frame) and len(csv_folder._FILE_CACHE) == 2


def test_the_cache_bound_comes_from_the_settings_and_is_checked(tmp_path: Path) -> None:
    from agents.data.routing import clear_provider_cache, get_provider
    from core.settings import Settings

    write_csv(tmp_path, "AAA.csv", list(PTR_ROWS.values()))
    settings = Settings(data_provider="csv", data_dir=tmp_path, data_csv_cache_files=7)
    clear_provider_cache()
    provider = get_provider(settings=settings)
    assert isinstance(provider, CsvFolderProvider) and provider.cache_files == 7
    assert CsvFolderProvider(data_dir=tmp_path).cache_files == 256  # the default
    with pytest.raises(ValueError, match="at least 1"):
        CsvFolderProvider(data_dir=tmp_path, cache_files=0)
    with pytest.raises(ValueError, match="csv_cache_files"):
        Settings(data_csv_cache_files=0)

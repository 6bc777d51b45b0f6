"""What this installation is set up to use, and whether it can reach it (``finagent doctor``, the
console's settings page).

One :class:`Check` per thing the product depends on: the data sources for each kind of data
(bars, fundamentals, news, option chains, the earnings calendar), the live quote vendor
(Alpaca), every LLM deployment the roles use, the Celery broker and result backend, the
database, and the trading broker (always the paper one); plus the span and tickers of the
configured offline data (:class:`DataSpan`), which the new-analysis form can suggest from.

Reachability checks are short and bounded: a database connection and ``SELECT 1``, a Redis
``PING``, an AMQP connection, an HTTP ``HEAD`` (an online data source) or ``GET <api_base>/models``
(an LLM server), each in a daemon thread that is abandoned after ``timeout`` seconds (so a
black-holed host cannot hang the command). Any HTTP answer, 4xx included, proves the host is
reachable; a refused connection, a DNS failure or no answer within the timeout does not. Checks
run in parallel. Secrets never appear: URLs are shown with their password replaced, keys only as
"key set" (and the CLI masks its whole output again, ``core.masking``).

Statuses: ``ok``; ``unreachable`` (configured, no answer); ``misconfigured`` (configured but
unusable as given: a folder that does not exist, a database without the schema, a malformed
router file); ``not configured`` (optional and not set: never a failure); ``not checked``
(configured, but with nothing this module can probe, e.g. a plug-in provider's own service).
:attr:`Diagnosis.ok` is false when any configured check is ``unreachable`` or ``misconfigured``.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from agents.data.fundamentals.earnings import CalendarUnavailableError, default_calendar
from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.market.clock import last_completed_session
from agents.data.routing import get_provider, serves
from agents.llm.config import RouterConfigError, llm_config
from core.settings import Settings
from db.migrate import HEAD_REVISION
from db.redis_store import new_client

Status = Literal["ok", "unreachable", "misconfigured", "not configured", "not checked"]
Area = Literal["data", "llm", "services"]

#: Seconds each reachability check may take before it counts as unreachable.
DEFAULT_TIMEOUT_S: Final = 3.0
#: Where the yfinance data (bars, fundamentals, news, option chains) comes from: Yahoo's chart
#: and quote API host (the one yfinance requests, ``query2``).
YAHOO_URL: Final = "https://query2.finance.yahoo.com"
#: The default endpoints of LiteLLM providers a model string may name without an ``api_base``
#: (a model with no provider prefix is OpenAI's, as LiteLLM reads it).
PROVIDER_ENDPOINTS: Final[dict[str, str]] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
    "mistral": "https://api.mistral.ai/v1",
    "groq": "https://api.groq.com/openai/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "together_ai": "https://api.together.xyz/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "ollama": "http://localhost:11434",
    "ollama_chat": "http://localhost:11434",
}
#: Most tickers listed by name in the span (a CSV folder can hold thousands).
MAX_TICKERS_LISTED: Final = 200


@dataclass(frozen=True)
class Check:
    """One thing the product depends on, and what was found.

    Attributes:
        area: ``data``, ``llm`` or ``services``.
        name: what it is for (``bars``, ``fundamentals``, ``news``, ``option chains``,
            ``earnings calendar``, ``live quotes``, ``llm <model>``, ``broker``, ``result
            backend``, ``database``, ``trading``).
        source: which source or backend serves it (``embedded``, ``yfinance``, ``files``,
            ``redis``, ``postgresql``, ...; ``-`` when none).
        target: where: a folder, a URL with its password hidden, a host (``None``: nowhere).
        status: see the module docstring.
        detail: one line: what was found, or what to set.
        configured: set by the operator (or on by default), so a failure counts.
        seconds: how long the reachability check took (``None``: none was made).
    """

    area: Area
    name: str
    source: str
    target: str | None
    status: Status
    detail: str
    configured: bool = True
    seconds: float | None = None

    @property
    def failed(self) -> bool:
        """Configured, and unreachable or unusable as given."""
        return self.configured and self.status in ("unreachable", "misconfigured")


@dataclass(frozen=True)
class DataSpan:
    """The market data the analyses can be run on.

    Attributes:
        source: the bar provider's name (``embedded``, ``csv``, ``yfinance``, a plug-in's).
        online: any ticker the vendor knows, up to the last completed session.
        tickers: the offline data's tickers (at most :data:`MAX_TICKERS_LISTED`; empty online).
        ticker_count: how many tickers the offline data has (0 online).
        first / last: the span of the bars (ISO days; offline: the earliest first bar and the
            latest last bar over the tickers read; online: ``first`` is ``None``, ``last`` the
            last completed XNYS session).
        note: one line for a person, e.g. ``5 tickers, 2000-01-03 .. 2013-03-01``.
    """

    source: str
    online: bool
    tickers: tuple[str, ...] = ()
    ticker_count: int = 0
    first: date | None = None
    last: date | None = None
    note: str = ""


@dataclass(frozen=True)
class Diagnosis:
    """Every check, the data span and the mode (``embedded`` or ``service``)."""

    mode: str
    checks: tuple[Check, ...]
    data: DataSpan | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        """No configured check is unreachable or misconfigured."""
        return not any(check.failed for check in self.checks)

    @property
    def failing(self) -> tuple[Check, ...]:
        """The configured checks that are unreachable or misconfigured."""
        return tuple(check for check in self.checks if check.failed)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe: ``{mode, ok, failing: [names], checks: [...], data: {...}, notes}``."""
        return {
            "mode": self.mode,
            "ok": self.ok,
            "failing": [c.name for c in self.failing],
            "checks": [asdict(c) for c in self.checks],
            "data": _span_dict(self.data),
            "notes": list(self.notes),
        }


def _span_dict(span: DataSpan | None) -> dict[str, Any] | None:
    if span is None:
        return None
    out = asdict(span)
    out.update(tickers=list(span.tickers), first=_iso(span.first), last=_iso(span.last))
    return out


def _iso(day: date | None) -> str | None:
    return day.isoformat() if day else None


# -- what a URL may show -------------------------------------------------------------------------


def public_url(url: str) -> str:
    """``url`` with its password (and a token given as the user name of an ``https`` URL)
    replaced by ``***``: ``redis://:s3cret@host:6379/0`` → ``redis://:***@host:6379/0``."""
    parts = urlsplit(url)
    if parts.password is None and not (parts.username and parts.scheme.startswith("http")):
        return url
    user = parts.username or ""
    hidden = f"{user}:***" if parts.password is not None else "***"
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"{hidden}@{host}", parts.path, parts.query, parts.fragment))


# -- bounded probes ------------------------------------------------------------------------------


def _bounded[T](probe: Callable[[], T], timeout: float) -> tuple[T | None, BaseException | None, float]:
    """``probe()`` in a daemon thread: ``(value, None, seconds)``, ``(None, error, seconds)``, or
    ``(None, TimeoutError, timeout)`` when it did not return in ``timeout`` s (the thread is left
    to finish on its own: a daemon thread does not keep the process alive)."""
    box: dict[str, Any] = {}
    started = time.perf_counter()

    def run() -> None:
        try:
            box["value"] = probe()
        except BaseException as exc:  # reported, never raised: a probe's failure is its answer
            box["error"] = exc

    thread = threading.Thread(target=run, name="doctor-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return None, TimeoutError(f"no answer within {timeout:g} s"), timeout
    return box.get("value"), box.get("error"), time.perf_counter() - started


def _describe(exc: BaseException) -> str:
    """One line for a failed probe: the error's type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160]}" if text else type(exc).__name__


def http_reachable(url: str, *, timeout: float, method: str = "HEAD") -> str:
    """``"HTTP <status>"`` when the server at ``url`` answers at all (any status). Raises
    ``OSError`` (``URLError``: refused, DNS) or ``TimeoutError`` otherwise."""
    request = urllib.request.Request(url, method=method, headers={"User-Agent": "finagent-doctor"})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310  # http(s) only
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:  # an answer: the host is there
        return f"HTTP {exc.code}"


def _http_check(
    *, area: Area, name: str, source: str, url: str, timeout: float, method: str = "HEAD", what: str = ""
) -> Check:
    if urlsplit(url).scheme not in ("http", "https"):
        return Check(
            area, name, source, public_url(url), "misconfigured", f"not an http(s) URL: {public_url(url)}"
        )
    answer, error, seconds = _bounded(
        lambda: http_reachable(url, timeout=timeout, method=method), timeout + 0.5
    )
    if error is not None:
        return Check(
            area, name, source, public_url(url), "unreachable", f"{_describe(error)}{what}", seconds=seconds
        )
    return Check(area, name, source, public_url(url), "ok", f"reachable ({answer}){what}", seconds=seconds)


# -- data ----------------------------------------------------------------------------------------


def _folder_check(*, name: str, source: str, folder: Path, what: str, pattern: str = "*") -> Check:
    path = Path(folder).expanduser()
    if not path.is_dir():
        return Check("data", name, source, str(path), "misconfigured", f"{path} is not a folder ({what})")
    count = sum(1 for _ in path.glob(pattern))
    return Check("data", name, source, str(path), "ok", f"{count} entries ({what})")


def _bars_check(settings: Settings, timeout: float) -> Check:
    choice = settings.data.provider
    if choice == "embedded":
        return Check(
            "data",
            "bars",
            "embedded",
            "bokeh_sampledata",
            "ok",
            "daily OHLCV shipped in a dependency (offline)",
        )
    if choice == "csv":
        if settings.data.dir is None:
            return Check(
                "data",
                "bars",
                "csv",
                None,
                "misconfigured",
                "FINAGENT_DATA_PROVIDER=csv needs FINAGENT_DATA_DIR",
            )
        return _folder_check(
            name="bars",
            source="csv",
            folder=settings.data.dir,
            what="Yahoo-format CSVs",
            pattern="*.csv",
        )
    if choice == "yfinance":
        return _http_check(area="data", name="bars", source="yfinance", url=YAHOO_URL, timeout=timeout)
    _, error, seconds = _bounded(lambda: get_provider(settings=settings), timeout)
    if error is not None:
        return Check("data", "bars", choice, None, "misconfigured", _describe(error), seconds=seconds)
    return Check(
        "data", "bars", choice, None, "not checked", "plug-in provider loaded; its service is its own"
    )


def _fundamentals_check(settings: Settings, timeout: float) -> Check:
    if settings.data.fundamentals_dir is not None:
        return _folder_check(
            name="fundamentals",
            source="files",
            folder=settings.data.fundamentals_dir,
            what="sp500/, alphavantage/, sec_companyfacts/",
        )
    if serves(settings.data.provider, "fundamentals"):
        return _http_check(
            area="data",
            name="fundamentals",
            source=settings.data.provider,
            url=YAHOO_URL,
            timeout=timeout,
        )
    return Check(
        "data",
        "fundamentals",
        "calendar",
        None,
        "ok",
        "EPS, P/E and the earnings trend from the earnings calendar;"
        " FINAGENT_DATA_FUNDAMENTALS_DIR adds more",
    )


def _news_check(settings: Settings, timeout: float) -> list[Check]:
    choice = settings.data.news_provider
    if choice == "files":
        if settings.data.news_dir is None:
            return [
                Check(
                    "data",
                    "news",
                    "files",
                    None,
                    "not configured",
                    "no headlines: set FINAGENT_DATA_NEWS_DIR, "
                    "or FINAGENT_DATA_NEWS_PROVIDER=rss|tavily|yfinance",
                    configured=False,
                )
            ]
        return [
            _folder_check(name="news", source="files", folder=settings.data.news_dir, what="headline CSVs")
        ]
    if choice == "rss":
        urls = [u.strip() for u in settings.data.news_rss_urls.split(",") if u.strip()]
        if not urls:
            return [
                Check("data", "news", "rss", None, "misconfigured", "FINAGENT_DATA_NEWS_RSS_URLS is empty")
            ]
        checks = []
        for url in urls:
            if urlsplit(url).scheme in ("http", "https"):
                checks.append(_http_check(area="data", name="news", source="rss", url=url, timeout=timeout))
            else:
                found = Path(url).expanduser().is_file()
                checks.append(
                    Check(
                        "data",
                        "news",
                        "rss",
                        url,
                        "ok" if found else "misconfigured",
                        "feed file" if found else "no such file",
                    )
                )
        return checks
    if choice == "tavily":
        if settings.data.tavily_api_key is None:
            return [
                Check(
                    "data",
                    "news",
                    "tavily",
                    settings.data.tavily_url,
                    "misconfigured",
                    "FINAGENT_DATA_TAVILY_API_KEY is not set",
                )
            ]
        return [
            _http_check(
                area="data",
                name="news",
                source="tavily",
                url=settings.data.tavily_url,
                timeout=timeout,
                what="; key set",
            )
        ]
    return [_http_check(area="data", name="news", source=choice, url=YAHOO_URL, timeout=timeout)]


def _chains_check(settings: Settings, timeout: float) -> Check:
    if settings.options.dir is not None:
        return _folder_check(
            name="option chains", source="files", folder=settings.options.dir, what="chain snapshots"
        )
    if serves(settings.data.provider, "option_chains"):
        return _http_check(
            area="data",
            name="option chains",
            source=settings.data.provider,
            url=YAHOO_URL,
            timeout=timeout,
        )
    return Check(
        "data",
        "option chains",
        "-",
        None,
        "not configured",
        "the csp and covered_call plans need FINAGENT_OPTIONS_DIR or FINAGENT_DATA_PROVIDER=yfinance",
        configured=False,
    )


def _calendar_check() -> Check:
    try:
        calendar = default_calendar()
    except CalendarUnavailableError as exc:
        return Check("data", "earnings calendar", "calendar", None, "misconfigured", str(exc))
    found = calendar.path.is_file()
    return Check(
        "data",
        "earnings calendar",
        "calendar",
        calendar.ref,
        "ok" if found else "misconfigured",
        "earnings dates, EPS and surprises (offline)" if found else f"{calendar.path} is missing",
    )


def _alpaca_check(settings: Settings, timeout: float) -> Check:
    broker = settings.broker
    if broker.alpaca_api_key is None or broker.alpaca_secret_key is None:
        return Check(
            "data",
            "live quotes",
            "alpaca",
            None,
            "not configured",
            "get_stock_price needs FINAGENT_BROKER_ALPACA_API_KEY and FINAGENT_BROKER_ALPACA_SECRET_KEY",
            configured=False,
        )
    # the data API's base (agents.data.market.alpaca.base_url_for), without importing the client
    url = broker.alpaca_data_url or (
        "https://data.sandbox.alpaca.markets" if broker.alpaca_use_sandbox else "https://data.alpaca.markets"
    )
    return _http_check(
        area="data", name="live quotes", source="alpaca", url=url, timeout=timeout, what="; keys set"
    )


# -- LLM -----------------------------------------------------------------------------------------


def _llm_checks(settings: Settings, timeout: float) -> list[Check]:
    if not settings.llm.configured:
        return [
            Check(
                "llm",
                "llm",
                "-",
                None,
                "not configured",
                "deterministic analysts; set FINAGENT_LLM_MODEL (docs/llm.md) for LLM analysts",
                configured=False,
            )
        ]
    try:
        config = llm_config(settings=settings)
    except RouterConfigError as exc:
        return [Check("llm", "llm", "router", None, "misconfigured", str(exc))]
    if config is None:  # a router file or deployments, but no role names a model
        return [
            Check(
                "llm",
                "llm",
                "-",
                None,
                "misconfigured",
                "deployments are listed but no role has a model: set FINAGENT_LLM_MODEL to one of them",
            )
        ]
    deployments = {d.name: d for d in config.deployments}
    names = list(dict.fromkeys([*config.models.values(), *config.fallbacks]))
    checks = []
    for name in names:
        deployment = deployments.get(name)
        model = deployment.model if deployment else name
        api_base = deployment.api_base if deployment else config.api_base
        key = (deployment.api_key if deployment else config.api_key) is not None
        roles = ", ".join(sorted(r.value for r, m in config.models.items() if m == name)) or "fallback"
        what = f"; {model} for {roles}; key {'set' if key else 'not set'}"
        url = api_base or PROVIDER_ENDPOINTS.get(model.split("/", 1)[0] if "/" in model else "openai")
        if url is None:
            checks.append(
                Check(
                    "llm", f"llm {name}", model, None, "not checked", f"the provider's default endpoint{what}"
                )
            )
            continue
        checks.append(
            _http_check(
                area="llm",
                name=f"llm {name}",
                source=model,
                url=f"{url.rstrip('/')}/models",
                timeout=timeout,
                method="GET",
                what=what,
            )
        )
    return checks


# -- services ------------------------------------------------------------------------------------


def _database_check(settings: Settings, timeout: float) -> Check:
    url = settings.service.effective_database_url
    backend = sa.engine.make_url(url).get_backend_name()
    shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    if backend == "sqlite":
        database = sa.engine.make_url(url).database or ""
        if not Path(database).is_file():
            return Check(
                "services",
                "database",
                "sqlite",
                shown,
                "ok",
                "not created yet: the first analysis creates and migrates it",
            )

    def probe() -> tuple[str | None, int | None]:
        args = {"connect_timeout": max(1, round(timeout))} if backend == "postgresql" else {}
        engine = sa.create_engine(url, poolclass=NullPool, connect_args=args)
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
                inspector = sa.inspect(conn)
                if not inspector.has_table("alembic_version"):
                    return None, None
                revision = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
                count = (
                    conn.execute(sa.text("SELECT count(*) FROM analyses")).scalar()
                    if inspector.has_table("analyses")
                    else None
                )
                return revision, count
        finally:
            engine.dispose()

    found, error, seconds = _bounded(probe, timeout + 0.5)
    if error is not None:
        return Check("services", "database", backend, shown, "unreachable", _describe(error), seconds=seconds)
    assert found is not None
    revision, count = found
    if revision is None and backend == "sqlite":
        return Check(
            "services",
            "database",
            backend,
            shown,
            "ok",
            "created, not migrated yet: the next command migrates it",
            seconds=seconds,
        )
    if revision is None:
        return Check(
            "services",
            "database",
            backend,
            shown,
            "misconfigured",
            "no finagent schema: run `finagent db upgrade`",
            seconds=seconds,
        )
    behind = (
        "" if revision == HEAD_REVISION else f" (this code's is {HEAD_REVISION}: run `finagent db upgrade`)"
    )
    # embedded mode migrates its SQLite file on the next start; a service database waits for the operator
    status: Status = "ok" if not behind or backend == "sqlite" else "misconfigured"
    analyses = f", {count} analyses" if count is not None else ""
    return Check(
        "services",
        "database",
        backend,
        shown,
        status,
        f"reachable, schema {revision}{behind}{analyses}",
        seconds=seconds,
    )


def _queue_check(name: str, url: str, timeout: float) -> Check:
    scheme = urlsplit(url).scheme
    shown = public_url(url)
    if scheme in ("redis", "rediss"):

        def ping() -> str:
            # the client the broker uses: redis is imported only by a Redis-configured install
            client = new_client(url, socket_timeout=timeout, socket_connect_timeout=timeout)
            try:
                client.ping()
                return f"Redis {client.info('server').get('redis_version', '?')}"
            finally:
                client.close()

        answer, error, seconds = _bounded(ping, timeout + 0.5)
    elif scheme in ("amqp", "amqps", "pyamqp"):
        from pipeline import taskqueue  # kombu's connection; only an AMQP install pays for it

        def connect() -> str:
            return taskqueue.get().probe(url, timeout=timeout)

        answer, error, seconds = _bounded(connect, timeout + 0.5)
    else:
        return Check("services", name, scheme, shown, "not checked", f"no probe for {scheme}://")
    if error is not None:
        return Check("services", name, scheme, shown, "unreachable", _describe(error), seconds=seconds)
    return Check("services", name, scheme, shown, "ok", f"reachable ({answer})", seconds=seconds)


def _service_checks(settings: Settings, timeout: float) -> list[Check]:
    service = settings.service
    checks = [_database_check(settings, timeout)]
    if service.mode == "embedded":
        checks.append(
            Check("services", "broker", "memory", None, "ok", "in-process worker (embedded mode: no broker)")
        )
    else:
        assert service.broker_url is not None
        checks.append(_queue_check("broker", service.broker_url, timeout))
        backend = service.effective_result_backend
        if backend and backend != service.broker_url:
            checks.append(_queue_check("result backend", backend, timeout))
    checks.append(
        Check(
            "services",
            "trading",
            "paper",
            None,
            "ok",
            "paper broker: fills recorded in the database, no real money",
        )
    )
    return checks


# -- the data span -------------------------------------------------------------------------------


def data_span(*, settings: Settings, budget: float = 5.0) -> DataSpan:
    """The tickers and date span of the configured bar data (:class:`DataSpan`).

    Offline data: every ticker's first and last bar, read until ``budget`` seconds are spent
    (a folder of thousands of CSVs is then spanned over the tickers read, and the note says
    so). Online data: any ticker, up to the last completed XNYS session. Raises ``ValueError``
    when the provider cannot be built (``get_provider``'s)."""
    provider = get_provider(settings=settings)
    symbols = sorted(provider.symbols())
    if not symbols:
        session = last_completed_session()
        return DataSpan(
            source=provider.name,
            online=True,
            last=session,
            note=f"any ticker {provider.name} serves, up to the last completed session {session.isoformat()}",
        )
    deadline = time.monotonic() + budget
    firsts: list[date] = []
    lasts: list[date] = []
    read = 0
    for symbol in symbols:
        if time.monotonic() > deadline:
            break
        span = _symbol_span(provider, symbol)
        read += 1
        if span is not None:
            firsts.append(span[0])
            lasts.append(span[1])
    first: date | None = min(firsts) if firsts else None
    last: date | None = max(lasts) if lasts else None
    over = "" if read == len(symbols) else f" (span over the first {read} read within {budget:g} s)"
    span_text = (
        f", {first.isoformat()} .. {last.isoformat()}" if first and last else ", no bars could be read"
    )
    return DataSpan(
        source=provider.name,
        online=False,
        tickers=tuple(symbols[:MAX_TICKERS_LISTED]),
        ticker_count=len(symbols),
        first=first,
        last=last,
        note=f"{len(symbols)} tickers{span_text}{over}",
    )


def _symbol_span(provider: MarketDataProvider, symbol: str) -> tuple[date, date] | None:
    try:
        last = provider.latest_date(symbol=symbol)
        bars = provider.bars(symbol=symbol, start=None, end=last)
    except (ProviderError, ValueError, OSError):
        return None
    if bars.empty:
        return None
    first: date = bars.index[0].date()
    return first, last


# -- all of it -----------------------------------------------------------------------------------


def diagnose(*, settings: Settings, timeout: float = DEFAULT_TIMEOUT_S, span: bool = True) -> Diagnosis:
    """Every check (module docstring), run in parallel, each bounded by ``timeout`` seconds, and
    the data span (``span``; bounded by its own budget). Never raises for what it finds: a
    failure is a check's status."""
    groups: Sequence[Callable[[], list[Check]]] = (
        lambda: [_bars_check(settings, timeout)],
        lambda: [_fundamentals_check(settings, timeout)],
        lambda: _news_check(settings, timeout),
        lambda: [_chains_check(settings, timeout)],
        lambda: [_calendar_check()],
        lambda: [_alpaca_check(settings, timeout)],
        lambda: _llm_checks(settings, timeout),
        lambda: _service_checks(settings, timeout),
    )
    results: list[list[Check] | None] = [None] * len(groups)

    def run(index: int) -> None:
        try:
            results[index] = groups[index]()
        except Exception as exc:  # a bug in a check must not hide the others
            results[index] = [Check("services", f"check {index}", "-", None, "not checked", _describe(exc))]

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(groups))]
    for thread in threads:
        thread.start()
    found: DataSpan | None = None
    notes: list[str] = []
    if span:
        found, error, _ = _bounded(lambda: data_span(settings=settings), 8.0)
        if error is not None:
            notes.append(f"data span not read: {_describe(error)}")
    for thread in threads:
        thread.join(timeout * 3 + 2)  # every probe inside is bounded by timeout already
    checks = [check for group in results for check in group or ()]
    if settings.data.provider != "yfinance":
        notes.append("current data is one switch away: FINAGENT_DATA_PROVIDER=yfinance finagent analyze NVDA")
    return Diagnosis(mode=settings.service.mode, checks=tuple(checks), data=found, notes=tuple(notes))

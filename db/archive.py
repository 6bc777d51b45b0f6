"""Archive: the record of a finished analysis in one compressed row, read back whole.

A finished analysis is stored as written: ``analyses.state`` (every stage's output),
``report`` (Markdown), ``report_json`` and ~11 ``tool_calls`` rows (one per attempt: ids,
arguments, summary, citations, result). That is ~42 KB of PostgreSQL per analysis of a backtest,
most of it row and index overhead and small JSON values that PostgreSQL compresses one by one
(TOAST compresses a value only above ~2 KB, and without anything shared between values).

:func:`archive` moves the record of analyses finished before a moment into one
``analysis_archives`` row each: the JSON document of the stored ``state``, ``report``,
``report_json`` and every ``tool_calls`` row, exactly as stored (tool results keep their
``content_blobs`` references: the pieces shared between analyses stay shared), compressed as
one zstd frame with a dictionary trained on earlier records (``compression_dictionaries``;
zstd's dictionary builder, via the ``zstandard`` package: small documents that repeat the
same keys and phrases compress ~2.5x better with one than alone). Then, in the same
transaction, the analysis's ``tool_calls`` rows are deleted and its ``analyses`` row keeps
only what SQL reads inside the JSON columns (:data:`db.state_refs.REPORT_SQL_KEYS` of the
report, with each view's ``label`` and ``score``; the state's ``analysis_type``) and gets
``archived_at``.

Reading is transparent: ``db.repo.get_analysis``, ``get_tool_calls`` and ``get_tool_result``
(given the analysis) return for an archived analysis what they returned before it was
archived, value for value, so ``finagent replay`` stays byte-identical and the
point-in-time audit sees every tool call. A tool-call row written for the analysis after it
was archived (a late flush) is read together with the archived ones.

Rules:

* Only finished (``done``/``failed``) analyses whose ``finished_at`` is before the cut-off are
  archived; a finished analysis is never written again (``db.ledger``'s moves also refuse an
  archived row).
* The first archive run that finds at least :data:`MIN_TRAIN_SAMPLES` records (its own and
  those archived before) trains the dictionary on them (up to :data:`MAX_TRAIN_SAMPLES`);
  before one exists a record is compressed without one. A dictionary trained on another
  backtest (other symbols, another year) compressed as well as the backtest's own
  (docs/benchmarks.md). ``finagent archive --train`` trains a new one from archived records; new archives use
  the newest, old ones keep theirs (a dictionary is never deleted).
* The ``content_blobs`` pieces the archived tool results use stay shared; the archive packs
  each (``packed``: zstd of its JSON text, ``body`` NULL; read back by ``db.repo``) and sets its
  ``archived_until`` to the latest ``created_at`` of the archived analyses using it. Retention
  (``db.retention``) deletes everything finished and created before a day, archived or not, so
  a piece some kept archive uses is exactly one with ``archived_until`` on or after that day;
  it deletes an archive with its analysis (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Final, cast

import orjson
import sqlalchemy as sa
import zstandard
from sqlalchemy import Connection, Engine

from db import blobs, state_refs
from db._sql import insert_ignore, utc_now
from db.attempt_rows import CONTENT_BLOBS, TOOL_CALLS
from db.engine import begin_write, json_dumps, reading
from db.models import ANALYSES, ANALYSIS_ARCHIVES, COMPRESSION_DICTIONARIES, TERMINAL_STATUSES, UTCDateTime

logger = logging.getLogger(__name__)

ARCHIVES: Final = ANALYSIS_ARCHIVES
DICTIONARIES: Final = COMPRESSION_DICTIONARIES

#: Format of the archived document (a key of the document itself).
FORMAT: Final = 1
#: zstd level: 9 measured 4.02 KB and 0.6 ms per record against 3.71 KB and 16 ms at 19
#: (220 backtest records of 46 KB of JSON; docs/benchmarks.md).
LEVEL: Final = 9
#: Dictionary size in bytes: 64 KB measured 3.71 KB per record, 32 KB 4.4 and 107 KB 3.54.
DICTIONARY_BYTES: Final = 64 * 1024
#: Records needed to train a dictionary (zstd's builder wants many samples, and a dictionary
#: trained on a few analyses fits them only).
MIN_TRAIN_SAMPLES: Final = 64
#: At most this many records train a dictionary (about 3 MB of JSON, ~1 s).
MAX_TRAIN_SAMPLES: Final = 800
#: Analyses archived per transaction: ~0.7 s of work here (2,010 in 14 s), so the pieces' row
#: locks a worker inserting the same piece may wait for are held about that long.
BATCH: Final = 200

#: The ``tool_calls`` columns stored as ISO 8601 text in the document.
_DATETIME_COLUMNS: Final = frozenset(c.name for c in TOOL_CALLS.columns if isinstance(c.type, UTCDateTime))


@dataclass(frozen=True)
class ArchiveReport:
    """What :func:`archive` did (or, with ``dry_run``, would do): ``analyses`` archived,
    ``tool_calls`` rows moved into them, ``raw_bytes`` of JSON and ``stored_bytes`` after
    compression, the ``dictionary`` used (``None``: none yet) and whether this run ``trained`` it."""

    before: datetime
    dry_run: bool
    analyses: int
    tool_calls: int
    raw_bytes: int
    stored_bytes: int
    dictionary: str | None
    trained: bool

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-able dict: its fields, ``before`` as ISO 8601."""
        return {**asdict(self), "before": self.before.isoformat()}


class ArchiveUnreadable(Exception):
    """An archived record that cannot be read back: its compression dictionary is missing or
    corrupt, or its frame is. ``analysis_id`` and ``dictionary_id`` name what; the message says
    which, and that it is the stored data, not the request (the CLI exits 3, the API answers
    503)."""

    def __init__(self, message: str, *, analysis_id: str | None, dictionary_id: str | None) -> None:
        super().__init__(message)
        self.analysis_id = analysis_id
        self.dictionary_id = dictionary_id


@dataclass(frozen=True)
class ArchivedRecord:
    """An archived analysis's record as it was stored: ``state`` and ``report_json`` as the
    columns held them (references not resolved: ``db.state_refs``), the Markdown ``report``,
    and the ``tool_calls`` rows (every column, ``result`` as stored with its ``result_refs``)."""

    state: Any
    report: str | None
    report_json: Any
    tool_calls: list[dict[str, Any]]


# ------------------------------------------------------------------------------------------
# The document
# ------------------------------------------------------------------------------------------


def _row_for_document(row: Mapping[str, Any]) -> dict[str, Any]:
    """A ``tool_calls`` row with its datetimes as ISO 8601 text (the rest is JSON already)."""
    return {k: (v.isoformat() if k in _DATETIME_COLUMNS and v is not None else v) for k, v in row.items()}


def _row_from_document(row: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`_row_for_document` undone: datetimes back (aware UTC, as the column reads), every
    current ``tool_calls`` column in table order (one added after the record was archived reads
    ``None``, as a new nullable column reads on old rows)."""
    out = {}
    for column in TOOL_CALLS.columns:
        value = row.get(column.name)
        if column.name in _DATETIME_COLUMNS and value is not None:
            value = datetime.fromisoformat(value)
        out[column.name] = value
    return out


def encode(record: ArchivedRecord) -> bytes:
    """The JSON document of ``record`` (UTF-8; ``db.engine.json_dumps``: secrets masked, NaN as
    null, as every column is written)."""
    doc = {
        "format": FORMAT,
        "state": record.state,
        "report": record.report,
        "report_json": record.report_json,
        "tool_calls": [_row_for_document(r) for r in record.tool_calls],
    }
    return json_dumps(doc).encode()


def decode(raw: bytes) -> ArchivedRecord:
    """:func:`encode` undone. Raises ``ValueError`` for a document of another format."""
    doc = orjson.loads(raw)
    if doc.get("format") != FORMAT:
        raise ValueError(f"archived record of format {doc.get('format')!r}, this code reads {FORMAT}")
    return ArchivedRecord(
        state=doc["state"],
        report=doc["report"],
        report_json=doc["report_json"],
        tool_calls=[_row_from_document(r) for r in doc["tool_calls"]],
    )


# ------------------------------------------------------------------------------------------
# Dictionaries
# ------------------------------------------------------------------------------------------


#: Dictionary bytes by id, read once per process (rows are never changed).
_DICTIONARIES: dict[str, bytes] = {}
#: Per thread: dictionary id (``None``: no dictionary) → (compressor, decompressor). A zstd
#: context must not be used by two threads at once (python-zstandard, "ZstdCompressor":
#: "assume instances are not thread safe"), and the gateway reads archives from a thread pool.
_CODECS = threading.local()


def _dictionary_body(conn: Connection | None, dictionary_id: str) -> bytes:
    found = _DICTIONARIES.get(dictionary_id)
    if found is None:
        if conn is None:
            raise KeyError(f"compression dictionary {dictionary_id} is not loaded")
        body = conn.execute(sa.select(DICTIONARIES.c.body).where(DICTIONARIES.c.id == dictionary_id)).scalar()
        if body is None:
            raise KeyError(f"compression dictionary {dictionary_id} is missing")
        found = _DICTIONARIES[dictionary_id] = bytes(body)
    return found


def _codec(
    dictionary_id: str | None, conn: Connection | None = None
) -> tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]:
    """This thread's compressor and decompressor for ``dictionary_id`` (its body read on
    ``conn`` the first time in the process). Raises ``KeyError`` for an unknown dictionary."""
    codecs: dict[str | None, tuple[zstandard.ZstdCompressor, zstandard.ZstdDecompressor]] | None
    codecs = getattr(_CODECS, "by_id", None)
    if codecs is None:
        codecs = _CODECS.by_id = {}
    found = codecs.get(dictionary_id)
    if found is None:
        body = _dictionary_body(conn, dictionary_id) if dictionary_id is not None else None
        data = zstandard.ZstdCompressionDict(body) if body is not None else None
        try:
            found = (
                zstandard.ZstdCompressor(level=LEVEL, dict_data=data),
                zstandard.ZstdDecompressor(dict_data=data),
            )
        except zstandard.ZstdError:
            _DICTIONARIES.pop(dictionary_id or "", None)  # read it again next time (a restore)
            raise
        codecs[dictionary_id] = found
    return found


def newest_dictionary(conn: Connection) -> str | None:
    """The id of the newest dictionary (the one new archives use), or ``None``."""
    stmt = sa.select(DICTIONARIES.c.id).order_by(DICTIONARIES.c.created_at.desc(), DICTIONARIES.c.id).limit(1)
    return cast(str | None, conn.execute(stmt).scalar())


def train_dictionary(conn: Connection, samples: Sequence[bytes], *, store: bool = True) -> str:
    """Train a zstd dictionary (:data:`DICTIONARY_BYTES`) on ``samples`` (encoded records),
    store it (unless ``store`` is false: then this process only knows it) and return its id.
    Raises ``ValueError`` for fewer than :data:`MIN_TRAIN_SAMPLES` samples,
    ``zstandard.ZstdError`` if zstd's builder fails."""
    if len(samples) < MIN_TRAIN_SAMPLES:
        raise ValueError(f"{len(samples)} records: a dictionary needs at least {MIN_TRAIN_SAMPLES}")
    started = time.perf_counter()
    body = zstandard.train_dictionary(
        DICTIONARY_BYTES, list(samples[:MAX_TRAIN_SAMPLES]), level=LEVEL
    ).as_bytes()
    dictionary_id = hashlib.sha256(body).hexdigest()[:16]
    if store:  # the same samples give the same dictionary: stored once
        row = {"id": dictionary_id, "body": body, "samples": min(len(samples), MAX_TRAIN_SAMPLES)}
        conn.execute(insert_ignore(conn, DICTIONARIES), [{**row, "created_at": utc_now()}])
    _DICTIONARIES[dictionary_id] = body
    logger.info(
        "archive: trained dictionary %s (%d bytes) on %d records in %.1f s",
        dictionary_id,
        len(body),
        min(len(samples), MAX_TRAIN_SAMPLES),
        time.perf_counter() - started,
    )
    return dictionary_id


def compress(conn: Connection, raw: bytes, dictionary_id: str | None) -> bytes:
    """``raw`` as one zstd frame, with the dictionary ``dictionary_id`` (``None``: without)."""
    return _codec(dictionary_id, conn)[0].compress(raw)


def decompress(conn: Connection, stored: bytes, dictionary_id: str | None) -> bytes:
    """:func:`compress` undone. Raises ``KeyError`` when the dictionary is missing and
    ``zstandard.ZstdError`` for a corrupt frame."""
    return _codec(dictionary_id, conn)[1].decompress(bytes(stored))


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------


def read_frame(conn: Connection, analysis_id: str, body: bytes, dictionary_id: str | None) -> ArchivedRecord:
    """The record of one stored frame (``analysis_archives.body`` compressed with
    ``dictionary_id``). Raises :class:`ArchiveUnreadable` naming the dictionary when it is
    missing, or when the frame does not decompress or decode with it (a corrupt frame or
    dictionary)."""
    named = f"compression dictionary {dictionary_id}" if dictionary_id else "no compression dictionary"
    try:
        raw = decompress(conn, body, dictionary_id)
    except KeyError:
        raise ArchiveUnreadable(
            f"archived analysis {analysis_id}: its {named} is missing from compression_dictionaries "
            "(restore it from a backup; `finagent archive --verify` lists every archive it affects)",
            analysis_id=analysis_id,
            dictionary_id=dictionary_id,
        ) from None
    except zstandard.ZstdError as exc:
        raise ArchiveUnreadable(
            f"archived analysis {analysis_id}: its frame does not decompress with {named} "
            f"(the frame or the dictionary is corrupt: {exc}); "
            "`finagent archive --verify` checks every frame",
            analysis_id=analysis_id,
            dictionary_id=dictionary_id,
        ) from None
    try:
        return decode(raw)
    except (ValueError, KeyError, TypeError) as exc:  # orjson's JSONDecodeError is a ValueError
        raise ArchiveUnreadable(
            f"archived analysis {analysis_id}: its frame decompressed with {named} is no record "
            f"({type(exc).__name__}: {str(exc)[:200]}); the frame or the dictionary is corrupt",
            analysis_id=analysis_id,
            dictionary_id=dictionary_id,
        ) from None


def load(conn: Connection, analysis_id: str) -> ArchivedRecord | None:
    """The archived record of ``analysis_id`` (with any ``tool_calls`` row written for it after
    it was archived, in ``get_tool_calls``' order), or ``None`` when it is not archived."""
    found = conn.execute(
        sa.select(ARCHIVES.c.body, ARCHIVES.c.dictionary_id).where(ARCHIVES.c.analysis_id == analysis_id)
    ).first()
    if found is None:
        return None
    record = read_frame(conn, analysis_id, found.body, found.dictionary_id)
    late = [
        dict(r)
        for r in conn.execute(sa.select(TOOL_CALLS).where(TOOL_CALLS.c.analysis_id == analysis_id)).mappings()
    ]
    if late:
        known = {r["id"] for r in record.tool_calls}
        rows = record.tool_calls + [r for r in late if r["id"] not in known]
        rows.sort(key=lambda r: (r["timestamp"], r["attempt"], r["id"]))
        record = ArchivedRecord(record.state, record.report, record.report_json, rows)
    return record


# ------------------------------------------------------------------------------------------
# Archiving
# ------------------------------------------------------------------------------------------


def slim_state(state: Any) -> dict[str, Any]:
    """What an archived row's ``state`` column keeps: the keys SQL reads inside it
    (``analysis_type``: ``db.repo.list_analyses``)."""
    if isinstance(state, Mapping) and state.get("analysis_type") is not None:
        return {"analysis_type": state["analysis_type"]}
    return {}


def slim_report(report_json: Any) -> dict[str, Any] | None:
    """What an archived row's ``report_json`` column keeps: the values SQL reads inside it
    (:data:`db.state_refs.REPORT_SQL_KEYS`): of ``views`` each view's ``label`` and ``score``
    (``db.backtest_repo.report_views``), of ``probability`` each horizon's ``p``
    (``apps.scorecard``), of ``risk`` each horizon's VaRs and range returns
    (``apps.scorecard_risk``), the other keys whole."""
    if not isinstance(report_json, Mapping):
        return None
    kept = {k: v for k, v in report_json.items() if k in state_refs.REPORT_SQL_KEYS}
    views = kept.get("views")
    if isinstance(views, Mapping):
        kept["views"] = {
            name: {k: v for k, v in view.items() if k in ("label", "score")}
            for name, view in views.items()
            if isinstance(view, Mapping)
        }
    probability = kept.get("probability")
    if isinstance(probability, Mapping) and isinstance(probability.get("horizons"), Mapping):
        kept["probability"] = {
            "horizons": {
                h: {"p": v.get("p")} for h, v in probability["horizons"].items() if isinstance(v, Mapping)
            }
        }
    risk = kept.get("risk")
    if isinstance(risk, Mapping) and isinstance(risk.get("horizons"), list):
        # what the scorecard's risk tables read (apps.scorecard_risk.risk_rows)
        kept["risk"] = {"horizons": [_slim_horizon(h) for h in risk["horizons"] if isinstance(h, Mapping)]}
    return kept


def _slim_horizon(h: Mapping[str, Any]) -> dict[str, Any]:
    """One horizon of a report's risk forecast as an archived row keeps it: its VaRs and the
    returns bounding its ranges."""
    ranges = [
        {k: r.get(k) for k in ("probability", "low_return", "high_return")}
        for r in h.get("ranges") or []
        if isinstance(r, Mapping)
    ]
    return {
        "horizon": h.get("horizon"),
        "var_95": h.get("var_95"),
        "var_99": h.get("var_99"),
        "ranges": ranges,
    }


def _due(before: datetime) -> sa.Select[Any]:
    return (
        sa.select(ANALYSES.c.id)
        .where(
            ANALYSES.c.status.in_(TERMINAL_STATUSES),
            ANALYSES.c.archived_at.is_(None),
            ANALYSES.c.finished_at < before,
        )
        .order_by(ANALYSES.c.finished_at, ANALYSES.c.id)
    )


def _records(conn: Connection, ids: Sequence[str]) -> dict[str, tuple[ArchivedRecord, datetime]]:
    """The stored records of ``ids`` (rows as the columns hold them) with each analysis's
    ``created_at``, in ``ids``' order; analyses archived meanwhile are left out."""
    calls: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
    stmt = (
        sa.select(TOOL_CALLS)
        .where(TOOL_CALLS.c.analysis_id.in_(list(ids)))
        .order_by(TOOL_CALLS.c.analysis_id, TOOL_CALLS.c.timestamp, TOOL_CALLS.c.attempt, TOOL_CALLS.c.id)
    )
    for row in conn.execute(stmt).mappings():
        calls[row["analysis_id"]].append(dict(row))
    out: dict[str, tuple[ArchivedRecord, datetime]] = {}
    stmt2 = sa.select(
        ANALYSES.c.id, ANALYSES.c.state, ANALYSES.c.report, ANALYSES.c.report_json, ANALYSES.c.created_at
    ).where(ANALYSES.c.id.in_(list(ids)), ANALYSES.c.archived_at.is_(None))
    rows = {r.id: r for r in conn.execute(stmt2)}
    for analysis_id in ids:
        if analysis_id in rows:
            r = rows[analysis_id]
            out[analysis_id] = (
                ArchivedRecord(r.state, r.report, r.report_json, calls[analysis_id]),
                r.created_at,
            )
    return out


def _train_samples(conn: Connection, fresh: Iterable[bytes]) -> list[bytes]:
    """Up to :data:`MAX_TRAIN_SAMPLES` encoded records: ``fresh`` ones first, then archived
    ones (newest first)."""
    samples = list(fresh)[:MAX_TRAIN_SAMPLES]
    if len(samples) < MAX_TRAIN_SAMPLES:
        stmt = (
            sa.select(ARCHIVES.c.body, ARCHIVES.c.dictionary_id)
            .order_by(ARCHIVES.c.archived_at.desc())
            .limit(MAX_TRAIN_SAMPLES - len(samples))
        )
        samples.extend(decompress(conn, r.body, r.dictionary_id) for r in conn.execute(stmt))
    return samples


def train(*, engine: Engine) -> str:
    """Train a new dictionary on the newest archived records (``finagent archive --train``):
    later archives use it. Returns its id. Raises ``ValueError`` when fewer than
    :data:`MIN_TRAIN_SAMPLES` records are archived."""
    with begin_write(engine) as conn:
        samples = _train_samples(conn, ())
        if len(samples) < MIN_TRAIN_SAMPLES:
            raise ValueError(
                f"{len(samples)} archived record(s): a dictionary needs at least {MIN_TRAIN_SAMPLES} "
                "(archive more first; until then records are compressed without one)"
            )
        return train_dictionary(conn, samples)


def archive(
    *,
    engine: Engine,
    before: datetime,
    limit: int | None = None,
    dry_run: bool = False,
    on_batch: Callable[[int], None] | None = None,
) -> ArchiveReport:
    """Archive the finished analyses whose ``finished_at`` is before ``before`` (oldest first,
    at most ``limit``), :data:`BATCH` per transaction (module docstring).

    ``dry_run``: read, encode and compress the same analyses (a dictionary it would train is
    trained in memory), write nothing. ``on_batch``: called after each batch with the number of
    analyses done so far (progress). Returns an :class:`ArchiveReport`. Raises
    ``sqlalchemy.exc.OperationalError`` when the database is unreachable (the batches committed
    before stay archived; the rest is untouched).
    """
    totals = {"analyses": 0, "tool_calls": 0, "raw": 0, "stored": 0}
    trained = False
    dictionary_id: str | None = None
    offset = 0
    while limit is None or totals["analyses"] < limit:
        size = BATCH if limit is None else min(BATCH, limit - totals["analyses"])
        with reading(engine) if dry_run else begin_write(engine) as conn:
            stmt = _due(before).limit(size)
            if dry_run:  # nothing changes between batches: page through
                stmt, offset = stmt.offset(offset), offset + size
            elif conn.dialect.name == "postgresql":  # two archivers never take the same rows
                stmt = stmt.with_for_update(skip_locked=True)
            taken = _records(conn, list(conn.execute(stmt).scalars()))
            if not taken:
                break
            records = {i: record for i, (record, _) in taken.items()}
            raw = {i: encode(r) for i, r in records.items()}
            dictionary_id = dictionary_id or newest_dictionary(conn)
            if dictionary_id is None:  # this batch and the records archived without one
                samples = _train_samples(conn, raw.values())
                if len(samples) >= MIN_TRAIN_SAMPLES:
                    dictionary_id = train_dictionary(conn, samples, store=not dry_run)
                    trained = True
            stored = {i: compress(conn, body, dictionary_id) for i, body in raw.items()}
            if not dry_run:
                _pin_and_pack(conn, {i: created for i, (_, created) in taken.items()}, records)
                _write(conn, records, stored, dictionary_id, raw)
        totals["analyses"] += len(records)
        totals["tool_calls"] += sum(len(r.tool_calls) for r in records.values())
        totals["raw"] += sum(map(len, raw.values()))
        totals["stored"] += sum(map(len, stored.values()))
        logger.info(
            "archive: %d analyses %s (%d so far)",
            len(records),
            "would be archived" if dry_run else "archived",
            totals["analyses"],
        )
        if on_batch is not None:
            on_batch(totals["analyses"])
    return ArchiveReport(
        before=before,
        dry_run=dry_run,
        analyses=totals["analyses"],
        tool_calls=totals["tool_calls"],
        raw_bytes=totals["raw"],
        stored_bytes=totals["stored"],
        dictionary=dictionary_id,
        trained=trained,
    )


def pack_blob(body: Any) -> bytes:
    """A ``content_blobs`` body packed: zstd (:data:`LEVEL`, no dictionary) of its JSON text."""
    return _codec(None)[0].compress(json_dumps(body).encode())


def unpack_blob(packed: bytes) -> Any:
    """:func:`pack_blob` undone: the body as the JSON column reads it."""
    return orjson.loads(_codec(None)[1].decompress(bytes(packed)))


def _pin_and_pack(
    conn: Connection, created: Mapping[str, datetime], records: Mapping[str, ArchivedRecord]
) -> None:
    """Set ``archived_until`` of every piece the records use (the latest ``created_at`` of the
    analyses using it, if later than the stored one) and pack those not packed yet, in hash
    order (writers insert pieces in hash order too: no deadlock). First in the archive's
    transaction, so a purge (which locks ``content_blobs`` first) and an archive run one after
    the other."""
    until: dict[str, datetime] = {}
    for analysis_id, record in records.items():
        for key in blobs.all_refs(record.tool_calls):
            if key not in until or created[analysis_id] > until[key]:
                until[key] = created[analysis_id]
    if not until:
        return
    hashes = sorted(until)
    later = sa.bindparam("b_until", type_=CONTENT_BLOBS.c.archived_until.type)
    conn.execute(
        sa.update(CONTENT_BLOBS)
        .where(
            CONTENT_BLOBS.c.hash == sa.bindparam("b_hash"),
            sa.or_(CONTENT_BLOBS.c.archived_until.is_(None), CONTENT_BLOBS.c.archived_until < later),
        )
        .values(archived_until=later),
        [{"b_hash": key, "b_until": until[key]} for key in hashes],
    )
    # one query: a batch's pieces are at most BATCH x ~20 (a 2-year window of months)
    stmt = sa.select(CONTENT_BLOBS.c.hash, CONTENT_BLOBS.c.body).where(
        CONTENT_BLOBS.c.hash.in_(hashes), CONTENT_BLOBS.c.packed.is_(None)
    )
    bodies: dict[str, Any] = {key: body for key, body in conn.execute(stmt)}
    if bodies:
        conn.execute(
            sa.update(CONTENT_BLOBS)
            .where(CONTENT_BLOBS.c.hash == sa.bindparam("b_hash"), CONTENT_BLOBS.c.packed.is_(None))
            .values(packed=sa.bindparam("b_packed"), body=sa.null()),
            [{"b_hash": key, "b_packed": pack_blob(bodies[key])} for key in sorted(bodies)],
        )


def _write(
    conn: Connection,
    records: Mapping[str, ArchivedRecord],
    stored: Mapping[str, bytes],
    dictionary_id: str | None,
    raw: Mapping[str, bytes],
) -> None:
    """Insert the archives, delete the rows they hold, slim the ``analyses`` rows: one
    transaction (``conn``'s)."""
    if not records:
        return
    now = utc_now()
    conn.execute(
        sa.insert(ARCHIVES),
        [
            {
                "analysis_id": i,
                "dictionary_id": dictionary_id,
                "body": stored[i],
                "tool_calls": len(r.tool_calls),
                "raw_bytes": len(raw[i]),
                "archived_at": now,
            }
            for i, r in records.items()
        ],
    )
    ids = list(records)
    conn.execute(sa.delete(TOOL_CALLS).where(TOOL_CALLS.c.analysis_id.in_(ids)))
    conn.execute(
        sa.update(ANALYSES)
        .where(ANALYSES.c.id == sa.bindparam("b_id"))
        .values(
            state=sa.bindparam("b_state", type_=ANALYSES.c.state.type),
            report=None,
            report_json=sa.bindparam("b_report_json", type_=ANALYSES.c.report_json.type),
            archived_at=now,
        ),
        [
            {"b_id": i, "b_state": slim_state(r.state), "b_report_json": slim_report(r.report_json)}
            for i, r in records.items()
        ],
    )


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify` found: ``archives`` frames read back (decompressed with their
    dictionary and decoded), ``pieces`` packed tool-result pieces read back, and ``bad``: one
    ``(what, dictionary id or None, cause)`` per frame that failed."""

    archives: int
    pieces: int
    bad: list[tuple[str, str | None, str]]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "archives": self.archives,
            "pieces": self.pieces,
            "bad": [{"what": w, "dictionary": d, "cause": c} for w, d, c in self.bad],
        }


def verify(*, engine: Engine, on_batch: Callable[[int], None] | None = None) -> VerifyReport:
    """Read back every stored frame: each ``analysis_archives`` body with its dictionary (a
    missing or corrupt dictionary or frame is reported, :class:`ArchiveUnreadable`'s text) and
    each packed ``content_blobs`` piece; :data:`BATCH` rows per query (memory stays flat).
    ``on_batch``: called with the frames read so far."""
    bad: list[tuple[str, str | None, str]] = []
    archives = pieces = 0
    after = ""
    while True:
        with reading(engine) as conn:
            rows = conn.execute(
                sa.select(ARCHIVES.c.analysis_id, ARCHIVES.c.body, ARCHIVES.c.dictionary_id)
                .where(ARCHIVES.c.analysis_id > after)
                .order_by(ARCHIVES.c.analysis_id)
                .limit(BATCH)
            ).all()
            for row in rows:
                try:
                    read_frame(conn, row.analysis_id, row.body, row.dictionary_id)
                except ArchiveUnreadable as exc:
                    bad.append((f"analysis {row.analysis_id}", row.dictionary_id, str(exc)))
        if not rows:
            break
        archives += len(rows)
        after = rows[-1].analysis_id
        if on_batch is not None:
            on_batch(archives)
    after = ""
    while True:
        with reading(engine) as conn:
            packed = conn.execute(
                sa.select(CONTENT_BLOBS.c.hash, CONTENT_BLOBS.c.packed)
                .where(CONTENT_BLOBS.c.hash > after, CONTENT_BLOBS.c.packed.is_not(None))
                .order_by(CONTENT_BLOBS.c.hash)
                .limit(BATCH)
            ).all()
        for piece in packed:
            try:
                unpack_blob(piece.packed)
            except (zstandard.ZstdError, ValueError) as exc:
                bad.append((f"tool-result piece {piece.hash}", None, f"{type(exc).__name__}: {exc}"))
        if not packed:
            break
        pieces += len(packed)
        after = packed[-1].hash
    return VerifyReport(archives=archives, pieces=pieces, bad=bad)

"""The table of the ledger (``db.ledger``): the moves of an ``analyses`` row (:class:`Move`), what
each may do to the row (:data:`MOVES`: the statuses it moves from, those it may write, its fence
in words) and the check every move makes before it writes (:func:`check`, :class:`MoveRefused`).
``db.ledger`` does the moves and re-exports these names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from core import stages
from db.ledger_sql import FINISHED, QUEUED, RUNNING, UNFINISHED


class Move(StrEnum):
    """The moves of an ``analyses`` row (module docstring)."""

    CREATE = "create"
    CLAIM = "claim"
    COMPLETE = "complete"
    FINISH = "finish"
    HAND_OFF = "hand_off"
    END = "end"
    CANCEL = "cancel"
    KEEP = "keep"
    WAIT = "wait"
    TAKE = "take"
    GIVE_BACK = "give_back"


@dataclass(frozen=True)
class Rule:
    """One row of :data:`MOVES`.

    Attributes:
        sources: the statuses the row may be in (empty: no row yet).
        targets: the statuses the move may write; ``None``: the status stays as it is.
        again: the move may repeat on a row it already moved (a finished row, rewritten by a
            redelivered copy with the same finished status).
        fence: the rest of the guard, in words (the ``WHERE`` besides the status).
    """

    sources: frozenset[str]
    targets: frozenset[str] | None
    fence: str
    again: bool = False

    def allows(self, source: str | None, target: str | None) -> bool:
        """Whether the row in status ``source`` (``None``: no row) may move to ``target``
        (``None``: the status stays)."""
        if self.targets is None:
            return target is None and source in self.sources
        if target not in self.targets:
            return False
        return (
            (source is None and not self.sources)
            or source in self.sources
            or (self.again and source == target)
        )


_IN_STEP = "in the message's pass, checkpoint = the stage before the step"


#: The declared moves (module docstring): what each may do to the row, and under which fence.
MOVES: Final[Mapping[Move, Rule]] = {
    Move.CREATE: Rule(frozenset(), QUEUED, "no row with the id"),
    Move.CLAIM: Rule(UNFINISHED, RUNNING, f"{_IN_STEP}, nobody else holds a live lease"),
    Move.COMPLETE: Rule(UNFINISHED, RUNNING, f"{_IN_STEP}, the owner holds the lease (or nobody else)"),
    Move.FINISH: Rule(UNFINISHED, FINISHED, f"{_IN_STEP}, the owner holds the lease (or nobody else)"),
    Move.HAND_OFF: Rule(
        UNFINISHED, frozenset({stages.STAGES[0].status.value}), "(iteration, rank) forward, not archived"
    ),
    Move.END: Rule(UNFINISHED, FINISHED, "(iteration, rank) forward, not archived", again=True),
    Move.CANCEL: Rule(QUEUED, frozenset({stages.Status.FAILED.value}), "no checkpoint, no lease owner"),
    Move.KEEP: Rule(UNFINISHED, None, "the owner holds the lease (no owner: nobody does)"),
    Move.WAIT: Rule(UNFINISHED, None, "nobody holds the lease"),
    Move.TAKE: Rule(UNFINISHED, None, "the lease ran out, or the row is as it was read"),
    Move.GIVE_BACK: Rule(UNFINISHED, None, "the row is as the take left it"),
}

# Every status the table names is one of the stage table's, checked once here: a move then needs
# no lookup of its own, since a status outside the stage table is no move's target.
if not {s for rule in MOVES.values() for s in (*rule.sources, *(rule.targets or ()))} <= set(
    stages.ANALYSIS_STATUSES
):
    raise RuntimeError("the ledger's table names a status the stage table does not have")


class MoveRefused(ValueError):
    """A move the table (:data:`MOVES`) does not allow; nothing was written."""


def check(move: Move, *, source: str | None, target: str | None) -> None:
    """Refuse a move of a row in status ``source`` to ``target`` that :data:`MOVES` does not
    declare. Raises :class:`MoveRefused` naming the move and what its row allows."""
    rule = MOVES[move]
    if not rule.allows(source, target):
        allowed = "the status kept" if rule.targets is None else " | ".join(sorted(rule.targets))
        raise MoveRefused(
            f"the ledger has no move {move.value} from {source or 'no row'} to {target or 'the same status'} "
            f"(it moves {' | '.join(sorted(rule.sources)) or 'no row'} to {allowed})"
        )

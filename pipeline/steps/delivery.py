"""What one delivery of a step's message is, in the broker's words and without Celery's objects:
its task id, how often Celery retried it, whether the broker flags it as delivered again, and
the rows an earlier attempt could not write. The stage task (``tasks.base.StageTask``) reads
them from Celery's request; :func:`pipeline.steps.run.run_step` answers with the new state, or
with :class:`DropMessage` or ``pipeline.steps.backoff.RetryStep``, which the task turns back
into Celery's ``Ignore`` and ``retry``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Brokers that flag a message delivered again (``delivery_info["redelivered"]``): RabbitMQ
#: natively (AMQP ``basic.deliver``), kombu's Redis transport when it restores an unacked
#: message (``Channel._do_restore_message``: a lost worker, the visibility timeout). Other
#: kombu transports flag it elsewhere or not at all, so there every stage claims first.
REDELIVERY_FLAGGING_SCHEMES = frozenset({"redis", "rediss", "amqp", "amqps", "pyamqp"})


@dataclass(frozen=True)
class Delivery:
    """One delivery of a step's message.

    Attributes:
        task_id: the Celery task id (kept by a retry and a redelivery): the lease owner and a
            part of the rows' log context.
        retries: Celery retries before this one (0 on the first attempt); seeds the row ids
            (``r<retries>``), so a retry writes rows of its own and a redelivery the same ones.
        redelivered: the broker's flag: ``False`` only when the broker says this is the first
            delivery; ``None`` when it says nothing.
        broker_scheme: the scheme of the broker URL (``redis``, ``amqp``, ...), lower case.
        pending_rows / pending_llm_rows: ``tool_calls``/``llm_calls`` rows of earlier attempts
            that could not be written (the database was down), carried by the retry message.
    """

    task_id: str
    retries: int = 0
    redelivered: bool | None = None
    broker_scheme: str = ""
    pending_rows: list[dict[str, Any]] = field(default_factory=list)
    pending_llm_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def surely_first(self) -> bool:
        """The broker says this is the first delivery of the first attempt, and no rows are
        carried from an earlier one (a broker outside :data:`REDELIVERY_FLAGGING_SCHEMES`
        cannot say it)."""
        return (
            not self.retries
            and not self.pending_rows
            and not self.pending_llm_rows
            and self.redelivered is False
            and self.broker_scheme in REDELIVERY_FLAGGING_SCHEMES
        )


class DropMessage(Exception):
    """The message must be acked without continuing the chain (Celery's ``Ignore``): a
    duplicate or late copy, a step past its attempt cap, a checkpoint fenced out."""

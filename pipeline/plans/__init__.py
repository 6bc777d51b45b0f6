"""The plan packages: each package here exports the analysis types it implements (``PLANS``, a
tuple of :class:`pipeline.plans.base.Plan`) with the behaviour they add to the shared pipeline;
the table of names is ``core.plans``. :mod:`pipeline.plans.table` imports every package, one line
each, and ``pipeline.plan_hooks`` checks at the first lookup that the plans are exactly the table's
rows."""

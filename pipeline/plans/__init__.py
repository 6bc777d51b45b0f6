"""The plan packages, one per ``package`` of the plan table (``core.plans``): each defines
``PLANS``, name → :class:`pipeline.plan_hooks.Plan`, the behaviour its analysis types add to the
shared pipeline. ``pipeline.plan_hooks.plan_for`` imports them by name."""

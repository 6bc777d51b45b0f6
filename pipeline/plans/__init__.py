"""The plan packages: each package here registers the analysis types it implements
(``pipeline.plan_hooks.register_plan``) with the behaviour they add to the shared pipeline; the
table of names is ``core.plans``. ``pipeline.plan_hooks`` imports every package of this folder
once and checks that the registered plans are exactly the table's rows."""

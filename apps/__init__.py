"""finagent's front doors and products, built on the engine in :mod:`pipeline`.

The front doors: the command line (``apps.cli``) and the HTTP API with its web console
(``apps.api``). The products: watchlists and their scheduled runs, the recovery sweeper, the
backtest, the forward scorecard, the calibration fit, the risk-model evaluation, the ACL18
evaluation, replay, the doctor, metering and the charts of stored analyses. Each reaches the
engine through its public modules (``pipeline.service``, ``pipeline.producer``,
``pipeline.taskqueue``, ``pipeline.report``...); no engine module imports this package
(``lint-imports``, docs/architecture.md).
"""

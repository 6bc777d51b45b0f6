"""The paper broker (issue 4, seed 002): pure order logic, fee model, risk limits and metrics,
and the NYSE calendar. Persistence is ``db.trading_repo``; the tools are ``agents.tools.trading``
and ``agents.tools.portfolio``.
"""

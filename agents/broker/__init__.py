"""The paper broker (docs/design.md, "Paper trading"): order logic, fee model, risk limits and metrics, and
the NYSE
calendar. The ledger it fills into (orders, book, cash arithmetic) is ``core.ledger``;
persistence is ``db.trading_repo``; the tools are ``agents.tools.trading`` and
``agents.tools.portfolio``.
"""

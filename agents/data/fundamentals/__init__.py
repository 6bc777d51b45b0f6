"""Offline fundamentals providers (S&P 500 snapshot, Alpha Vantage statements, SEC companyfacts)."""

"""Market-data providers behind one interface (see :mod:`agents.data.market.base`)."""

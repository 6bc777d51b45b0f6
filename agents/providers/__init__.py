"""Market-data providers behind one interface (see :mod:`agents.providers.base`)."""

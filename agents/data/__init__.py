"""agents.data."""

"""agents.data.options."""

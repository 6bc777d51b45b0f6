"""agents.quant."""

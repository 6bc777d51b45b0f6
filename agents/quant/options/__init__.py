"""agents.quant.options."""

"""Restricted execution of user-supplied indicator scripts (docs/design.md, "Indicator sandbox").

:mod:`agents.quant.sandbox.runner` is the child-side program; it is run as a separate process by
:func:`agents.tools.sandbox.execute_script`, which enforces the wall-clock timeout from outside.
The runner imports nothing from this project, so the child starts in isolated mode (``python -I``).
"""

"""The bar cache of ``agents.tools.bars.fetch_bars`` (the remote path with Redis is in
``tests/agents/providers/test_shared.py``)."""

from __future__ import annotations

import weakref
from datetime import date

from agents.providers.embedded import EmbeddedProvider
from agents.tools import bars


def test_bar_cache_never_serves_another_providers_frame() -> None:
    """A new provider may reuse a collected one's id(): the cache checks identity on a hit."""

    class Marked(EmbeddedProvider):
        def bars(self, **kw):  # type: ignore[no-untyped-def,override]
            frame = super().bars(**kw).copy()
            frame.attrs["marked"] = True
            return frame

    old, new = EmbeddedProvider(), Marked()
    window = ("IBM", date(2012, 1, 3), date(2012, 3, 30))
    stale = bars.fetch_bars(provider=old, symbol=window[0], start=window[1], end=window[2])
    # simulate id reuse: an entry under the new provider's id whose owner is another object
    with bars._cache_lock:
        bars._cache[(id(new), *window)] = (weakref.ref(old), stale)
    fresh = bars.fetch_bars(provider=new, symbol=window[0], start=window[1], end=window[2])
    assert fresh.attrs.get("marked") is True

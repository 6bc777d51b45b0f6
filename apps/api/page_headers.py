"""The headers of every HTML page the gateway serves: the console's pages
(``apps.api.console.views``) and the HTML digest of a watchlist run
(``apps.api.routes.runs``)."""

from __future__ import annotations

from typing import Final

#: Headers of every console page: no framing (clickjacking), scripts, styles and images from
#: the gateway only, forms post back to it, no caching of a tenant's pages, no full URL leaked
#: to other sites (OWASP Secure Headers). Inline ``style`` attributes stay allowed: the rendered
#: Markdown aligns table columns with them.
PAGE_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}

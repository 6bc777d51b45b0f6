"""``/docs`` (Swagger UI) and ``/redoc`` served offline.

FastAPI's default pages load Swagger UI and ReDoc from a CDN (cdn.jsdelivr.net), so without
internet ``/docs`` is a blank page. The assets come instead from the PyPI package
``fastapi-offline`` (MIT; it ships ``swagger-ui-bundle.js``, ``swagger-ui.css``,
``redoc.standalone.js`` and a favicon in ``fastapi_offline/static``), mounted under
:data:`STATIC_PATH`; the HTML is FastAPI's own ``get_swagger_ui_html``/``get_redoc_html`` with
those URLs. Nothing is copied into this repository.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: Where the bundled assets are served (public, like the docs pages).
STATIC_PATH = "/docs-static"


def assets_dir() -> Path:
    """The folder of the bundled Swagger UI/ReDoc assets inside the ``fastapi_offline`` wheel.

    Raises:
        FileNotFoundError: the package is installed without its ``static`` folder.
    """
    path = Path(str(files("fastapi_offline") / "static"))
    if not (path / "swagger-ui-bundle.js").is_file():
        raise FileNotFoundError(f"fastapi_offline ships no swagger-ui-bundle.js under {path}")
    return path


def install_offline_docs(api: FastAPI) -> None:
    """Serve ``/docs``, its OAuth2 redirect page and ``/redoc`` on ``api`` from local assets.

    ``api`` must be created with ``docs_url=None, redoc_url=None`` (else FastAPI's CDN pages
    answer first). The pages need no API key, like ``openapi.json``.
    """
    title = api.title
    openapi_url = api.openapi_url or "/openapi.json"
    oauth2_redirect_url = "/docs/oauth2-redirect"
    api.mount(STATIC_PATH, StaticFiles(directory=assets_dir()), name="docs-static")

    @api.get("/docs", include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} - Swagger UI",
            oauth2_redirect_url=oauth2_redirect_url,
            swagger_js_url=f"{STATIC_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_PATH}/favicon.png",
        )

    @api.get(oauth2_redirect_url, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @api.get("/redoc", include_in_schema=False)
    def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{title} - ReDoc",
            redoc_js_url=f"{STATIC_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC_PATH}/favicon.png",
            with_google_fonts=False,
        )

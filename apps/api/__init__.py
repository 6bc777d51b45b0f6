"""The HTTP gateway (docs/design.md, "HTTP gateway"): a FastAPI app served by uvicorn (``finagent serve``).

``apps.api.app.create_app`` builds it; ``apps.api.auth`` holds the API keys;
``apps.api.schemas`` the request and response models (OpenAPI at ``/docs``).
"""

"""The HTTP gateway (docs/design.md, "HTTP gateway"): a FastAPI app served by uvicorn (``finagent serve``).

``pipeline.api.app.create_app`` builds it; ``pipeline.api.auth`` holds the API keys;
``pipeline.api.schemas`` the request and response models (OpenAPI at ``/docs``).
"""

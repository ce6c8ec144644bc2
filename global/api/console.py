"""The admin web console: `/` serves its page, `/console/` its static files. The page holds
no data; it calls the REST API with the token the user logs in with."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

from volcano_global.console import STATIC

# Scripts, styles, images and API calls from this origin only; no inline script.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(include_in_schema=False)


@router.get("/")
async def console_page() -> FileResponse:
    return FileResponse(STATIC / "index.html", headers=SECURITY_HEADERS)


class _ConsoleFiles(StaticFiles):
    """The console's files with the page's headers: `/console/index.html` is the page too."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(SECURITY_HEADERS)
        return response


def mount(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/console", _ConsoleFiles(directory=STATIC), name="console")

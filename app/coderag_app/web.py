"""The web page (X8) as static files, and the read-only file-range endpoint it opens."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Query
from fastapi.responses import FileResponse

from coderag.deps import CatalogDep, RepoKeyDep, SettingsDep, UserDep
from coderag.errors import NotFound
from coderag.file_ranges import FileRange, read_range
from coderag.responses import errors

WEB_DIR = Path(__file__).parent / "web"
"""The page's HTML, CSS and JavaScript; no build step, nothing fetched from the network."""

ASSETS = {
    "app.js": "text/javascript",
    "i18n.js": "text/javascript",
    "highlight.js": "text/javascript",
    "markdown.js": "text/javascript",
    "app.css": "text/css",
}
"""Files served under /static/, by name (a fixed list, so no path reaches the disk unchecked)."""

router = APIRouter(tags=["web"])


@router.get("/", include_in_schema=False)
def page() -> FileResponse:
    """The single page: repositories, search, chat, file view."""
    return FileResponse(WEB_DIR / "index.html", media_type="text/html")


@router.get("/static/{name}", include_in_schema=False)
def asset(name: str) -> FileResponse:
    """One of the page's scripts or its stylesheet."""
    if name not in ASSETS:
        raise NotFound(f"no asset {name!r}")
    return FileResponse(WEB_DIR / name, media_type=ASSETS[name])


@router.get("/repos/{name}/file", responses=errors(400, 404, 409, 503))
def file_range(
    name: RepoKeyDep,
    catalog: CatalogDep,
    settings: SettingsDep,
    _user: UserDep,
    path: str = Query(..., min_length=1, max_length=1000, description="as /search gives it"),
    start: int = Query(1, description="first line, 1-based"),
    end: int | None = Query(None, description="last line, inclusive; default the end"),
) -> FileRange:
    """Lines of a file the index holds (nothing outside the repository's indexed files)."""
    return read_range(catalog, settings, name, path, start, end)

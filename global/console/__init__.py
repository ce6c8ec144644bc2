"""The admin web console: static files (`static/`), plain HTML, CSS and JavaScript with no
build step, served by the Global at `/` and `/console/`. Everything it shows comes from the
REST API with the token the user logs in with."""

from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"

"""A look at the database before the server starts, so that what an operator must fix (a
database not created yet, a wrong password, nothing listening) is one line naming the fix
instead of the migration's traceback."""

from __future__ import annotations

from sqlalchemy.engine import make_url

CONNECT_TIMEOUT_S = 10.0


async def database_problem(url: str) -> str | None:
    """Why the server cannot use the database at `url` (None: it can connect)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return None  # SQLite: the engine creates the file and its folder
    import asyncpg

    where = f"{parsed.host or 'localhost'}:{parsed.port or 5432}"
    try:
        connection = await asyncpg.connect(
            host=parsed.host,
            port=parsed.port,
            user=parsed.username,
            password=parsed.password,
            database=parsed.database,
            timeout=CONNECT_TIMEOUT_S,
        )
    except asyncpg.InvalidCatalogNameError:
        return (
            f"database {parsed.database!r} does not exist on {where}: create it "
            f"(createdb -h {parsed.host or 'localhost'} -p {parsed.port or 5432}"
            f"{' -U ' + parsed.username if parsed.username else ''} {parsed.database}); the "
            "server creates its tables"
        )
    except asyncpg.InvalidAuthorizationSpecificationError as exc:
        return f"Postgres at {where} refused user {parsed.username!r}: {exc}"
    except asyncpg.InvalidPasswordError:
        return f"Postgres at {where} refused the password of user {parsed.username!r}"
    except (OSError, TimeoutError) as exc:
        return (
            f"cannot connect to Postgres at {where} ({exc}): is it running, and is it this address?"
        )
    await connection.close()
    return None

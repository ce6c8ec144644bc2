"""The alembic migration chain (installed as `volcano_global.migrations`)."""

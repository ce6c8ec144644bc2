"""Persistence: SQLAlchemy models, engine and session handling, migrations on start."""

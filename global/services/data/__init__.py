"""Data as inventory and as jobs' needs (docs/data.md): DataSources and where they are
(`sources.py`, with `add_locality` for staging and `add_present` for agents' reports),
DataSourceClaims (`claims.py`), the newest checkpoint's place (`checkpoints.py`) and what a
round reads of all of them (`needs.py`)."""

from volcano_global.services.data.needs import data_needs
from volcano_global.services.data.sources import Presence, add_locality, add_present, source_uris

__all__ = ["Presence", "add_locality", "add_present", "data_needs", "source_uris"]

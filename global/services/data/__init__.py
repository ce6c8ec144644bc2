"""Data as inventory and as jobs' needs (docs/data.md): DataSources and where they are
(`sources.py`, with `add_locality` for staging and agents' reports), DataSourceClaims
(`claims.py`), the newest checkpoint's place (`checkpoints.py`) and what a round reads of all
of them (`needs.py`)."""

from volcano_global.services.data.needs import data_needs
from volcano_global.services.data.sources import add_locality, source_uris

__all__ = ["add_locality", "data_needs", "source_uris"]

"""gRPC side of the Global: thin servicers over the same services as the REST API."""

"""REST API v1: thin routers that parse, call a service and shape the response."""

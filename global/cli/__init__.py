"""The `vglobal` command line."""

"""Modules written by `netgen build` land here; import them as `from generated.<name> import Layer`."""

"""The HTTP routes, one module per group; each has ``router(service)`` for the app."""

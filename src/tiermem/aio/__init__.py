"""Sync and async from one source: typed async twins (:mod:`.twins`), one object per event
loop (:mod:`.loops`) and the shared HTTP client with its retry (:mod:`.http`)."""

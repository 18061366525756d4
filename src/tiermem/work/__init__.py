"""Background work claimed from the store: how a message becomes vectors (:mod:`.vectors`,
a long one's :mod:`.passages` too; :mod:`.instructions` found without a model), the
in-process write queue (:mod:`.archiver`), the worker that claims work with a lease
(:mod:`.worker`) and a process that only works (:mod:`.process`)."""

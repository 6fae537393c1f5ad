"""The event contract as code: the reason vocabulary (:mod:`.reasons`) and the typed events."""

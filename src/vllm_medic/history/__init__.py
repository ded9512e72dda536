"""The `history`, `report` and `diff` commands: the floor above the run store and the renderers.

They read rows through :mod:`vllm_medic.store` and draw them with :mod:`vllm_medic.report`; neither of
those imports this package, so the store stays below the renderers (report.html reads store.views).
"""

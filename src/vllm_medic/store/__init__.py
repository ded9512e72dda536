"""Run history (SQLite by default, any SQLAlchemy URL); its commands live in :mod:`vllm_medic.history`.

Writers use :func:`vllm_medic.store.api.open_store` and the :class:`~vllm_medic.store.api.Store` methods;
the shapes the acceptance sheet reads from step data and events are documented in
:mod:`vllm_medic.store.views` and ``docs/history.md``.
"""

"""The evaluation service: ``goldeval serve`` (REST API, run page, workers) and
``goldeval worker`` (workers only), over the run store. An optional extra:
``pip install -e '.[server]'`` (FastAPI, uvicorn, prometheus-client). See docs/service.md.

Only :mod:`goldeval.server.app` and :mod:`goldeval.server.main` need the web framework; the
queue (:mod:`goldeval.store.queue`), the worker (:mod:`goldeval.server.worker`) and the
key handling (:mod:`goldeval.server.auth`) are plain Python.
"""

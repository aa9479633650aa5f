"""The evaluation service: ``goldeval serve`` (REST API, run page, workers) and
``goldeval worker`` (workers only), over the run store. An optional extra:
``pip install -e '.[server]'`` (FastAPI, uvicorn, prometheus-client). See docs/service.md.

Only the HTTP layer needs the web framework (:mod:`goldeval.server.app`, its ``routes_*``
routers, ``deps``, ``errors``, ``middleware``) and :mod:`goldeval.server.main`; the
queue (:mod:`goldeval.store.queue`), the worker (:mod:`goldeval.server.worker`) and the
key handling (:mod:`goldeval.server.auth`) are plain Python.
"""

"""gunicorn's settings for the web process, read from the working directory however it is started (make run, the
image, compose, the manifests); what each does is in portal/gunicorn_hooks.py."""

from portal.gunicorn_hooks import answer_limits_as_json


def post_worker_init(worker):
    answer_limits_as_json(worker)

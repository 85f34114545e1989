"""`gpu`: the GPU Portal's command line. It talks only to the portal's REST API (/api/v1/) over HTTP, never to the
portal's code or database: import-linter holds that (pyproject.toml)."""

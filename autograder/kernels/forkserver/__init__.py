"""The sandboxed fork server (server.py, run by its file path) that starts student kernels pre-imported."""
